//! Trains the instruction classifier on the corpus's train split and writes
//! `registry/detect/model/instruction.lr` and `instruction.json`. The corpus is read in the
//! order of its manifest (`corpus/manifest.json`): the model depends on that order.
//!
//! Hyper-parameters, the decision threshold and the veto are chosen by 5-fold
//! cross-validation over the train split, folds drawn by phrasing group (a group never sits on
//! both sides of a fold), on the whole detector (rules + classifier) as the gate would use it
//! for a user statement. The test split is never read here.
//!
//! The chosen threshold must keep, cross-validated, at least 97% of the legitimate examples
//! outside the hard topics (`hard_negative`, `ai_discussion`) and at least 90% of those.
//!
//! It then trains the second opinion (`model/vector.json`, see `registry_detect::vector`): a
//! logistic regression over each text's multilingual-e5-small vector and the classifier's
//! out-of-fold logit, cross-validated with the same folds, its threshold and veto chosen by
//! the same floors. The embedding model must be installed (`scripts/fetch-models.sh`).
//!
//! `cargo run --release -p registry-detect-train --bin train [-- OPTIONS]`; `-- --help` lists
//! the options ([`Args`]).

use std::path::{Path, PathBuf};

use clap::Parser;

use registry_detect::classifier::{self, FEATURES, FeatureSet, Sample, TrainConfig};
use registry_detect::vector::{
    self, Near, Prototypes, SecondOpinion, StackInput, TopK, VECTOR_MODEL_NAME,
};
use registry_detect::{Analysis, FindingKind, Model, analyse_with, decide_at, scan_sensitive};
use registry_detect_train::corpus::{self, Example, Report, Tally, blocked_as_user_statement};
use registry_detect_train::{fnv64, second_opinion_embedder, vectors_of};
use registry_embed::OnnxEmbedder;

const FOLDS: u64 = 5;
/// The cross-validated kept rate of the legitimate examples outside [`HARD_TOPICS`] a threshold
/// must reach (the floor); among those, the highest block rate. (Until the b17–b19
/// hard negatives: 97.5% of every legitimate example, which no choice reaches now.)
const MIN_KEPT: f64 = 0.97;
/// Vetoes compared (0: every rule verdict stands; 1.01: only the structural ones do).
const VETOES: [f32; 15] = [
    0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 1.01,
];

fn fold_of(group: &str) -> u64 {
    fnv64(group) % FOLDS
}

/// L2 penalties compared for the second opinion (on the mean loss: 1/(C·n) for a C of about
/// 30, 10, 3 and 1 over the train split).
const SECOND_L2: [f64; 4] = [7e-6, 2e-5, 7e-5, 2e-4];
/// Neighbours per label compared for its neighbour features (0: none).
const SECOND_NEIGHBOURS: [usize; 4] = [0, 5, 10, 20];
/// Full-batch steps of its fit.
const SECOND_ITERATIONS: usize = 600;

/// For every example, the cosines of its nearest prototypes of each label in each fold
/// (itself excluded), so that its neighbour features can be read from any set of folds: a
/// held-out example's from the folds that train, a training example's from the folds that
/// train except its own (as if it were held out too).
struct FoldNeighbours {
    /// `[example][fold][label]`, largest first, at most [`vector::MAX_NEIGHBOURS`].
    top: Vec<[[Vec<f32>; 2]; FOLDS as usize]>,
}

impl FoldNeighbours {
    fn new(ps: &[Prepared], vecs: &[Vec<f32>], protos: &Prototypes, proto_rows: &[usize]) -> Self {
        let one = |i: usize| {
            let mut top: [[TopK; 2]; FOLDS as usize] = std::array::from_fn(|_| {
                [
                    TopK::new(vector::MAX_NEIGHBOURS),
                    TopK::new(vector::MAX_NEIGHBOURS),
                ]
            });
            for (j, &row) in proto_rows.iter().enumerate() {
                if row != i {
                    let f = fold_of(&ps[row].ex.group) as usize;
                    top[f][usize::from(protos.is_attack(j))].push(protos.similarity(j, &vecs[i]));
                }
            }
            top.map(|t| t.map(|k| k.values().to_vec()))
        };
        let n = ps.len();
        let half = n.div_ceil(2);
        let top = std::thread::scope(|s| {
            let second = s.spawn(|| (half..n).map(one).collect::<Vec<_>>());
            let mut first: Vec<_> = (0..half).map(one).collect();
            first.extend(second.join().expect("neighbour thread"));
            first
        });
        FoldNeighbours { top }
    }

