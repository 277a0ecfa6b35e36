//! Trains the instruction classifier on the corpus's train split and writes
//! `model/instruction.lr` and `model/instruction.json`.
//!
//! Hyper-parameters and the decision threshold are chosen by 5-fold cross-validation over the
//! train split, folds drawn by phrasing group (a group never sits on both sides of a fold), on
//! the whole detector (rules + classifier) as the gate would use it for a user statement. The
//! test split is never read here.
//!
//! `cargo run -p registry-detect --bin train [-- --errors]` (`--errors` lists the train
//! examples that cross-validation gets wrong).

use std::path::Path;

use registry_detect::classifier::{self, Features, TrainConfig};
use registry_detect::corpus::{self, Example, Tally, blocked_as_user_statement};
use registry_detect::{Analysis, FindingKind, analyse, decide, scan_sensitive};

const FOLDS: u64 = 5;
/// The cross-validated kept rate a threshold must reach; among those, the highest block rate.
const MIN_KEPT: f64 = 0.985;

fn fold_of(group: &str) -> u64 {
    // FNV-1a: stable across platforms and releases, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in group.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h % FOLDS
}

struct Prepared<'a> {
    ex: &'a Example,
    analysis: Analysis,
    findings: Vec<FindingKind>,
}

/// The training vector of an example: its single window (corpus texts are short).
fn train_vector(p: &Prepared) -> Features {
    p.analysis.windows[0].clone()
}

fn tally(ps: &[Prepared], scores: &[f32], threshold: f32) -> Tally {
    let mut t = Tally::default();
    for (p, s) in ps.iter().zip(scores) {
        let d = decide(&p.analysis, *s, threshold);
        t.add(p.ex.is_attack(), blocked_as_user_statement(&d, &p.findings));
    }
    t
}

/// Out-of-fold scores for every example.
fn cross_validate(ps: &[Prepared], cfg: TrainConfig) -> Vec<f32> {
    let mut scores = vec![0f32; ps.len()];
    for f in 0..FOLDS {
        let (mut xs, mut ys) = (vec![], vec![]);
        for p in ps
            .iter()
            .filter(|p| fold_of(&p.ex.group) != f && p.ex.trains_classifier())
        {
            xs.push(train_vector(p));
            ys.push(p.ex.is_attack());
        }
        let m = classifier::train(&xs, &ys, cfg);
        for (i, p) in ps.iter().enumerate() {
            if fold_of(&p.ex.group) == f {
                scores[i] = registry_detect::score(&p.analysis, &m);
            }
        }
    }
    scores
}

/// The threshold with the highest block rate among those keeping at least `MIN_KEPT`; the
/// middle of the best plateau, so that the choice does not sit on an edge.
fn choose_threshold(ps: &[Prepared], scores: &[f32]) -> (f32, Tally) {
    let grid: Vec<f32> = (5..=95).map(|i| i as f32 / 100.0).collect();
    let tallies: Vec<Tally> = grid.iter().map(|t| tally(ps, scores, *t)).collect();
    let ok = |t: &Tally| t.kept_rate() >= MIN_KEPT;
    let best = tallies.iter().filter(|t| ok(t)).map(|t| t.blocked).max();
    let plateau: Vec<usize> = match best {
        Some(b) => (0..grid.len())
            .filter(|&i| ok(&tallies[i]) && tallies[i].blocked == b)
            .collect(),
        // Nothing keeps enough: the most conservative threshold.
        None => vec![grid.len() - 1],
    };
    let i = plateau[plateau.len() / 2];
    (grid[i], tallies[i])
}

