//! Deletion benchmark: wall time to delete down to the purged level (a) one knowledge document
//! with 1,000 chunks, through `delete_assets` as `DELETE /v1/knowledge/documents/{id}` calls
//! it, and (b) a subject with 10,000 memories, through the subject-erasure code of
//! `DELETE /v1/subjects/{user}`. Each is one run over a store that also holds other users'
//! memories; the figures include the receipt's stage breakdown. Prints figures; asserts
//! nothing.
//!
//! ```text
//! cargo run --release -p registry-bench --bin deletion-bench -- \
//!     [--chunks 1000] [--memories 10000] [--others 20000] [--data-dir DIR]
//! ```
//!
//! The document goes through the knowledge service (chunked and embedded with the real model).
//! The memories are inserted through the store and both indexes directly, as `memory-bench`
//! does: their vectors are real embeddings of 64 seed sentences, perturbed and renormalised;
//! the output says so.

use std::time::Instant;

use chrono::{Duration, Utc};
use rand::Rng;
use registry_core::asset::{AssetKind, AssetMeta, AssetRecord};
use registry_core::deletion::{DeletionLevel, Receipt};
use registry_core::hash::sha256_hex;
use registry_core::principal::{Principal, Role};
use registry_core::retrieval::{IndexKeys, TextDoc, VectorEntry};
use registry_core::store::WriteOp;
use registry_core::{Scope, SourceKind};
use registry_knowledge::IngestRequest;
use registry_memory::record::{Layer, MemoryBody, MemoryClass, normalise};
use registry_server::config::Config;
use registry_server::state::AppState;

const TOPICS: &[&str] = &[
    "the build server",
    "the staging cluster",
    "the billing service",
    "the nightly backup",
    "the VPN",
    "the data warehouse",
    "the release train",
    "the payroll export",
];
const FACTS: &[&str] = &[
    "prefers green tea in the morning",
    "failed on the Friday deploy",
    "was moved to the Berlin datacentre",
    "depends on PostgreSQL 16",
    "needs approval for a new certificate",
    "switched to dark mode",
    "is blocked by a flaky integration test",
    "asked about the holiday calendar",
];

/// Wall time to delete one knowledge document and one subject's memories down to the purged
/// level, with the receipts' stage breakdown. Prints figures; asserts nothing.
#[derive(clap::Parser)]
struct Options {
    /// Chunks of the deleted document.
    #[arg(long, default_value_t = 1_000)]
    chunks: usize,
    /// Memories of the erased subject.
    #[arg(long, default_value_t = 10_000)]
    memories: usize,
    /// Other users' memories beside them.
    #[arg(long, default_value_t = 20_000)]
    others: usize,
    /// Keep the store in this directory (default: a temporary one, removed at the end).
    #[arg(long)]
    data_dir: Option<std::path::PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let Options {
        chunks,
        memories,
        others,
        data_dir,
    } = clap::Parser::parse();
    let tmp = std::env::temp_dir().join(format!("deletion-bench-{}", std::process::id()));
    let dir = data_dir.unwrap_or_else(|| tmp.clone());
    let mut config = Config {
        data_dir: dir.clone(),
        ..Config::default()
    };
    config.jobs.enabled = false;
    let state = AppState::open(config)?;
    println!("deletion-bench: data dir {}", dir.display());

    let t = Instant::now();
    let seeds = Seeds::new(&state)?;
    bulk_memories(&state, &seeds, "ann", memories, 0)?;
    for (i, n) in split(others, 100).into_iter().enumerate() {
        bulk_memories(
            &state,
            &seeds,
            &format!("u{i}"),
            n,
            memories + i * 1_000_000,
        )?;
    }
    println!(
        "setup: {memories} memories of acme/ann and {others} of 100 other users, inserted through \
         the store + indexes directly in {:.1} s (vectors: real embeddings of 64 seed sentences \
         perturbed by ±0.02 and renormalised; not gate writes)",
        t.elapsed().as_secs_f64()
    );

    let mut writer = Principal::new("acme", "ann");
    writer.roles = vec![Role::Writer];
    let t = Instant::now();
    let out = state.services.knowledge.ingest(
        &writer,
        IngestRequest {
            source_id: "handbook.md".into(),
            format: "md".into(),
            content: document(chunks),
            ..Default::default()
        },
    )?;
    println!(
        "setup: document {} ingested through the knowledge service ({} chunks embedded with the \
         real model) in {:.1} s",
        out.document_id,
        out.chunks,
        t.elapsed().as_secs_f64()
    );
    println!(
        "store before: text index {} docs, vector index {} vectors",
        state.services.backends.text.len()?,
        state.services.backends.vectors.len()?
    );

    // (a) One document and its chunks, as DELETE /v1/knowledge/documents/{id} does it.
    let t = Instant::now();
    let r = state.services.deletions.delete(
        &writer,
        std::slice::from_ref(&out.document_id),
        DeletionLevel::Purged,
        "bench: document deleted",
    )?;
    report(
        &format!("(a) document with {} chunks", out.chunks),
        &r,
        t.elapsed(),
        2.0,
    );