    /// Example `i`'s neighbour features from every fold but `excluded`.
    fn near(&self, i: usize, excluded: &[u64], k: usize) -> Option<Near> {
        if k == 0 {
            return None;
        }
        let mean = |label: usize| {
            let mut t = TopK::new(k);
            for (f, lists) in self.top[i].iter().enumerate() {
                if !excluded.contains(&(f as u64)) {
                    lists[label].iter().for_each(|x| t.push(*x));
                }
            }
            t.mean()
        };
        Some(Near {
            attack: mean(1),
            legit: mean(0),
        })
    }
}

/// The stacked model's inputs for the examples that train the classifier, from `fold`'s
/// complement (every fold with `None`), with `k` neighbours read as if each example's own
/// fold were held out as well.
fn second_samples<'a>(
    ps: &[Prepared],
    lr: &[f32],
    vecs: &'a [Vec<f32>],
    near: &FoldNeighbours,
    k: usize,
    fold: Option<u64>,
) -> (Vec<StackInput<'a>>, Vec<bool>) {
    ps.iter()
        .enumerate()
        .filter(|(_, p)| p.ex.trains_classifier() && fold != Some(fold_of(&p.ex.group)))
        .map(|(i, p)| {
            let own = fold_of(&p.ex.group);
            let excluded: Vec<u64> = fold.into_iter().chain([own]).collect();
            (
                (lr[i], &vecs[i][..], near.near(i, &excluded, k)),
                p.ex.is_attack(),
            )
        })
        .unzip()
}

/// Chooses, cross-validates and fits the second opinion on the classifier's out-of-fold
/// scores `lr`; prints its figures (by family at `--at`'s or the chosen thresholds).
fn train_second(
    ps: &[Prepared],
    lr: &[f32],
    vecs: &[Vec<f32>],
    (lt, lv): (f32, f32),
    neighbours: &[usize],
    errors: bool,
) -> (SecondOpinion, Tally) {
    let proto_rows: Vec<usize> = (0..ps.len())
        .filter(|i| ps[*i].ex.trains_classifier())
        .collect();
    let train: Vec<&Example> = ps.iter().map(|p| p.ex).collect();
    let prototypes = registry_detect_train::prototypes(&train, vecs);
    let near = FoldNeighbours::new(ps, vecs, &prototypes, &proto_rows);
    let mut runs: Vec<Run<(usize, f64)>> = vec![];
    for &k in neighbours {
        for l2 in SECOND_L2 {
            let mut oof = vec![0f32; ps.len()];
            for f in 0..FOLDS {
                let (xs, ys) = second_samples(ps, lr, vecs, &near, k, Some(f));
                let m = vector::fit(&xs, &ys, l2, SECOND_ITERATIONS, (k, 0));
                for (i, p) in ps.iter().enumerate() {
                    if fold_of(&p.ex.group) == f {
                        oof[i] = m
                            .score_near(lr[i], &vecs[i], near.near(i, &[f], k))
                            .expect("dimension");
                    }
                }
            }
            let (t, v, tal, enough) = choose_threshold(ps, &oof);
            println!(
                "second opinion: neighbours {k:<2} l2 {l2:<7} threshold {t:.2} veto {v:.2}  CV block {:.1}%  kept {:.1}%",
                100.0 * tal.block_rate(),
                100.0 * tal.kept_rate()
            );
            runs.push(((k, l2), t, v, tal, oof, enough));
        }
    }
    let (((k, l2), t, v, cv, oof, _), _, _) = pick(runs);
    println!(
        "second opinion chosen: neighbours {k} l2 {l2} threshold {t:.2} veto {v:.2}  CV block {:.1}%  kept {:.1}% (the classifier alone at {lt:.2} / {lv:.2}: {:.1}% / {:.1}%)",
        100.0 * cv.block_rate(),
        100.0 * cv.kept_rate(),
        100.0 * tally(ps, lr, lt, lv).block_rate(),
        100.0 * tally(ps, lr, lt, lv).kept_rate(),
    );
    let mut by_class = Report::default();
    for (p, s) in ps.iter().zip(&oof) {
        let d = decide_at(&p.analysis, *s, t, v);
        let blocked = blocked_as_user_statement(&d, &p.findings);
        by_class.add(&p.ex.class, p.ex.is_attack(), blocked);
        if errors && blocked != p.ex.is_attack() {
            println!(
                "  {} [{}] {s:.2} (second opinion): {}",
                if blocked { "FALSE BLOCK" } else { "MISSED" },
                p.ex.class,
                p.ex.text.replace('\n', "\\n")
            );
        }
    }
    print!(
        "{}",
        by_class.render("CV with the second opinion, by family / topic")
    );
    let (xs, ys) = second_samples(ps, lr, vecs, &near, k, None);
    let mut model = vector::fit(&xs, &ys, l2, SECOND_ITERATIONS, (k, prototypes.len()));
    model.threshold = t;
    model.veto = v;
    (SecondOpinion { model, prototypes }, cv)
}

