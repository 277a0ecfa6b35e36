#![doc = include_str!("../README.md")]

pub mod corpus;

use std::collections::HashMap;
use std::path::Path;

use registry_core::retrieval::Embedder;
use registry_detect::vector::{self, Prototypes, VECTOR_DIM, VECTOR_MODEL_NAME, VECTOR_TOKENS};
use registry_embed::{EmbedderConfig, OnnxEmbedder};

use crate::corpus::Example;

/// The embedding model the second opinion reads ([`VECTOR_MODEL_NAME`]), with `threads`
/// (`None`: one per core).
pub fn second_opinion_embedder(threads: Option<usize>) -> OnnxEmbedder {
    OnnxEmbedder::new(EmbedderConfig {
        threads,
        ..EmbedderConfig::for_model(VECTOR_MODEL_NAME)
            .expect("registry-embed runs the gate's model")
    })
    .unwrap_or_else(|e| panic!("the second opinion's model (run scripts/fetch-models.sh): {e}"))
}

/// FNV-1a: stable across platforms and releases, unlike std's hasher.
pub fn fnv64(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Texts embedded per call by [`vectors_of`].
pub const VECTOR_BATCH: usize = 64;

/// The texts' second-opinion vectors ([`vector::gate_vectors`]), in order. The distinct texts
/// are embedded shortest first (by bytes, then in byte order), [`VECTOR_BATCH`] at a time, so
/// that a model run pads its texts to about their own length: in byte order the train split's
/// runs (of `registry_embed::FAIR_SLICE` texts) held 1.9× its tokens, shortest first 1.003×
/// (counted with the model's tokenizer, 2026-12-07). Padding is masked out, so a text's vector
/// does not depend on its batch (`registry-embed`'s `batch_equals_single`). With `cache`,
/// vectors computed before (same model file, same token cap, same text) are read from it and
/// new ones appended.
pub fn vectors_of(emb: &OnnxEmbedder, texts: &[&str], cache: Option<&Path>) -> Vec<Vec<f32>> {
    let salt = format!("{}:{VECTOR_TOKENS}:", emb.info().digest);
    let key = |t: &str| format!("{:016x}", fnv64(&format!("{salt}{t}")));
    let mut known: HashMap<String, Vec<f32>> = HashMap::new();
    if let Some(text) = cache.and_then(|c| std::fs::read_to_string(c).ok()) {
        for line in text.lines() {
            if let Ok((k, v)) = serde_json::from_str::<(String, Vec<f32>)>(line)
                && v.len() == VECTOR_DIM
            {
                known.insert(k, v);
            }
        }
    }
    let mut missing: Vec<&str> = texts
        .iter()
        .copied()
        .filter(|t| !known.contains_key(&key(t)))
        .collect();
    missing.sort_unstable_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    missing.dedup();
    let mut appended = String::new();
    for (n, chunk) in missing.chunks(VECTOR_BATCH).enumerate() {
        let vs = vector::gate_vectors(emb, chunk)
            .expect("embedding the corpus")
            .expect("the second opinion's model");
        for (t, v) in chunk.iter().zip(vs) {
            appended.push_str(&serde_json::to_string(&(key(t), &v)).expect("json"));
            appended.push('\n');
            known.insert(key(t), v);
        }
        eprint!("\rvectors: {} of {}", (n + 1) * VECTOR_BATCH, missing.len());
    }
    if !missing.is_empty() {
        eprintln!();
        if let Some(c) = cache {
            use std::io::Write;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(c)
                .and_then(|mut f| f.write_all(appended.as_bytes()))
                .expect("append to the vector cache");
        }
    }
    texts.iter().map(|t| known[&key(t)].clone()).collect()
}

/// The second opinion's prototypes (`model/prototypes.bin`): the vectors of the `train`
/// examples that train the classifier, in corpus order, with their labels. `vectors[i]` is
/// `train[i]`'s.
pub fn prototypes(train: &[&Example], vectors: &[Vec<f32>]) -> Prototypes {
    assert_eq!(train.len(), vectors.len());
    let (rows, labels): (Vec<&[f32]>, Vec<bool>) = train
        .iter()
        .zip(vectors)
        .filter(|(e, _)| e.split == "train" && e.trains_classifier())
        .map(|(e, v)| (&v[..], e.is_attack()))
        .unzip();
    Prototypes::new(&rows, &labels)
}
