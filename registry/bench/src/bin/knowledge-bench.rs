//! SciFact through the knowledge API: ingest the corpus as documents (title + text), run the
//! 300 test queries as evidence searches, print nDCG@10 and Recall@100 per retrieval mode beside
//! the published baselines, the run chosen by two-fold cross-validation over the queries with its
//! held-out score, ingest throughput and search latency. Figures are printed, never asserted.
//!
//! ```text
//! cargo run --release -p registry-bench --bin knowledge-bench -- [--dataset NAME] [--k N] [--limit N] [--data-dir DIR] [--threads N]
//! ```
//! `--k N`: evidence asked per query (default 200, so that Recall@100 means something; the
//! API's default is 10).
//! `--dataset NAME`: a BEIR-layout set of the shared data (`scifact`, the default, or
//! `cmrc2018-trial`, Chinese); the published baselines printed are SciFact's.
//! `--limit N`: the documents relevant to the test queries plus the first N others.
//! `--data-dir DIR`: keep the ingested store there; a later run with the same directory skips
//! ingest (cache). Data: `$REGISTRY_SHARED_DATA/NAME` or `CARGO_MANIFEST_DIR/../../../shared/data/NAME`.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use registry_bench::{data_root, read_jsonl};
use registry_core::asset::AssetKind;
use registry_core::principal::{Principal, Role};
use registry_core::store::AssetQuery;
use registry_knowledge::service::{FusionKind, SearchLegs};
use registry_knowledge::{IngestRequest, SearchRequest};
use registry_server::config::Config;
use registry_server::state::AppState;

fn ndcg_at_10(ranked: &[String], rel: &HashSet<String>) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(10)
        .enumerate()
        .filter(|(_, d)| rel.contains(*d))
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let idcg: f64 = (0..rel.len().min(10))
        .map(|i| 1.0 / ((i + 2) as f64).log2())
        .sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