struct Prepared<'a> {
    ex: &'a Example,
    analysis: Analysis,
    findings: Vec<FindingKind>,
}

impl Prepared<'_> {
    fn sample(&self) -> Sample<'_> {
        (
            &self.analysis.windows,
            self.analysis.whole,
            self.ex.is_attack(),
        )
    }
}

fn tally(ps: &[Prepared], scores: &[f32], threshold: f32, veto: f32) -> Tally {
    split_tally(ps, scores, threshold, veto).0
}

/// Legitimate topics written to look like attacks (people discussing injections, quoted
/// payloads, "ignore the previous email"): over a quarter of the legitimate train split, far more than
/// of the memories people write, so their kept rate has a floor of its own.
const HARD_TOPICS: &[&str] = &["hard_negative", "ai_discussion"];
/// The cross-validated kept rate of [`HARD_TOPICS`] a threshold must also reach.
const MIN_KEPT_HARD: f64 = 0.90;

/// Every example, and the legitimate ones of [`HARD_TOPICS`] alone.
fn split_tally(ps: &[Prepared], scores: &[f32], threshold: f32, veto: f32) -> (Tally, Tally) {
    let (mut t, mut hard) = (Tally::default(), Tally::default());
    for (p, s) in ps.iter().zip(scores) {
        let d = decide_at(&p.analysis, *s, threshold, veto);
        let blocked = blocked_as_user_statement(&d, &p.findings);
        t.add(p.ex.is_attack(), blocked);
        if !p.ex.is_attack() && HARD_TOPICS.contains(&p.ex.class.as_str()) {
            hard.add(false, blocked);
        }
    }
    (t, hard)
}

/// The kept floors: every legitimate example except the hard topics, and the hard topics.
fn keeps_enough(all: &Tally, hard: &Tally) -> bool {
    let ordinary = Tally {
        legit: all.legit - hard.legit,
        kept: all.kept - hard.kept,
        ..Tally::default()
    };
    ordinary.kept_rate() >= MIN_KEPT && hard.kept_rate() >= MIN_KEPT_HARD
}

/// Out-of-fold scores for every example.
fn cross_validate(ps: &[Prepared], cfg: TrainConfig) -> Vec<f32> {
    let mut scores = vec![0f32; ps.len()];
    for f in 0..FOLDS {
        let samples: Vec<Sample> = ps
            .iter()
            .filter(|p| fold_of(&p.ex.group) != f && p.ex.trains_classifier())
            .map(Prepared::sample)
            .collect();
        let m = classifier::fit(&samples, cfg);
        for (i, p) in ps.iter().enumerate() {
            if fold_of(&p.ex.group) == f {
                scores[i] = registry_detect::score(&p.analysis, &m);
            }
        }
    }
    scores
}

