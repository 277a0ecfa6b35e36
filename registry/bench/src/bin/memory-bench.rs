//! Memory benchmark: write latency through the gate with the real embedder, and search latency
//! with many memories in one user's scope among many more in the store. Prints figures; asserts
//! nothing.
//!
//! `memory-bench [TOTAL] [IN_USER_SCOPE] [--data-dir DIR] [--search-only]` (defaults 1,000,000
//! and 100,000).
//!
//! The bulk is inserted through the store and both indexes directly (not through the gate):
//! embedding a million texts with the real model would take hours on a small machine. Its
//! vectors are real embeddings of seed sentences, perturbed and renormalised; the output says so.

use std::time::Instant;

use chrono::{Duration, Utc};
use rand::Rng;
use registry_bench::pct;
use registry_core::asset::{AssetKind, AssetMeta, AssetRecord};
use registry_core::hash::sha256_hex;
use registry_core::retrieval::{TextDoc, VectorEntry};
use registry_core::store::WriteOp;
use registry_core::{Principal, Scope, SourceKind};
use registry_memory::record::{Layer, MemoryBody, MemoryClass, normalise};
use registry_memory::search::SearchRequest;
use registry_memory::{MemoryService, WriteRequest};
use registry_server::config::Config;
use registry_server::state::AppState;

const SUBJECTS: &[&str] = &[
    "Ann",
    "Bob",
    "the build server",
    "the staging cluster",
    "our biggest customer",
    "the London office",
    "the billing service",
    "the mobile app",
    "the nightly backup",
    "the support team",
    "the VPN",
    "the data warehouse",
    "the release train",
    "the payroll export",
    "the design review",
    "Carla",
];
const VERBS: &[&str] = &[
    "prefers",
    "failed on",
    "was moved to",
    "depends on",
    "was fixed by",
    "reported a problem with",
    "needs approval for",
    "switched to",
    "was migrated to",
    "asked about",
    "is blocked by",
    "scheduled",
];
const OBJECTS: &[&str] = &[
    "green tea",
    "the Friday deploy",
    "PostgreSQL 16",
    "a new certificate",
    "the Berlin datacentre",
    "dark mode",
    "the quarterly report",
    "an expired token",
    "the invoice template",
    "Kubernetes 1.30",
    "a flaky integration test",
    "the holiday calendar",
    "two-factor login",
    "the onboarding guide",
    "a disk quota",
    "the March budget",
];

fn sentence(rng: &mut impl Rng, i: usize) -> String {
    format!(
        "{} {} {} (note {})",
        SUBJECTS[rng.random_range(0..SUBJECTS.len())],
        VERBS[rng.random_range(0..VERBS.len())],
        OBJECTS[rng.random_range(0..OBJECTS.len())],
        i
    )
}

/// Write latency through the gate with the real embedder, and search latency with many
/// memories in one user's scope among many more in the store. Prints figures; asserts nothing.
#[derive(clap::Parser)]
struct Options {
    /// Memories in the store.
    #[arg(default_value_t = 1_000_000)]
    total: usize,
    /// Of those, in the searching user's scope.
    #[arg(default_value_t = 100_000)]
    in_user_scope: usize,
    /// Keep the store here (default: a temporary directory, removed at the end).
    #[arg(long)]
    data_dir: Option<std::path::PathBuf>,
    /// Reuse the store an earlier run left in `--data-dir`: only the writes that need it full.
    #[arg(long)]
    search_only: bool,
}

fn main() -> anyhow::Result<()> {
    let o: Options = clap::Parser::parse();
    let total = o.total;
    let in_user = o.in_user_scope.min(total);
    let tmp = tempfile_dir()?;
    let dir = o.data_dir.unwrap_or_else(|| tmp.clone());
    let mut config = Config {
        data_dir: dir.clone(),
        ..Config::default()
    };
    config.jobs.enabled = false;
    let state = AppState::open(config)?;
    let svc = state.services.memory.clone();
    let ann = Principal::new("acme", "ann");
    println!("memory-bench: data dir {}", dir.display());
    if o.search_only {
        // An existing store (`--data-dir` from an earlier run): the writes that need it full.
        writes_in_a_full_store(&svc, &ann, total, in_user)?;
    } else {
        write_and_bulk(&state, &svc, &ann, total, in_user)?;
    }
    search_bench(&svc, &ann)?;
    drop(svc);
    drop(state);
    if dir == tmp {
        let _ = std::fs::remove_dir_all(&tmp);
    } else {
        let _ = std::fs::remove_dir(&tmp);
    }
    Ok(())
}

