//! Recall and latency of the embedded vector index's quantised passes on real embeddings:
//! sentences of a BEIR corpus of the shared data, embedded with the real model into one
//! partition, searched with the dataset's queries, each answer compared with an exact f32 scan.
//! Prints figures; asserts nothing.
//!
//! `vector-recall [--dataset scifact] [--max N] [--cache FILE] [--embed-model NAME]`: at most
//! `N` sentences (default 100,000; SciFact has about 50,000). The sentence vectors are kept in
//! `FILE` (default in the temporary directory, by model) so that a second run skips the model.

use std::path::PathBuf;
use std::time::Instant;

use registry_bench::{data_root, pct, read_jsonl};
use registry_core::asset::AssetKind;
use registry_core::retrieval::{IndexKeys, VectorEntry, VectorIndex, VisibilityFilter};
use registry_embed::{EmbedderConfig, ModelChoice, OnnxEmbedder};
use registry_vector_index::EmbeddedVectorIndex;

/// Sentences of at least 20 bytes, cut after `.`, `?` or `!` followed by a space.
fn sentences(text: &str) -> Vec<String> {
    let mut out = vec![];
    let mut start = 0;
    let b = text.as_bytes();
    for i in 0..b.len() {
        let end = matches!(b[i], b'.' | b'?' | b'!') && b.get(i + 1).is_none_or(|c| *c == b' ');
        if end {
            let s = text[start..=i].trim();
            if s.len() >= 20 {
                out.push(s.to_string());
            }
            start = i + 1;
        }
    }
    let s = text[start..].trim();
    if s.len() >= 20 {
        out.push(s.to_string());
    }
    out
}

fn read_cache(path: &PathBuf, dim: usize) -> Option<Vec<Vec<f32>>> {
    let b = std::fs::read(path).ok()?;
    if b.is_empty() || b.len() % (dim * 4) != 0 {
        return None;
    }
    Some(
        b.chunks_exact(dim * 4)
            .map(|row| {
                row.chunks_exact(4)
                    .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]))
                    .collect()
            })
            .collect(),
    )
}

/// Recall and latency of the embedded vector index's quantised passes on real embeddings,
/// each answer compared with an exact f32 scan. Prints figures; asserts nothing.
#[derive(clap::Parser)]
struct Options {
    /// A BEIR-layout set of the shared data.
    #[arg(long, default_value = "scifact")]
    dataset: String,
    /// At most this many documents.
    #[arg(long, default_value_t = 100_000)]
    max: usize,
    /// Where the embeddings are cached between runs (default: the temporary directory).
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Embedding model.
    #[arg(long, default_value_t)]
    embed_model: ModelChoice,
}

fn main() -> anyhow::Result<()> {
    let o: Options = clap::Parser::parse();
    let (dataset, max, model) = (o.dataset, o.max, o.embed_model);
    let root = data_root(&dataset);
    let embedder = OnnxEmbedder::new(EmbedderConfig {
        model,
        query_cache: 0,
        ..EmbedderConfig::default()
    })?;
    let dim = model.spec().dim;
    let cache = o.cache.unwrap_or_else(|| {
        std::env::temp_dir().join(format!(
            "vector-recall-{dataset}-{}-{max}.f32",
            model.name()
        ))
    });

    let mut texts: Vec<String> = vec![];
    for d in read_jsonl(&root.join("corpus.jsonl"))? {
        let title = d["title"].as_str().unwrap_or_default();
        let text = d["text"].as_str().unwrap_or_default();
        texts.extend(sentences(&format!("{title}. {text}")));
        if texts.len() >= max {
            break;
        }
    }
    texts.truncate(max);
    let vectors = match read_cache(&cache, dim).filter(|v| v.len() == texts.len()) {
        Some(v) => v,
        None => {
            let t = Instant::now();
            let mut v = Vec::with_capacity(texts.len());
            for chunk in texts.chunks(256) {
                let fit: Vec<&str> = chunk
                    .iter()
                    .map(|s| embedder.prefix_within(s, embedder.max_tokens() - 8))
                    .collect::<Result<_, _>>()?;
                v.extend(embedder.embed_texts(&fit)?);
            }
            println!(
                "embedded {} sentences in {:.0} s",
                v.len(),
                t.elapsed().as_secs_f64()
            );
            let bytes: Vec<u8> = v.iter().flatten().flat_map(|x| x.to_le_bytes()).collect();
            std::fs::write(&cache, bytes)?;
            v
        }
    };
    let queries: Vec<String> = read_jsonl(&root.join("queries.jsonl"))?
        .iter()
        .filter_map(|q| q["text"].as_str().map(str::to_string))
        .filter(|q| !q.trim().is_empty())
        .collect();
    let qrefs: Vec<&str> = queries.iter().map(String::as_str).collect();
    let qv = embedder.embed_queries(&qrefs)?;

    let dir = std::env::temp_dir().join(format!("vector-recall-{}", std::process::id()));
    let ix = EmbeddedVectorIndex::open(&dir, dim)?;
    let scope = "t:bench".to_string();
    let entries: Vec<VectorEntry> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| VectorEntry {
            keys: IndexKeys {
                asset_id: format!("s{i:07}"),
                kind: AssetKind::Chunk,
                scope_key: scope.clone(),
                acl_keys: vec!["public".into()],
                tags: vec![],
            },
            vector: v.clone(),
            model: model.name().into(),
        })
        .collect();
    for batch in entries.chunks(10_000) {
        ix.upsert(batch)?;
    }
    let filter = VisibilityFilter {
        scope_keys: vec![scope],
        acl_keys: vec!["public".into()],
        ..Default::default()
    };
    println!(
        "vector-recall: {dataset}, {} sentence vectors of {} in one partition, {} queries",
        vectors.len(),
        model.name(),
        qv.len()
    );
    for k in [10usize, 200] {
        let (mut found, mut lat) = (0usize, vec![]);
        for q in &qv {
            let mut exact: Vec<(f32, usize)> = vectors
                .iter()
                .enumerate()
                .map(|(i, v)| (v.iter().zip(q).map(|(a, b)| a * b).sum::<f32>(), i))
                .collect();
            exact.sort_by(|a, b| b.0.total_cmp(&a.0));
            let want: std::collections::HashSet<String> = exact
                .iter()
                .take(k)
                .map(|(_, i)| format!("s{i:07}"))
                .collect();
            let t = Instant::now();
            let hits = ix.search(q, &filter, k)?;
            lat.push(t.elapsed().as_secs_f64() * 1000.0);
            found += hits.iter().filter(|h| want.contains(&h.asset_id)).count();
        }
        println!(
            "k {k}: recall@{k} {:.4} against an exact scan, search p50 {:.2} ms p95 {:.2} ms",
            found as f64 / (qv.len() * k) as f64,
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.95)
        );
    }
    drop(ix);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