/// The threshold and veto with the highest block rate among those that keep enough (both
/// floors of [`keeps_enough`]), preferring the smaller veto; the threshold in the middle of the
/// best plateau, so that the choice does not sit on an edge. The last field says whether the
/// floors were met.
fn choose_threshold(ps: &[Prepared], scores: &[f32]) -> (f32, f32, Tally, bool) {
    let grid: Vec<f32> = (5..=99).map(|i| i as f32 / 100.0).collect();
    let mut best: Option<(f32, f32, Tally)> = None;
    for veto in VETOES {
        let split: Vec<(Tally, Tally)> = grid
            .iter()
            .map(|t| split_tally(ps, scores, *t, veto))
            .collect();
        let ok: Vec<usize> = (0..grid.len())
            .filter(|&i| keeps_enough(&split[i].0, &split[i].1))
            .collect();
        let Some(b) = ok.iter().map(|&i| split[i].0.blocked).max() else {
            continue;
        };
        let plateau: Vec<usize> = ok
            .into_iter()
            .filter(|&i| split[i].0.blocked == b)
            .collect();
        let i = plateau[plateau.len() / 2];
        let t = split[i].0;
        if best
            .as_ref()
            .is_none_or(|(_, _, x)| (t.blocked, t.kept) > (x.blocked, x.kept))
        {
            best = Some((grid[i], veto, t));
        }
    }
    if let Some((t, v, x)) = best {
        return (t, v, x, true);
    }
    // Nothing keeps enough: the choice that keeps most (then blocks most).
    let mut all = vec![];
    for veto in VETOES {
        for t in &grid {
            all.push((*t, veto, tally(ps, scores, *t, veto)));
        }
    }
    let (t, v, x) = all
        .into_iter()
        .max_by_key(|(_, _, x)| (x.kept, x.blocked))
        .expect("a grid");
    (t, v, x, false)
}

/// One configuration's cross-validated outcome: the configuration, its threshold and veto,
/// the tally there, the out-of-fold scores and whether it keeps enough.
type Run<T> = (T, f32, f32, Tally, Vec<f32>, bool);

/// The configuration chosen among `runs`, with the plateau's width and top (block rates).
///
/// A configuration that keeps enough beats one that does not, whatever it blocks. Among
/// those, block rates within one standard error of the best are one plateau (the
/// one-standard-error rule): of them, the configuration that keeps the most is chosen,
/// since the kept rate is the half of the goal cross-validation overestimates most.
fn pick<T>(runs: Vec<Run<T>>) -> (Run<T>, f64, f64) {
    let any_enough = runs.iter().any(|r| r.5);
    let candidates: Vec<_> = runs.into_iter().filter(|r| r.5 == any_enough).collect();
    let top = candidates
        .iter()
        .map(|r| r.3.block_rate())
        .fold(0.0f64, f64::max);
    let attacks_n = candidates.first().map_or(1, |r| r.3.attacks.max(1)) as f64;
    let se = (top * (1.0 - top) / attacks_n).sqrt();
    let best = candidates
        .into_iter()
        .filter(|r| r.3.block_rate() >= top - se)
        .max_by_key(|r| (r.3.kept, r.3.blocked))
        .expect("a configuration");
    (best, se, top)
}

fn parse_features(s: &str) -> Result<FeatureSet, String> {
    let v: Vec<usize> = s
        .split(',')
        .map(|x| x.parse().map_err(|e| format!("{x}: {e}")))
        .collect::<Result<_, _>>()?;
    if v.len() < 5 {
        return Err("five to seven numbers: W,X,C,F,K[,U[,S]]".into());
    }
    Ok(FeatureSet {
        word_chars: v[0],
        cross_chars: v[1],
        cjk: v[2],
        first_word: v[3] != 0,
        concepts: v[4] != 0,
        words: v.get(5).is_none_or(|u| *u != 0),
        signals: v.get(6).is_none_or(|u| *u != 0),
    })
}

