//! SciFact through the knowledge API: ingest the corpus as documents (title + text), run the
//! 300 test queries as evidence searches, print nDCG@10 and Recall@100 per retrieval mode beside
//! the published baselines, ingest throughput and search latency. Figures are printed, never
//! asserted.
//!
//! ```text
//! cargo run --release -p registry-server --features bench --bin knowledge-bench -- [--limit N] [--data-dir DIR] [--threads N]
//! ```
//! `--limit N`: the documents relevant to the test queries plus the first N others.
//! `--data-dir DIR`: keep the ingested store there; a later run with the same directory skips
//! ingest (cache). Data: `$REGISTRY_SHARED_DATA/scifact` or `CARGO_MANIFEST_DIR/../../../shared/data/scifact`.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use registry_core::asset::AssetKind;
use registry_core::principal::{Principal, Role};
use registry_core::store::AssetQuery;
use registry_knowledge::service::{FusionKind, SearchLegs};
use registry_knowledge::{IngestRequest, SearchRequest};
use registry_server::config::Config;
use registry_server::state::AppState;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn data_root() -> PathBuf {
    std::env::var_os("REGISTRY_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"))
        .join("scifact")
}

fn read_jsonl(path: &PathBuf) -> anyhow::Result<Vec<serde_json::Value>> {
    Ok(std::fs::read_to_string(path)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?)
}

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

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let limit: Option<usize> = arg(&args, "--limit").map(|s| s.parse()).transpose()?;
    let threads: usize = arg(&args, "--threads")
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let root = data_root();
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

    let (data_dir, _tmp) = match arg(&args, "--data-dir") {
        Some(d) => (PathBuf::from(d), None),
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
        "SciFact: {} documents ({} relevant to the test queries), {} test queries; data dir {}; embed threads {threads}",
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

    let modes: [(&str, SearchLegs, FusionKind, Option<f32>); 5] = [
        (
            "text only (BM25)",
            SearchLegs::TextOnly,
            FusionKind::Rrf,
            None,
        ),
        (
            "vector only (MiniLM)",
            SearchLegs::VectorOnly,
            FusionKind::Rrf,
            None,
        ),
        ("hybrid RRF k=60", SearchLegs::Both, FusionKind::Rrf, None),
        (
            "hybrid convex a=0.5",
            SearchLegs::Both,
            FusionKind::Convex,
            Some(0.5),
        ),
        (
            "hybrid convex a=0.3",
            SearchLegs::Both,
            FusionKind::Convex,
            Some(0.3),
        ),
    ];
    let mut qids: Vec<&String> = qrels.keys().collect();
    qids.sort();
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
    for (label, legs, fusion, alpha) in modes {
        let (mut ndcg, mut recall) = (0.0, 0.0);
        let mut times = Vec::with_capacity(qids.len());
        for qid in &qids {
            let Some(q) = queries.get(*qid) else { continue };
            let t = Instant::now();
            let ans = svc.search(
                &p,
                SearchRequest {
                    query: q.clone(),
                    k: Some(200),
                    min_score: Some(f32::MIN),
                    legs: Some(legs),
                    fusion: Some(fusion),
                    alpha,
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
            ndcg += ndcg_at_10(&ranked, &qrels[*qid]);
            recall += recall_at_100(&ranked, &qrels[*qid]);
        }
        times.sort();
        let n = qids.len() as f64;
        println!(
            "{label:<24} {:>8.4} {:>8.4} {:>9.1} {:>9.1}",
            ndcg / n,
            recall / n,
            pct(&times, 0.5),
            pct(&times, 0.95)
        );
    }
    Ok(())
}

/// Removes a scratch data directory on exit.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
