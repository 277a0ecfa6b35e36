//! Plots drawn as inline SVG on the server: stacked bars per day, and a layered derivation
//! graph. Every figure has a text alternative (its title and a table of the same numbers).

use maud::{Markup, html};
use registry_services::overview::Series;

const PALETTE: &[&str] = &[
    "#1f5fa8", "#b8461b", "#2e7d32", "#6a3d9a", "#8d6e00", "#00838f", "#ad1457", "#455a64",
];

/// Stacked bars, one per day of `s`, one colour per series, with a legend and the numbers.
pub fn bars(title: &str, s: &Series) -> Markup {
    let (w, h, pad) = (640.0_f64, 180.0_f64, 28.0_f64);
    let n = s.days.len().max(1) as f64;
    let totals: Vec<u64> = (0..s.days.len())
        .map(|i| s.series.values().map(|v| v[i]).sum())
        .collect();
    let max = totals.iter().copied().max().unwrap_or(0).max(1) as f64;
    let bw = (w - pad) / n;
    let total: u64 = totals.iter().sum();
    let label = format!("{title}: {total} in {} days", s.days.len());
    let mut rects = vec![];
    for i in 0..s.days.len() {
        let x = pad + i as f64 * bw + 2.0;
        let mut y = h;
        for (k, v) in s.series.values().enumerate() {
            if v[i] > 0 {
                let bh = v[i] as f64 / max * (h - 16.0);
                y -= bh;
                rects.push((x, y, (bw - 4.0).max(1.0), bh, PALETTE[k % PALETTE.len()]));
            }
        }
    }
    html! {
        figure class="plot" {
            svg viewBox=(format!("0 0 {w} {}", h + 24.0)) role="img" aria-label=(label)
                preserveAspectRatio="xMidYMid meet" {
                title { (label) }
                line x1=(pad) y1=(h) x2=(w) y2=(h) stroke="#444" {}
                text x="0" y="12" font-size="11" fill="#222" { (max as u64) }
                text x="0" y=(h) font-size="11" fill="#222" { "0" }
                @for (x, y, bw, bh, fill) in &rects {
                    rect x=(format!("{x:.1}")) y=(format!("{y:.1}")) width=(format!("{bw:.1}"))
                        height=(format!("{bh:.1}")) fill=(fill) {}
                }
                @for (i, day) in s.days.iter().enumerate() {
                    @if i % 2 == 0 || s.days.len() <= 8 {
                        text x=(format!("{:.1}", pad + i as f64 * bw + 2.0)) y=(h + 16.0) font-size="10" fill="#222" {
                            (day.format("%m-%d"))
                        }
                    }
                }
            }
            figcaption {
                (title)
                @if s.series.is_empty() { " (nothing recorded in this window)" }
                ul class="legend" {
                    @for (k, (name, v)) in s.series.iter().enumerate() {
                        li {
                            span class="swatch" style=(format!("background:{}", PALETTE[k % PALETTE.len()])) {}
                            (name) ": " (v.iter().sum::<u64>())
                        }
                    }
                }
            }
            details {
                summary { "Numbers of " (title) }
                div class="scroll" role="region" aria-label=(format!("{title} numbers")) tabindex="0" {
                    table {
                        thead { tr { th scope="col" { "Day" } @for name in s.series.keys() { th scope="col" { (name) } } } }
                        tbody {
                            @for (i, day) in s.days.iter().enumerate() {
                                tr { th scope="row" { (day) } @for v in s.series.values() { td { (v[i]) } } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One node of a derivation graph: its id, a label, and its layer (negative: ancestors,
/// 0: the asset, positive: descendants).
#[derive(Debug, Clone)]
pub struct Node {
    pub id: String,
    pub label: String,
    pub layer: i32,
}

/// The graph in layers, top to bottom (ancestors above, descendants below), edges as lines
/// from parent to child; each node links to its own graph (so the figure is a labelled group,
/// not an image: an image's children cannot be links).
pub fn graph(root: &str, nodes: &[Node], edges: &[(String, String, String)]) -> Markup {
    let mut layers: std::collections::BTreeMap<i32, Vec<&Node>> = Default::default();
    for n in nodes {
        layers.entry(n.layer).or_default().push(n);
    }
    let (nw, nh, gapx, gapy) = (170.0_f64, 40.0_f64, 20.0_f64, 60.0_f64);
    let widest = layers.values().map(Vec::len).max().unwrap_or(1) as f64;
    let w = (widest * (nw + gapx)).max(nw + gapx);
    let h = layers.len().max(1) as f64 * (nh + gapy);
    let mut pos = std::collections::HashMap::new();
    for (row, (_, ns)) in layers.iter().enumerate() {
        let off = (w - ns.len() as f64 * (nw + gapx)) / 2.0;
        for (col, n) in ns.iter().enumerate() {
            let x = off + col as f64 * (nw + gapx) + gapx / 2.0;
            let y = row as f64 * (nh + gapy) + 10.0;
            pos.insert(n.id.as_str(), (x, y));
        }
    }
    let label = format!(
        "Derivation graph of {root}: {} assets, {} edges",
        nodes.len(),
        edges.len()
    );
    html! {
        svg class="graph" viewBox=(format!("0 0 {w:.0} {h:.0}")) role="group" aria-label=(label) {
            title { (label) }
            defs {
                marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto" {
                    path d="M 0 0 L 10 5 L 0 10 z" fill="#444" {}
                }
            }
            @for (from, to, _) in edges {
                @if let (Some((x1, y1)), Some((x2, y2))) = (pos.get(from.as_str()), pos.get(to.as_str())) {
                    line x1=(format!("{:.1}", x1 + nw / 2.0)) y1=(format!("{:.1}", y1 + nh))
                        x2=(format!("{:.1}", x2 + nw / 2.0)) y2=(format!("{y2:.1}"))
                        stroke="#444" marker-end="url(#arrow)" {}
                }
            }
            @for n in nodes {
                @if let Some((x, y)) = pos.get(n.id.as_str()) {
                    a href=(format!("/ui/derivation?id={}", n.id)) aria-label=(format!("Graph of {}", n.label)) {
                        rect x=(format!("{x:.1}")) y=(format!("{y:.1}")) width=(nw) height=(nh) rx="6"
                            fill=(if n.id == root { "#fff3c4" } else { "#eef3fb" }) stroke="#1f5fa8" {}
                        text x=(format!("{:.1}", x + 8.0)) y=(format!("{:.1}", y + 24.0)) font-size="12" fill="#111" {
                            (truncate(&n.label, 24))
                        }
                    }
                }
            }
        }
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}
