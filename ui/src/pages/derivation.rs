//! Derivation: the graph around an asset (its parents and its descendants, as far as the key
//! may see), drawn as SVG, with the same edges listed as text.

use std::collections::{HashMap, HashSet, VecDeque};

use axum::extract::{Query, State};
use maud::html;
use registry_core::access::{self, Sight};
use registry_core::principal::Principal;
use registry_services::Services;
use serde::Deserialize;

use crate::layout::{self, scalar, scroll, status, to_json};
use crate::svg::{Node, graph};
use crate::{Console, Ctx, Page, UiError};

/// How many edges away from the asset the graph reaches, each way.
const DEPTH: i32 = 4;
/// Most nodes drawn.
const MAX_NODES: usize = 60;

#[derive(Debug, Deserialize)]
pub struct DerivationQuery {
    #[serde(default)]
    id: String,
}

struct Found {
    nodes: Vec<Node>,
    edges: Vec<(String, String, String)>,
    meta: HashMap<String, (String, String)>,
}

fn label(
    s: &Services,
    p: &Principal,
    id: &str,
) -> Result<Option<(String, String, String)>, UiError> {
    Ok(s.backends
        .store
        .get(id)?
        .filter(|r| registry_services::overview::may_see(p, r))
        .map(|r| {
            let kind = r.meta.kind.as_str().to_string();
            let short: String = id.chars().take(8).collect();
            // A memory seen without content keeps its lookup key (the fact's subject) back.
            let name = r
                .lookup_key
                .clone()
                .filter(|_| access::sight(p, &r.meta) == Sight::Full)
                .unwrap_or(short);
            (
                format!("{kind} {name}"),
                kind,
                r.meta.status.as_str().to_string(),
            )
        }))
}

fn walk(s: &Services, p: &Principal, root: &str) -> Result<Found, UiError> {
    let Some((l, k, st)) = label(s, p, root)? else {
        return Err(UiError::not_found(format!("no asset {root}")));
    };
    let mut nodes = vec![Node {
        id: root.to_string(),
        label: l,
        layer: 0,
    }];
    let mut meta = HashMap::from([(root.to_string(), (k, st))]);
    let mut seen = HashSet::from([root.to_string()]);
    let mut edges = vec![];
    for up in [true, false] {
        let mut queue = VecDeque::from([(root.to_string(), 0)]);
        while let Some((id, depth)) = queue.pop_front() {
            if depth >= DEPTH || nodes.len() >= MAX_NODES {
                continue;
            }
            let found = if up {
                s.backends.store.edges_to(&id)?
            } else {
                s.backends.store.edges_from(&id)?
            };
            for e in found {
                let other = if up {
                    e.parent.clone()
                } else {
                    e.child.clone()
                };
                // An asset the key may not see is left out, edge and all.
                let Some((l, k, st)) = label(s, p, &other)? else {
                    continue;
                };
                edges.push((
                    e.parent.clone(),
                    e.child.clone(),
                    scalar(&to_json(&e.relation)),
                ));
                if seen.insert(other.clone()) && nodes.len() < MAX_NODES {
                    let layer = if up { -(depth + 1) } else { depth + 1 };
                    nodes.push(Node {
                        id: other.clone(),
                        label: l,
                        layer,
                    });
                    meta.insert(other.clone(), (k, st));
                    queue.push_back((other, depth + 1));
                }
            }
        }
    }
    edges.sort();
    edges.dedup();
    Ok(Found { nodes, edges, meta })
}

pub async fn page(State(c): State<Console>, ctx: Ctx, Query(q): Query<DerivationQuery>) -> Page {
    let p = ctx.principal.clone();
    let id = q.id.trim().to_string();
    let (found, recent) = c
        .run(move |s| {
            let found = if id.is_empty() {
                None
            } else {
                Some(walk(s, &p, &id)?)
            };
            let (recent, _) = s.list_assets(&p, None, None, 15)?;
            let recent: Vec<(String, String)> = recent
                .iter()
                .map(|r| {
                    (
                        r.meta.id.clone(),
                        format!(
                            "{} {}",
                            r.meta.kind.as_str(),
                            r.lookup_key
                                .clone()
                                .filter(|_| access::sight(&p, &r.meta) == Sight::Full)
                                .unwrap_or_else(|| r.meta.id.clone())
                        ),
                    )
                })
                .collect();
            Ok((found, recent))
        })
        .await?;
    let body = html! {
        form method="get" action="/ui/derivation" class="filter" {
            label for="id" { "Asset id" }
            input id="id" name="id" value=(q.id) required;
            button type="submit" { "Show graph" }
        }
        @if let Some(f) = &found {
            section aria-labelledby="h-graph" {
                h2 id="h-graph" { "Parents above, descendants below" }
                div class="scroll" role="region" aria-label="Derivation graph" tabindex="0" {
                    (graph(&q.id, &f.nodes, &f.edges))
                }
                h3 { "Edges" }
                @if f.edges.is_empty() { p { "This asset has no parent and no descendant." } }
                (scroll("Edges", html! {
                    table data-testid="edges" {
                        thead { tr { th scope="col" { "Parent" } th scope="col" { "Relation" } th scope="col" { "Child" } } }
                        tbody {
                            @for (from, to, rel) in &f.edges {
                                tr {
                                    td { a href=(format!("/ui/derivation?id={from}")) { (from) } " " @if let Some((k, st)) = f.meta.get(from) { (k) " " (status(st)) } }
                                    td { (rel) }
                                    td { a href=(format!("/ui/derivation?id={to}")) { (to) } " " @if let Some((k, st)) = f.meta.get(to) { (k) " " (status(st)) } }
                                }
                            }
                        }
                    }
                }))
            }
        }
        section aria-labelledby="h-recent" {
            h2 id="h-recent" { "Assets" }
            ul { @for (id, l) in &recent { li { a href=(format!("/ui/derivation?id={id}")) { (l) } } } }
        }
    };
    Ok(layout::page(&ctx, "/ui/derivation", "Derivation", body))
}