fn recall_at_100(ranked: &[String], rel: &HashSet<String>) -> f64 {
    let hit = ranked.iter().take(100).filter(|d| rel.contains(*d)).count();
    hit as f64 / rel.len().max(1) as f64
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// A BEIR-layout set through the knowledge API: nDCG@10 and Recall@100 per retrieval mode,
/// ingest throughput and search latency. Prints figures; asserts nothing.
#[derive(clap::Parser)]
struct Options {
    /// A BEIR-layout set of the shared data: `scifact` or `cmrc2018-trial` (Chinese).
    #[arg(long, default_value = "scifact")]
    dataset: String,
    /// Evidence asked per query (the API's default is 10).
    #[arg(long, default_value_t = 200)]
    k: usize,
    /// Only the documents relevant to the test queries plus the first N others.
    #[arg(long)]
    limit: Option<usize>,
    /// Keep the ingested store here; a later run with the same directory skips ingest.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Embedder threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
}

fn main() -> anyhow::Result<()> {
    let o: Options = clap::Parser::parse();
    let limit = o.limit;
    let threads = o
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let dataset = o.dataset;
    if dataset.contains(['/', '\\']) || dataset.starts_with('.') {
        anyhow::bail!("--dataset names a directory of the shared data, not a path");
    }
    let root = data_root(&dataset);
    let k = o.k;
    let corpus = read_jsonl(&root.join("corpus.jsonl"))?;
    let queries: HashMap<String, String> = read_jsonl(&root.join("queries.jsonl"))?
        .into_iter()
        .filter_map(|q| {
            Some((
                q["_id"].as_str()?.to_string(),
                q["text"].as_str()?.to_string(),
            ))
        })
        .collect();
    let mut qrels: HashMap<String, HashSet<String>> = HashMap::new();
    for line in std::fs::read_to_string(root.join("qrels/test.tsv"))?
        .lines()
        .skip(1)
    {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() >= 3 && f[2].trim() != "0" {
            qrels
                .entry(f[0].to_string())
                .or_default()
                .insert(f[1].to_string());
        }
    }
    let relevant: HashSet<&String> = qrels.values().flatten().collect();
    let mut others = 0;
    let docs: Vec<&serde_json::Value> = corpus
        .iter()
        .filter(|d| {
            let id = d["_id"].as_str().unwrap_or_default().to_string();
            if relevant.contains(&id) {
                return true;
            }
            others += 1;
            limit.is_none_or(|l| others <= l)
        })
        .collect();

    let (data_dir, _tmp) = match o.data_dir {
        Some(d) => (d, None),
        None => {
            let t = std::env::temp_dir().join(format!("knowledge-bench-{}", std::process::id()));
            (t.clone(), Some(TempDir(t)))
        }
    };
    let config = Config {
        data_dir: data_dir.clone(),
        embed_threads: threads,
        // Every mode asks the same queries: each must embed them, as a first query would.
        embed_query_cache: 0,
        ..Config::default()
    };
    let state = AppState::open(config)?;
    let svc = &state.services.knowledge;
    let mut p = Principal::new("bench", "bench");
    p.roles = vec![Role::Admin];

    let existing = state
        .services
        .backends
        .store
        .find(&AssetQuery {
            kind: Some(AssetKind::Document),
            heads_only: true,
            ..Default::default()
        })?
        .len();
    println!(
        "{dataset}: {} documents ({} relevant to the test queries), {} test queries; data dir {}; embed threads {threads}",
        docs.len(),
        relevant.len(),
        qrels.len(),
        data_dir.display()
    );
    if existing >= docs.len() {
        println!("ingest: skipped ({existing} documents already in the data dir)");
    } else {
        let t0 = Instant::now();
        let mut chunks = 0usize;
        for (i, d) in docs.iter().enumerate() {
            let title = d["title"].as_str().unwrap_or_default();
            let text = d["text"].as_str().unwrap_or_default();
            let out = svc.ingest(
                &p,
                IngestRequest {
                    source_id: d["_id"].as_str().unwrap_or_default().to_string(),
                    format: "md".into(),
                    content: format!("# {title}\n\n{text}"),
                    ..Default::default()
                },
            )?;
            chunks += out.chunks;
            if (i + 1) % 500 == 0 {
                let s = t0.elapsed().as_secs_f64();
                eprintln!(
                    "  ingested {} docs, {chunks} chunks, {:.1} chunks/s",
                    i + 1,
                    chunks as f64 / s
                );
            }
        }
        let s = t0.elapsed().as_secs_f64();
        println!(
            "ingest: {} documents, {chunks} chunks in {s:.1} s = {:.1} chunks/s ({:.1} docs/s)",
            docs.len(),
            chunks as f64 / s,
            docs.len() as f64 / s
        );
    }

    // The runs: each leg alone, RRF, and convex fusion over a grid of weights. Which one to
    // report is chosen by two-fold cross-validation over the queries (SciFact ships no train
    // judgements here): the queries are split by position in id order, each fold is scored with
    // the run that did best on the other fold, and the figure is the mean of those held-out
    // scores, never one tuned on the queries it is scored on.
    // Each run: label, legs, fusion, alpha; `None` leaves the choice to the API's default.
    type Run = (String, Option<SearchLegs>, Option<FusionKind>, Option<f64>);
    let mut modes: Vec<Run> = vec![
        ("API default".into(), None, None, None),
        (
            "text only (BM25)".into(),
            Some(SearchLegs::TextOnly),
            None,
            None,
        ),
        (
            "vector only".into(),
            Some(SearchLegs::VectorOnly),
            None,
            None,
        ),
        (
            "hybrid RRF k=60".into(),
            Some(SearchLegs::Both),
            Some(FusionKind::Rrf),
            None,
        ),
    ];
    for a in [0.1f64, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9] {
        modes.push((
            format!("hybrid convex a={a:.1}"),
            Some(SearchLegs::Both),
            Some(FusionKind::Convex),
            Some(a),
        ));
    }
    let mut qids: Vec<&String> = qrels
        .keys()
        .filter(|q| queries.get(*q).is_some_and(|t| !t.trim().is_empty()))
        .collect();
    qids.sort();
    if qids.len() < qrels.len() {
        println!(
            "{} of {} judged queries have no text and are left out",
            qrels.len() - qids.len(),
            qrels.len()
        );
    }
    println!(
        "{:<24} {:>8} {:>8} {:>9} {:>9}",
        "run", "nDCG@10", "R@100", "p50 ms", "p95 ms"
    );
    println!(
        "{:<24} {:>8} {:>8}",
        "BM25 flat (published)", "0.6789", "0.9253"
    );
    println!(
        "{:<24} {:>8} {:>8}",
        "BM25 multifield (publ.)", "0.6647", "0.9076"
    );
    println!(
        "{:<24} {:>8} {:>8}",
        "BGE-base (published)", "0.7408", "0.9667"
    );
    // Per run, per query (in `qids` order): (nDCG@10, R@100).
    let mut scores: Vec<Vec<(f64, f64)>> = Vec::with_capacity(modes.len());
    for (label, legs, fusion, alpha) in &modes {
        let mut per_query = Vec::with_capacity(qids.len());
        let mut times = Vec::with_capacity(qids.len());
        for qid in &qids {
            let q = &queries[*qid];
            let t = Instant::now();
            let ans = svc.search(
                &p,
                SearchRequest {
                    query: q.clone(),
                    k: Some(k),
                    min_score: Some(f64::MIN),
                    legs: *legs,
                    fusion: *fusion,
                    alpha: *alpha,
                    ..Default::default()
                },
            )?;
            times.push(t.elapsed());
            // Chunk hits → documents, each at its best chunk's (first) position.
            let mut seen = HashSet::new();
            let ranked: Vec<String> = ans
                .evidence
                .iter()
                .map(|e| e.source_id.clone())
                .filter(|s| seen.insert(s.clone()))
                .collect();
            per_query.push((
                ndcg_at_10(&ranked, &qrels[*qid]),
                recall_at_100(&ranked, &qrels[*qid]),
            ));
        }
        times.sort();
        let n = per_query.len().max(1) as f64;
        println!(
            "{label:<24} {:>8.4} {:>8.4} {:>9.1} {:>9.1}",
            per_query.iter().map(|s| s.0).sum::<f64>() / n,
            per_query.iter().map(|s| s.1).sum::<f64>() / n,
            pct(&times, 0.5),
            pct(&times, 0.95)
        );
        scores.push(per_query);
    }
    let fold_mean = |run: usize, fold: usize| -> f64 {
        let s: Vec<f64> = scores[run]
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == fold)
            .map(|(_, s)| s.0)
            .collect();
        s.iter().sum::<f64>() / s.len().max(1) as f64
    };
    let (mut held_ndcg, mut held_recall) = (0.0, 0.0);
    for fold in 0..2 {
        let train = 1 - fold;
        let best = (0..modes.len())
            .max_by(|a, b| fold_mean(*a, train).total_cmp(&fold_mean(*b, train)))
            .unwrap_or(0);
        let held: Vec<(f64, f64)> = scores[best]
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == fold)
            .map(|(_, s)| *s)
            .collect();
        println!(
            "fold {fold}: chosen on fold {train}: {} (train nDCG@10 {:.4}), held-out nDCG@10 {:.4} over {} queries",
            modes[best].0,
            fold_mean(best, train),
            fold_mean(best, fold),
            held.len()
        );
        held_ndcg += held.iter().map(|s| s.0).sum::<f64>();
        held_recall += held.iter().map(|s| s.1).sum::<f64>();
    }
    let n = qids.len().max(1) as f64;
    println!(
        "two-fold cross-validated: nDCG@10 {:.4}, R@100 {:.4} over {} queries",
        held_ndcg / n,
        held_recall / n,
        qids.len()
    );
    Ok(())
}

/// Removes a scratch data directory on exit.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