fn main() {
    let errors = std::env::args().any(|a| a == "--errors");
    let all = corpus::load_default().unwrap_or_else(|e| panic!("corpus: {e}"));
    let train: Vec<&Example> = all.iter().filter(|e| e.split == "train").collect();
    let ps: Vec<Prepared> = train
        .iter()
        .map(|ex| Prepared {
            ex,
            analysis: analyse(&ex.text),
            findings: scan_sensitive(&ex.text),
        })
        .collect();
    assert!(
        ps.iter().all(|p| p.analysis.windows.len() == 1),
        "corpus texts are scored whole"
    );
    let attacks = ps.iter().filter(|p| p.ex.is_attack()).count();
    println!(
        "train split: {} examples ({attacks} attacks, {} legit), {FOLDS}-fold CV by group",
        ps.len(),
        ps.len() - attacks
    );
    let rules_only = tally(&ps, &vec![0.0; ps.len()], 1.0);
    println!(
        "rules alone:         block {:.1}%  kept {:.1}%",
        100.0 * rules_only.block_rate(),
        100.0 * rules_only.kept_rate()
    );
    let mut best: Option<(TrainConfig, f32, Tally, Vec<f32>)> = None;
    for l2 in [1e-5f32, 1e-4, 1e-3] {
        for epochs in [20usize, 40] {
            let cfg = TrainConfig {
                l2,
                epochs,
                ..TrainConfig::default()
            };
            let scores = cross_validate(&ps, cfg);
            let (t, tal) = choose_threshold(&ps, &scores);
            println!(
                "l2 {l2:<7} epochs {epochs:<3} threshold {t:.2}  CV block {:.1}%  kept {:.1}%",
                100.0 * tal.block_rate(),
                100.0 * tal.kept_rate()
            );
            let better = best
                .as_ref()
                .is_none_or(|(_, _, b, _)| (tal.blocked, tal.kept) > (b.blocked, b.kept));
            if better {
                best = Some((cfg, t, tal, scores));
            }
        }
    }
    let (cfg, threshold, cv, scores) = best.expect("a configuration");
    println!(
        "chosen: l2 {} epochs {} threshold {threshold:.2}  CV block {:.1}%  kept {:.1}%",
        cfg.l2,
        cfg.epochs,
        100.0 * cv.block_rate(),
        100.0 * cv.kept_rate()
    );
    if errors {
        for (p, s) in ps.iter().zip(&scores) {
            let d = decide(&p.analysis, *s, threshold);
            let blocked = blocked_as_user_statement(&d, &p.findings);
            if blocked != p.ex.is_attack() {
                println!(
                    "  {} [{}] {:.2} {:?} {:?}: {}",
                    if blocked { "FALSE BLOCK" } else { "MISSED" },
                    p.ex.class,
                    s,
                    d.verdict,
                    d.signal_names(),
                    p.ex.text.replace('\n', "\\n")
                );
            }
        }
    }
    let learners: Vec<&Prepared> = ps.iter().filter(|p| p.ex.trains_classifier()).collect();
    let xs: Vec<Features> = learners.iter().map(|p| train_vector(p)).collect();
    let ys: Vec<bool> = learners.iter().map(|p| p.ex.is_attack()).collect();
    let mut model = classifier::train(&xs, &ys, cfg);
    model.threshold = threshold;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("model");
    std::fs::write(dir.join("instruction.lr"), model.to_bytes()).expect("write model");
    let meta = serde_json::json!({
        "format_version": classifier::FORMAT_VERSION,
        "dim": classifier::DIM,
        "weights": model.weights.len(),
        "threshold": threshold,
        "config": {
            "epochs": cfg.epochs,
            "learning_rate": cfg.learning_rate,
            "l2": cfg.l2,
            "seed": cfg.seed,
        },
        "train": {"examples": ps.len(), "attacks": attacks, "legit": ps.len() - attacks},
        "cross_validation": {
            "folds": FOLDS,
            "by": "group",
            "min_kept": MIN_KEPT,
            "block_rate": cv.block_rate(),
            "kept_rate": cv.kept_rate(),
        },
    });
    std::fs::write(
        dir.join("instruction.json"),
        serde_json::to_string_pretty(&meta).expect("json") + "\n",
    )
    .expect("write model metadata");
    println!(
        "wrote model/instruction.lr ({} weights) and model/instruction.json",
        model.weights.len()
    );
}
