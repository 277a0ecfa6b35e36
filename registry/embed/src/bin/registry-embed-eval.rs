//! Dense-only retrieval quality and embedding speed of each pinned model.
//!
//! Usage: `registry-embed-eval [--model NAME]... [--sets scifact,cmrc2018-trial] [--threads N]
//! [--batch N] [--max-length N] [--max-docs N] [--first-window] [--no-speed]`
//!
//! `--max-docs N` keeps every judged document and fills up to N with the others in corpus order
//! (a smaller, easier corpus: for comparing models when the whole one takes too long);
//! `--first-window` embeds only each document's first window.
//!
//! Data sets are BEIR-layout directories under `$REGISTRY_SHARED_DATA`, else
//! `<repo>/../shared/data`: `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl`, and
//! `qrels/test.tsv`. A document (`title` + `text`) is cut by `split_to_fit` into windows that fit
//! the model's window, every window is embedded as a stored text, each judged query as a query,
//! and a document scores the best cosine of its windows. Printed per model and set: nDCG@10 and
//! recall@10 over the judged queries, and windows embedded per second. Before that, per model:
//! the latency of one short sentence (p50/p95 over 50 calls after a warm-up) and the throughput
//! of 256 short sentences one call each and in batches.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use registry_embed::{EmbedderConfig, ModelChoice, OnnxEmbedder};

type AnyResult<T> = Result<T, Box<dyn std::error::Error>>;

struct Options {
    models: Vec<ModelChoice>,
    sets: Vec<String>,
    threads: usize,
    batch: usize,
    max_length: usize,
    max_docs: Option<usize>,
    first_window: bool,
    speed: bool,
}

fn parse_args() -> AnyResult<Options> {
    let mut o = Options {
        models: vec![],
        sets: vec!["scifact".into(), "cmrc2018-trial".into()],
        threads: 2,
        batch: 32,
        max_length: registry_embed::DEFAULT_MAX_LENGTH,
        max_docs: None,
        first_window: false,
        speed: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--model" => o.models.push(value()?.parse()?),
            "--sets" => o.sets = value()?.split(',').map(str::to_string).collect(),
            "--threads" => o.threads = value()?.parse()?,
            "--batch" => o.batch = value()?.parse()?,
            "--max-length" => o.max_length = value()?.parse()?,
            "--max-docs" => o.max_docs = Some(value()?.parse()?),
            "--first-window" => o.first_window = true,
            "--no-speed" => o.speed = false,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if o.models.is_empty() {
        o.models = ModelChoice::ALL.to_vec();
    }
    Ok(o)
}

fn data_dir() -> PathBuf {
    std::env::var_os("REGISTRY_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"))
}

struct Set {
    name: String,
    docs: Vec<(String, String)>,
    queries: Vec<(String, String)>,
    qrels: HashMap<String, HashMap<String, f64>>,
}

fn read_jsonl(path: &PathBuf) -> AnyResult<Vec<serde_json::Value>> {
    let raw = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    raw.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Ok(serde_json::from_str(l)?))
        .collect()
}

fn load_set(name: &str, max_docs: Option<usize>) -> AnyResult<Set> {
    let dir = data_dir().join(name);
    let mut qrels: HashMap<String, HashMap<String, f64>> = HashMap::new();
    let tsv = std::fs::read_to_string(dir.join("qrels/test.tsv"))?;
    for line in tsv.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() == 3 {
            let score: f64 = f[2].trim().parse()?;
            if score > 0.0 {
                qrels
                    .entry(f[0].to_string())
                    .or_default()
                    .insert(f[1].to_string(), score);
            }
        }
    }
    let judged: HashSet<&String> = qrels.values().flat_map(|r| r.keys()).collect();
    let mut room = max_docs.map(|n| n.saturating_sub(judged.len()));
    let docs = read_jsonl(&dir.join("corpus.jsonl"))?
        .into_iter()
        .filter(|v| {
            let id = v["_id"].as_str().unwrap_or_default().to_string();
            match room.as_mut() {
                None => true,
                Some(_) if judged.contains(&id) => true,
                Some(0) => false,
                Some(n) => {
                    *n -= 1;
                    true
                }
            }
        })
        .map(|v| {
            let title = v["title"].as_str().unwrap_or_default();
            let text = v["text"].as_str().unwrap_or_default();
            let body = if title.is_empty() {
                text.to_string()
            } else {
                format!("{title}. {text}")
            };
            (v["_id"].as_str().unwrap_or_default().to_string(), body)
        })
        .collect();
    let queries = read_jsonl(&dir.join("queries.jsonl"))?
        .into_iter()
        .map(|v| {
            (
                v["_id"].as_str().unwrap_or_default().to_string(),
                v["text"].as_str().unwrap_or_default().to_string(),
            )
        })
        .filter(|(id, _)| qrels.contains_key(id))
        .collect();
    Ok(Set {
        name: name.to_string(),
        docs,
        queries,
        qrels,
    })
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

const SHORT: &str = "The user prefers dark mode in the editor and short answers.";