fn write_and_bulk(
    state: &AppState,
    svc: &MemoryService,
    ann: &Principal,
    total: usize,
    in_user: usize,
) -> anyhow::Result<()> {
    let mut rng = rand::rng();

    // 1. Writes through the gate, one sentence each, real embedder.
    let n_writes = 200;
    let mut lat = vec![];
    let mut decisions = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..n_writes {
        let text = sentence(&mut rng, i);
        let req: WriteRequest = serde_json::from_value(serde_json::json!({
            "class": "episodic", "content": text
        }))?;
        let t = Instant::now();
        let out = svc.write(ann, &req, None)?;
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        *decisions
            .entry(out.decision.as_str().to_string())
            .or_default() += 1;
    }
    println!(
        "write (single, through the gate, real embedder): n={n_writes} p50={:.1} ms p95={:.1} ms decisions={decisions:?}",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.95)
    );

    // 2. Batched writes: POST /v1/memories/batch's path, 32 items per call, one embedding
    //    call per batch, every item through the whole gate.
    let batches = 10;
    let mut per_batch = vec![];
    let mut per_item = vec![];
    for b in 0..batches {
        let reqs: Vec<WriteRequest> = (0..32)
            .map(|i| {
                serde_json::from_value(serde_json::json!({
                    "class": "episodic", "content": sentence(&mut rng, 10_000 + b * 32 + i)
                }))
            })
            .collect::<Result<_, _>>()?;
        let t = Instant::now();
        for r in svc.write_batch(ann, &reqs, None) {
            r?;
        }
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        per_batch.push(ms);
        per_item.push(ms / 32.0);
    }
    println!(
        "write (batches of 32 through write_batch): {batches} batches, per batch p50={:.1} ms p95={:.1} ms, per item p50={:.2} ms p95={:.2} ms",
        pct(&mut per_batch, 0.5),
        pct(&mut per_batch, 0.95),
        pct(&mut per_item, 0.5),
        pct(&mut per_item, 0.95)
    );

    // 3. Bulk: `total` memories, `in_user` of them in ann's scope.
    let seeds: Vec<String> = (0..256).map(|i| sentence(&mut rng, i)).collect();
    let seed_refs: Vec<&str> = seeds.iter().map(String::as_str).collect();
    let seed_vecs = state.services.search.embedder.embed(&seed_refs)?;
    let model = state.services.search.embedder.info().tag();
    let t_bulk = Instant::now();
    let chunk = 10_000;
    let mut done = 0;
    while done < total {
        let n = chunk.min(total - done);
        let mut ops = Vec::with_capacity(n);
        let mut docs = Vec::with_capacity(n);
        let mut vecs = Vec::with_capacity(n);
        for j in 0..n {
            let i = done + j;
            let user = if i < in_user {
                "ann".to_string()
            } else {
                format!("u{}", i % 9_000)
            };
            let tenant = if i >= in_user && i % 10 == 0 {
                "globex"
            } else {
                "acme"
            };
            let scope = Scope {
                user: Some(user.clone()),
                ..Scope::tenant(tenant)
            };
            let s = rng.random_range(0..seeds.len());
            let text = format!("{} #{i}", seeds[s]);
            let mut meta =
                AssetMeta::new(AssetKind::Memory, scope, &user, SourceKind::UserStatement);
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
            let rec = AssetRecord {
                meta,
                lookup_key: None,
                body: serde_json::to_value(&body)?,
            };
            let keys = registry_core::retrieval::IndexKeys::of(
                &rec.meta,
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
            ops.push(WriteOp::PutVersion(Box::new(rec)));
        }
        state.services.backends.store.commit(ops)?;
        state.services.backends.text.upsert(&docs)?;
        state.services.backends.vectors.upsert(&vecs)?;
        done += n;
        if done % 100_000 == 0 || done == total {
            eprintln!(
                "  bulk: {done}/{total} in {:.0} s",
                t_bulk.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "bulk: {total} memories ({in_user} in acme/ann, the rest across 9,000 users of acme and globex) inserted through the store + indexes directly in {:.0} s; vectors are real embeddings of 256 seed sentences perturbed by uniform noise ±0.02 and renormalised (not gate writes)",
        t_bulk.elapsed().as_secs_f64()
    );
    println!(
        "text index: {} docs, vector index: {} vectors",
        state.services.backends.text.len()?,
        state.services.backends.vectors.len()?
    );

    writes_in_a_full_store(svc, ann, total, in_user)?;
    Ok(())
}

/// Single writes once ann's scope holds `in_user` memories among `total`: the gate's exact and
/// near-duplicate checks search that scope.
fn writes_in_a_full_store(
    svc: &MemoryService,
    ann: &Principal,
    total: usize,
    in_user: usize,
) -> anyhow::Result<()> {
    let mut rng = rand::rng();
    let n_writes = 100;
    let mut lat = vec![];
    for i in 0..n_writes {
        let req: WriteRequest = serde_json::from_value(serde_json::json!({
            "class": "episodic", "content": sentence(&mut rng, 50_000 + i)
        }))?;
        let t = Instant::now();
        svc.write(ann, &req, None)?;
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "write (single, through the gate, with {in_user} in the writer's scope among {total}): n={n_writes} p50={:.1} ms p95={:.1} ms",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.95)
    );
    Ok(())
}

fn search_bench(svc: &MemoryService, ann: &Principal) -> anyhow::Result<()> {
    let n_search = 200;
    let mut lat = vec![];
    let mut hits = 0;
    for i in 0..n_search {
        // Every query distinct (up to 256), so none is answered by the embedder's query cache:
        // this measures a search that embeds its query.
        let q = format!(
            "{} {}",
            SUBJECTS[i % SUBJECTS.len()],
            OBJECTS[(i * 7 + i / SUBJECTS.len()) % OBJECTS.len()]
        );
        let req: SearchRequest = serde_json::from_value(serde_json::json!({"query": q, "k": 10}))?;
        let t = Instant::now();
        let res = svc.search(ann, &req)?;
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        hits += res.hits.len();
    }
    println!(
        "search (k=10, distinct queries, the service's candidate pools, mixed-signal rerank, as acme/ann): n={n_search} p50={:.1} ms p95={:.1} ms mean hits={:.1}",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.95),
        hits as f64 / n_search as f64
    );
    Ok(())
}

fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("memory-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}