    // (b) Every asset of one subject, as DELETE /v1/subjects/{user} does it.
    let t = Instant::now();
    let ann = Principal::new("acme", "ann");
    let plan = state.services.plan_erasure(&ann, "ann")?;
    let r = state
        .services
        .erase(&ann, plan, Some("bench: subject erasure".into()))?;
    report(
        &format!("(b) subject with {memories} memories"),
        &r,
        t.elapsed(),
        10.0,
    );
    println!(
        "store after: text index {} docs, vector index {} vectors",
        state.services.backends.text.len()?,
        state.services.backends.vectors.len()?
    );

    drop(state);
    if dir == tmp {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Ok(())
}

/// `total` split into `parts` near-equal shares.
fn split(total: usize, parts: usize) -> Vec<usize> {
    (0..parts)
        .map(|i| total / parts + usize::from(i < total % parts))
        .collect()
}

fn report(what: &str, r: &Receipt, wall: std::time::Duration, target_s: f64) {
    let wall_ms = wall.as_secs_f64() * 1000.0;
    let staged: u64 = r.stage_ms.values().sum();
    let stages: Vec<String> = r.stage_ms.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!(
        "{what}: delete+purge {wall_ms:.0} ms (target {target_s:.0} s: {}), {} assets, {} versions, \
         level {:?}; stages ms: {} + checkpoint/other={:.0}",
        if wall.as_secs_f64() <= target_s {
            "met"
        } else {
            "MISSED"
        },
        r.counts.assets,
        r.counts.versions,
        r.level_reached,
        stages.join(" "),
        (wall_ms - staged as f64).max(0.0)
    );
}

/// A Markdown handbook of `n` short sections: one chunk each.
fn document(n: usize) -> String {
    let mut s = String::from("# Operations handbook\n\n");
    for i in 0..n {
        s.push_str(&format!(
            "## Procedure {i}\n\nWhen {} {} the on-call engineer opens ticket OPS-{i} and \
             follows runbook step {}.\n\n",
            TOPICS[i % TOPICS.len()],
            FACTS[(i / TOPICS.len()) % FACTS.len()],
            i % 17
        ));
    }
    s
}

/// Seed sentences and their real embeddings.
struct Seeds {
    texts: Vec<String>,
    vectors: Vec<Vec<f32>>,
    model: String,
}

impl Seeds {
    fn new(state: &AppState) -> anyhow::Result<Seeds> {
        let texts: Vec<String> = (0..64)
            .map(|i| {
                format!(
                    "{} {}",
                    TOPICS[i % TOPICS.len()],
                    FACTS[(i / TOPICS.len()) % FACTS.len()]
                )
            })
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        Ok(Seeds {
            vectors: state.services.backends.embedder.embed(&refs)?,
            model: state.services.backends.embedder.info().tag(),
            texts,
        })
    }
}

/// Inserts `n` episodic memories owned by `user` in acme (user scope) straight into the store
/// and both indexes, 5,000 per commit.
fn bulk_memories(
    state: &AppState,
    seeds: &Seeds,
    user: &str,
    n: usize,
    first: usize,
) -> anyhow::Result<()> {
    let mut rng = rand::rng();
    let (seed_vecs, model) = (&seeds.vectors, &seeds.model);
    let seeds = &seeds.texts;
    let mut done = 0;
    while done < n {
        let m = (n - done).min(5_000);
        let mut ops = Vec::with_capacity(m);
        let mut docs = Vec::with_capacity(m);
        let mut vecs = Vec::with_capacity(m);
        for j in 0..m {
            let i = first + done + j;
            let s = rng.random_range(0..seeds.len());
            let text = format!("{} (note {i})", seeds[s]);
            let scope = Scope {
                user: Some(user.to_string()),
                ..Scope::tenant("acme")
            };
            let mut meta =
                AssetMeta::new(AssetKind::Memory, scope, user, SourceKind::UserStatement);
            meta.created_at = Utc::now() - Duration::minutes(rng.random_range(0..500_000));
            meta.content_hash = sha256_hex(normalise(&text));
            let body = MemoryBody {
                class: MemoryClass::Episodic,
                content: text.clone(),
                layer: Layer::Raw,
                log_day: meta.created_at.format("%Y-%m-%d").to_string(),
                subject: None,
                attribute: None,
                value: None,
                entities: vec![],
                applicability: vec![],
                evidence: vec![],
                speaker: None,
                session_date: None,
                session_label: None,
                gate: vec![],
                supersedes: None,
                conflicts_with: None,
                consolidated_from: vec![],
                merged: vec![],
            };
            let keys = IndexKeys::of(
                &meta,
                AssetKind::Memory,
                vec!["class:episodic".into(), "layer:raw".into()],
            );
            let mut v: Vec<f32> = seed_vecs[s]
                .iter()
                .map(|x| x + rng.random_range(-0.02f32..0.02))
                .collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= norm);
            docs.push(TextDoc {
                keys: keys.clone(),
                text,
            });
            vecs.push(VectorEntry {
                keys,
                vector: v,
                model: model.clone(),
            });
            ops.push(WriteOp::PutVersion(Box::new(AssetRecord {
                meta,
                lookup_key: None,
                body: serde_json::to_value(&body)?,
            })));
        }
        state.services.backends.store.commit(ops)?;
        state.services.backends.text.upsert(&docs)?;
        state.services.backends.vectors.upsert(&vecs)?;
        done += m;
    }
    Ok(())
}