fn speed(e: &OnnxEmbedder, batch: usize) -> AnyResult<()> {
    e.embed_texts(&[SHORT])?;
    let mut ms = Vec::with_capacity(50);
    for _ in 0..50 {
        let t = Instant::now();
        e.embed_texts(&[SHORT])?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    let texts: Vec<String> = (0..256)
        .map(|i| format!("Note {i}: the user prefers dark mode in the editor and short answers."))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let t = Instant::now();
    for r in &refs {
        e.embed_texts(&[r])?;
    }
    let single = refs.len() as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for chunk in refs.chunks(batch) {
        e.embed_texts(chunk)?;
    }
    let batched = refs.len() as f64 / t.elapsed().as_secs_f64();
    println!(
        "  short sentence ({} tokens): p50 {:.2} ms, p95 {:.2} ms; 256 short texts: {single:.1}/s one per call, {batched:.1}/s in batches of {batch}",
        e.token_count(SHORT)?,
        percentile(&ms, 0.5),
        percentile(&ms, 0.95),
    );
    Ok(())
}

fn evaluate(e: &OnnxEmbedder, set: &Set, batch: usize, first_window: bool) -> AnyResult<()> {
    let mut windows: Vec<&str> = Vec::new();
    let mut owner: Vec<usize> = Vec::new();
    for (i, (_, body)) in set.docs.iter().enumerate() {
        let cuts = e.split_to_fit(body)?;
        let keep = if first_window { 1 } else { cuts.len() };
        for &(s, end) in &cuts[..keep] {
            windows.push(&body[s..end]);
            owner.push(i);
        }
    }
    let t = Instant::now();
    let mut vectors = Vec::with_capacity(windows.len());
    for chunk in windows.chunks(batch) {
        vectors.extend(e.embed_texts(chunk)?);
    }
    let doc_secs = t.elapsed().as_secs_f64();
    let qtexts: Vec<&str> = set.queries.iter().map(|(_, t)| t.as_str()).collect();
    let t = Instant::now();
    let mut qvecs = Vec::with_capacity(qtexts.len());
    for chunk in qtexts.chunks(batch) {
        qvecs.extend(e.embed_queries(chunk)?);
    }
    let query_secs = t.elapsed().as_secs_f64();

    let (mut ndcg, mut recall) = (0.0, 0.0);
    for ((qid, _), q) in set.queries.iter().zip(&qvecs) {
        let mut best = vec![f32::NEG_INFINITY; set.docs.len()];
        for (v, &d) in vectors.iter().zip(&owner) {
            best[d] = best[d].max(dot(q, v));
        }
        let mut order: Vec<usize> = (0..set.docs.len()).collect();
        order.sort_by(|&a, &b| best[b].total_cmp(&best[a]));
        let rel = &set.qrels[qid];
        let top: Vec<&str> = order[..10.min(order.len())]
            .iter()
            .map(|&d| set.docs[d].0.as_str())
            .collect();
        let dcg: f64 = top
            .iter()
            .enumerate()
            .map(|(i, id)| rel.get(*id).copied().unwrap_or(0.0) / (i as f64 + 2.0).log2())
            .sum();
        let mut ideal: Vec<f64> = rel.values().copied().collect();
        ideal.sort_by(|a, b| b.total_cmp(a));
        let idcg: f64 = ideal
            .iter()
            .take(10)
            .enumerate()
            .map(|(i, g)| g / (i as f64 + 2.0).log2())
            .sum();
        ndcg += if idcg > 0.0 { dcg / idcg } else { 0.0 };
        let found: HashSet<&str> = top
            .iter()
            .copied()
            .filter(|id| rel.contains_key(*id))
            .collect();
        recall += found.len() as f64 / rel.len() as f64;
    }
    let n = set.queries.len() as f64;
    println!(
        "  {:<15} docs {:>5} windows {:>5} queries {:>5}  nDCG@10 {:.4}  recall@10 {:.4}  windows/s {:.1}  queries/s {:.1}  ({:.0} s)",
        set.name,
        set.docs.len(),
        windows.len(),
        set.queries.len(),
        ndcg / n,
        recall / n,
        windows.len() as f64 / doc_secs,
        qtexts.len() as f64 / query_secs,
        doc_secs + query_secs,
    );
    Ok(())
}

fn main() -> AnyResult<()> {
    let o = parse_args()?;
    let sets: Vec<Set> = o
        .sets
        .iter()
        .map(|s| load_set(s, o.max_docs))
        .collect::<AnyResult<_>>()?;
    println!(
        "threads {}, batch {}, window {} tokens{}, max docs {:?}, {} cores visible",
        o.threads,
        o.batch,
        o.max_length,
        if o.first_window {
            " (first window only)"
        } else {
            ""
        },
        o.max_docs,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for model in &o.models {
        let e = OnnxEmbedder::new(EmbedderConfig {
            model: *model,
            batch_size: o.batch,
            threads: Some(o.threads),
            max_length: o.max_length,
            ..Default::default()
        })?;
        let spec = e.spec();
        println!(
            "{model} (query prefix {:?}, document prefix {:?})",
            spec.query_prefix, spec.document_prefix
        );
        if o.speed {
            speed(&e, o.batch)?;
        }
        for set in &sets {
            evaluate(&e, set, o.batch, o.first_window)?;
        }
    }
    Ok(())
}
