//! Embedder throughput on SciFact abstracts.
//!
//! Usage: `registry-embed-bench [N]` (default 1000 abstracts). The corpus is
//! `$REGISTRY_SHARED_DATA/scifact/corpus.jsonl`, else `<repo>/../shared/data/scifact/corpus.jsonl`.
//! Abstracts longer than the model window are cut to their first `split_to_fit` window, so
//! every configuration embeds the same texts.

use std::path::PathBuf;
use std::time::Instant;

use registry_embed::{EmbedderConfig, MiniLmEmbedder};

fn corpus_path() -> PathBuf {
    let base = std::env::var_os("REGISTRY_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    base.join("scifact/corpus.jsonl")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = match std::env::args().nth(1) {
        Some(arg) => arg.parse()?,
        None => 1000,
    };
    let path = corpus_path();
    let raw = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let docs: Vec<String> = raw
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l)?;
            let title = v["title"].as_str().unwrap_or_default();
            let text = v["text"].as_str().unwrap_or_default();
            Ok(format!("{title}. {text}"))
        })
        .collect::<Result<_, serde_json::Error>>()?;

    let probe = MiniLmEmbedder::new(EmbedderConfig::default())?;
    let mut texts = Vec::with_capacity(docs.len());
    let mut cut = 0;
    let mut tokens = 0;
    for doc in &docs {
        let (start, end) = probe.split_to_fit(doc)?[0];
        if end - start < doc.len() {
            cut += 1;
        }
        let text = doc[start..end].to_string();
        tokens += probe.token_count(&text)?;
        texts.push(text);
    }
    drop(probe);
    println!(
        "corpus {}: {} abstracts, {cut} cut to the {}-token window, mean {:.1} tokens/text",
        path.display(),
        texts.len(),
        registry_embed::DEFAULT_MAX_LENGTH,
        tokens as f64 / texts.len().max(1) as f64
    );
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();

    println!(
        "{:>7} {:>7} {:>10} {:>10} {:>10}",
        "threads", "batch", "secs", "texts/s", "tokens/s"
    );
    for threads in [1, 2] {
        for batch_size in [1, 16, 64] {
            let embedder = MiniLmEmbedder::new(EmbedderConfig {
                batch_size,
                threads: Some(threads),
                ..Default::default()
            })?;
            // One warm-up call so session start-up is not timed.
            embedder.embed_texts(&refs[..refs.len().min(batch_size)])?;
            let started = Instant::now();
            let vectors = embedder.embed_texts(&refs)?;
            let secs = started.elapsed().as_secs_f64();
            assert_eq!(vectors.len(), refs.len());
            println!(
                "{threads:>7} {batch_size:>7} {secs:>10.2} {:>10.1} {:>10.0}",
                refs.len() as f64 / secs,
                tokens as f64 / secs
            );
        }
    }
    Ok(())
}