/// Trains the instruction classifier and the second opinion on the corpus's train split and
/// writes `registry/detect/model/`. Options that take lists take them comma-separated.
#[derive(Debug, Parser)]
#[command(name = "train")]
struct Args {
    /// Lists the train examples that cross-validation gets wrong.
    #[arg(long)]
    errors: bool,
    /// Leaves the model files alone.
    #[arg(long)]
    no_write: bool,
    /// Compares another feature set (with --no-write): word char n-grams up to W, cross-word
    /// char n-grams of length X, CJK n-grams up to C, first words F=0/1, concepts K=0/1, and
    /// optionally words U=0/1 and signals S=0/1.
    #[arg(long, value_name = "W,X,C,F,K[,U[,S]]", value_parser = parse_features)]
    features: Option<FeatureSet>,
    /// The classifier's L2 penalties compared (default 1e-5, 1e-4 and 1e-3).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    l2: Vec<f32>,
    /// The classifier's epoch counts compared (default 20 and 40).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    epochs: Vec<usize>,
    /// Block/kept at thresholds 0.5–0.99 (also for each --eval directory, at the veto of --at
    /// or the chosen one).
    #[arg(long)]
    curve: bool,
    /// The threshold and veto of the cross-validated and development figures, for comparing
    /// two builds at the same point (default: the chosen ones).
    #[arg(long, value_name = "T,V", value_delimiter = ',', num_args = 2)]
    at: Option<Vec<f32>>,
    /// Cross-validated figures by phrasing group.
    #[arg(long)]
    groups: bool,
    /// Writes one JSON line per corpus example (text, labels, the train split's out-of-fold
    /// score and verdict, the test split's under the final model), for trying another opinion
    /// stacked on the detector without retraining it.
    #[arg(long, value_name = "FILE")]
    dump: Option<PathBuf>,
    /// Keeps the texts' vectors in FILE between runs (JSON lines).
    #[arg(long, value_name = "FILE")]
    vector_cache: Option<PathBuf>,
    /// Skips the second opinion (with --no-write only: the stacked model reads the
    /// classifier's logit, so it is retrained with it).
    #[arg(long)]
    no_vectors: bool,
    /// The second opinion's neighbour counts compared (0: none; default 0, 5, 10 and 20).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    neighbours: Vec<usize>,
    /// Also reports the final model on these corpus directories (every split), each on its
    /// own, e.g. a directory holding one development set of `registry/detect/dev/`.
    #[arg(long, value_name = "DIR[,DIR...]", value_delimiter = ',')]
    eval: Vec<PathBuf>,
}

/// `given`, or `default` when the option was not given.
fn or_default<T: Clone>(given: Vec<T>, default: &[T]) -> Vec<T> {
    if given.is_empty() {
        default.to_vec()
    } else {
        given
    }
}

fn main() {
    let args = Args::parse();
    let errors = args.errors;
    let write = !args.no_write;
    let set = args.features.unwrap_or(FEATURES);
    if set != FEATURES && write {
        panic!("another feature set is for comparison only: add --no-write");
    }
    let all = corpus::load_default().unwrap_or_else(|e| panic!("corpus: {e}"));
    let train: Vec<&Example> = all.iter().filter(|e| e.split == "train").collect();
    let ps: Vec<Prepared> = train
        .iter()
        .map(|ex| Prepared {
            ex,
            analysis: analyse_with(&ex.text, set),
            findings: scan_sensitive(&ex.text),
        })
        .collect();
    let attacks = ps.iter().filter(|p| p.ex.is_attack()).count();
    let pieces: usize = ps.iter().map(|p| p.analysis.windows.len()).sum();
    println!(
        "train split: {} examples ({attacks} attacks, {} legit, {pieces} pieces), {FOLDS}-fold CV by group, features {set:?}",
        ps.len(),
        ps.len() - attacks
    );
    let rules_only = tally(&ps, &vec![0.0; ps.len()], 1.0, 0.0);
    println!(
        "rules alone:         block {:.1}%  kept {:.1}%",
        100.0 * rules_only.block_rate(),
        100.0 * rules_only.kept_rate()
    );
    let mut runs: Vec<(TrainConfig, f32, f32, Tally, Vec<f32>, bool)> = vec![];
    let l2s: Vec<f32> = or_default(args.l2.clone(), &[1e-5, 1e-4, 1e-3]);
    let epochs_grid: Vec<usize> = or_default(args.epochs.clone(), &[20, 40]);
    for &l2 in &l2s {
        for &epochs in &epochs_grid {
            let cfg = TrainConfig {
                l2,
                epochs,
                ..TrainConfig::default()
            };
            let scores = cross_validate(&ps, cfg);
            let (t, v, tal, enough) = choose_threshold(&ps, &scores);
            println!(
                "l2 {l2:<7} epochs {epochs:<3} threshold {t:.2} veto {v:.2}  CV block {:.1}%  kept {:.1}%",
                100.0 * tal.block_rate(),
                100.0 * tal.kept_rate()
            );
            runs.push((cfg, t, v, tal, scores, enough));
        }
    }
    let ((cfg, threshold, veto, cv, scores, _), se, top) = pick(runs);
    println!(
        "plateau: CV block within {:.1} points of the best {:.1}%",
        100.0 * se,
        100.0 * top
    );
    println!(
        "chosen: l2 {} epochs {} threshold {threshold:.2} veto {veto:.2}  CV block {:.1}%  kept {:.1}%",
        cfg.l2,
        cfg.epochs,
        100.0 * cv.block_rate(),
        100.0 * cv.kept_rate()
    );
    if args.curve {
        for veto in [0.0f32, 0.2, 0.5, 1.01] {
            let line: Vec<String> = [0.3f32, 0.5, 0.7, 0.8, 0.9, 0.95]
                .iter()
                .map(|t| {
                    let x = tally(&ps, &scores, *t, veto);
                    format!(
                        "t{t:.2} {:.1}/{:.1}",
                        100.0 * x.block_rate(),
                        100.0 * x.kept_rate()
                    )
                })
                .collect();
            println!("veto {veto:.2}: {}", line.join("  "));
        }
    }
    let (lt, lv) = args
        .at
        .as_deref()
        .map_or((threshold, veto), |v| (v[0], v[1]));
    let mut by_class = Report::default();
    for (p, s) in ps.iter().zip(&scores) {
        let d = decide_at(&p.analysis, *s, lt, lv);
        let blocked = blocked_as_user_statement(&d, &p.findings);
        by_class.add(&p.ex.class, p.ex.is_attack(), blocked);
        if errors && blocked != p.ex.is_attack() {
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
    print!("{}", by_class.render("CV by family / topic"));
    if args.groups {
        let mut by_group = Report::default();
        for (p, s) in ps.iter().zip(&scores) {
            let d = decide_at(&p.analysis, *s, lt, lv);
            by_group.add(
                &p.ex.group,
                p.ex.is_attack(),
                blocked_as_user_statement(&d, &p.findings),
            );
        }
        print!("{}", by_group.render("CV by group"));
    }
    let samples: Vec<Sample> = ps
        .iter()
        .filter(|p| p.ex.trains_classifier())
        .map(Prepared::sample)
        .collect();
    let mut model = classifier::fit(&samples, cfg);
    if args.curve {
        let fitted: Vec<f32> = ps
            .iter()
            .map(|p| registry_detect::score(&p.analysis, &model))
            .collect();
        for t in [0.5f32, 0.7, 0.9] {
            let x = tally(&ps, &fitted, t, 1.01);
            println!(
                "in-sample t{t:.2}: {:.1}/{:.1}",
                100.0 * x.block_rate(),
                100.0 * x.kept_rate()
            );
        }
    }
    model.threshold = threshold;
    model.veto = veto;
    if let Some(file) = &args.dump {
        dump(file, &all, &ps, &scores, (lt, lv), &model, set);
    }
    let cache = args.vector_cache.as_deref();
    let second = if args.no_vectors {
        assert!(
            !write,
            "the second opinion reads the classifier's logit and is retrained with it: --no-vectors needs --no-write"
        );
        None
    } else {
        let emb = second_opinion_embedder(None);
        let texts: Vec<&str> = ps.iter().map(|p| p.ex.text.as_str()).collect();
        let vecs = vectors_of(&emb, &texts, cache);
        let neighbours: Vec<usize> = or_default(args.neighbours.clone(), &SECOND_NEIGHBOURS)
            .into_iter()
            .filter(|k| *k <= vector::MAX_NEIGHBOURS)
            .collect();
        Some((
            train_second(&ps, &scores, &vecs, (lt, lv), &neighbours, errors),
            emb,
        ))
    };
    // Each directory of `--eval A,B` on its own.
    for dir in &args.eval {
        // At the chosen thresholds, or at those of `--at`.
        let at = Model {
            threshold: lt,
            veto: lv,
            ..model.clone()
        };
        evaluate(dir, &at, None, set, errors, args.curve.then_some(lv));
        if let Some(((m, _), emb)) = &second {
            evaluate(dir, &at, Some((m, emb, cache)), set, errors, None);
        }
    }
    if !write {
        return;
    }
    let Some(((second, second_cv), _)) = second else {
        unreachable!("checked above")
    };
    let dir = corpus::model_dir();
    std::fs::write(dir.join("instruction.lr"), model.to_bytes()).expect("write model");
    let meta = serde_json::json!({
        "format_version": classifier::FORMAT_VERSION,
        "dim": classifier::DIM,
        "weights": model.weights.len(),
        "threshold": threshold,
        "veto": veto,
        "config": {
            "epochs": cfg.epochs,
            "learning_rate": cfg.learning_rate,
            "l2": cfg.l2,
            "seed": cfg.seed,
        },
        "train": {"examples": ps.len(), "attacks": attacks, "legit": ps.len() - attacks, "pieces": pieces},
        "cross_validation": {
            "folds": FOLDS,
            "by": "group",
            "min_kept": MIN_KEPT,
            "min_kept_hard": MIN_KEPT_HARD,
            "hard_topics": HARD_TOPICS,
            "block_rate": cv.block_rate(),
            "kept_rate": cv.kept_rate(),
        },
        "second_opinion": {
            "file": "vector.json",
            "embedding_model": VECTOR_MODEL_NAME,
            "prototypes_file": "prototypes.bin",
            "prototypes": second.prototypes.len(),
            "neighbours": second.model.neighbours,
            "threshold": second.model.threshold,
            "veto": second.model.veto,
            "cross_validation": {
                "block_rate": second_cv.block_rate(),
                "kept_rate": second_cv.kept_rate(),
            },
        },
    });
    std::fs::write(
        dir.join("vector.json"),
        serde_json::to_string(&second.model).expect("json") + "\n",
    )
    .expect("write the second opinion");
    std::fs::write(dir.join("prototypes.bin"), second.prototypes.to_bytes())
        .expect("write the second opinion's prototypes");
    std::fs::write(
        dir.join("instruction.json"),
        serde_json::to_string_pretty(&meta).expect("json") + "\n",
    )
    .expect("write model metadata");
    println!(
        "wrote model/instruction.lr ({} weights), model/vector.json, model/prototypes.bin and model/instruction.json",
        model.weights.len()
    );
}

/// Figures of `model` on every example of the corpus in `dir`, whatever its split.
/// With `second` (the stacked model, its embedder and the vector cache), the detector with the
/// second opinion.
fn evaluate(
    dir: &Path,
    model: &Model,
    second: Option<(&SecondOpinion, &OnnxEmbedder, Option<&Path>)>,
    set: FeatureSet,
    errors: bool,
    curve: Option<f32>,
) {
    let ex = corpus::load(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let vecs = second.map(|(_, emb, cache)| {
        let texts: Vec<&str> = ex.iter().map(|e| e.text.as_str()).collect();
        vectors_of(emb, &texts, cache)
    });
    let (mut lang, mut class) = (Report::default(), Report::default());
    for (i, e) in ex.iter().enumerate() {
        let a = analyse_with(&e.text, set);
        let mut s = registry_detect::score(&a, model);
        let (mut t, mut v) = (model.threshold, model.veto);
        // As the gate decides: the second opinion only where the cheap layers are unsure.
        if let (Some((m, _, _)), Some(vecs)) = (second, &vecs)
            && vector::reads(&e.text)
            && registry_detect::unsure(&a, s)
        {
            s = m
                .score(s, &vecs[i])
                .expect("a vector of the model's dimension");
            (t, v) = (m.threshold(), m.veto());
        }
        let d = decide_at(&a, s, t, v);
        let f = scan_sensitive(&e.text);
        let blocked = blocked_as_user_statement(&d, &f);
        lang.add(&e.lang, e.is_attack(), blocked);
        class.add(&e.class, e.is_attack(), blocked);
        if errors && blocked != e.is_attack() {
            println!(
                "  {} [{}] {:.2} {:?} {:?}: {}",
                if blocked { "FALSE BLOCK" } else { "MISSED" },
                e.class,
                s,
                d.verdict,
                d.signal_names(),
                e.text.replace('\n', "\\n")
            );
        }
    }
    println!(
        "== {} (every split{}) ==",
        dir.display(),
        if second.is_some() {
            ", with the second opinion"
        } else {
            ""
        }
    );
    print!("{}", lang.render("language"));
    print!("{}", class.render("family / topic"));
    if let Some(veto) = curve {
        let scored: Vec<(Analysis, f32, Vec<FindingKind>, bool)> = ex
            .iter()
            .map(|e| {
                let a = analyse_with(&e.text, set);
                let s = registry_detect::score(&a, model);
                (a, s, scan_sensitive(&e.text), e.is_attack())
            })
            .collect();
        let line: Vec<String> = [0.5f32, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.99]
            .iter()
            .map(|t| {
                let mut x = Tally::default();
                for (a, s, f, attack) in &scored {
                    let d = decide_at(a, *s, *t, veto);
                    x.add(*attack, blocked_as_user_statement(&d, f));
                }
                format!(
                    "t{t:.2} {:.1}/{:.1}",
                    100.0 * x.block_rate(),
                    100.0 * x.kept_rate()
                )
            })
            .collect();
        println!("curve (veto {veto:.2}): {}", line.join("  "));
    }
}

/// One line per corpus example, in corpus order: the train split's out-of-fold score and
/// verdict, the test split's under the final model (for stacking another opinion on top).
fn dump(
    file: &Path,
    all: &[Example],
    ps: &[Prepared],
    scores: &[f32],
    (t, v): (f32, f32),
    model: &Model,
    set: FeatureSet,
) {
    let mut out = String::new();
    let mut k = 0;
    for e in all {
        let (s, blocked) = if e.split == "train" {
            let p = &ps[k];
            k += 1;
            let d = decide_at(&p.analysis, scores[k - 1], t, v);
            (scores[k - 1], blocked_as_user_statement(&d, &p.findings))
        } else {
            let a = analyse_with(&e.text, set);
            let s = registry_detect::score(&a, model);
            let d = decide_at(&a, s, model.threshold, model.veto);
            (s, blocked_as_user_statement(&d, &scan_sensitive(&e.text)))
        };
        out.push_str(
            &serde_json::json!({"split": e.split, "group": e.group, "attack": e.is_attack(),
                "class": e.class, "lang": e.lang, "score": s, "blocked": blocked, "text": e.text})
            .to_string(),
        );
        out.push('\n');
    }
    std::fs::write(file, out).expect("write --dump");
}
