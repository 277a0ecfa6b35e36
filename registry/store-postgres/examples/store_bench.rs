//! Store write and read latency, SQLite (the embedded default) and PostgreSQL side by side, in
//! one run: `scripts/pg-test.sh -- cargo run --release -p registry-store-postgres --example
//! store_bench [N]`. Each write is one commit (a new memory version and its audit event), as
//! the memory service makes it; each read is a `get` of a random written id, then a `find` of a
//! tenant's heads by lookup key. PostgreSQL runs through its pool on loopback, so the figures
//! include a round trip per statement.

use std::sync::Arc;
use std::time::{Duration, Instant};

use registry_core::Scope;
use registry_core::asset::{AssetKind, AssetMeta, AssetRecord, SourceKind};
use registry_core::audit::{AuditAction, AuditDraft};
use registry_core::hash::sha256_hex;
use registry_core::store::{AssetQuery, Store, WriteOp};
use registry_store_postgres::test_support::{TestSchema, URL_VAR};
use registry_store_sqlite::{SqliteStore, StoreOptions};

fn record(i: usize) -> AssetRecord {
    let text = format!("bench memory {i}: the build server is on rack {}", i % 97);
    let mut meta = AssetMeta::new(
        AssetKind::Memory,
        Scope::tenant("acme"),
        "ann",
        SourceKind::UserStatement,
    );
    meta.content_hash = sha256_hex(&text);
    AssetRecord {
        meta,
        lookup_key: Some(format!("ann|{}", i % 50)),
        body: serde_json::json!({ "class": "semantic", "text": text }),
    }
}

fn p(sorted: &[Duration], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

struct Figures {
    write: Vec<Duration>,
    get: Vec<Duration>,
    find: Vec<Duration>,
}

fn run(store: &dyn Store, n: usize) -> Figures {
    let mut ids = Vec::with_capacity(n);
    let mut write = Vec::with_capacity(n);
    for i in 0..n {
        let rec = record(i);
        ids.push(rec.meta.id.clone());
        let t = Instant::now();
        store
            .commit(vec![
                WriteOp::PutVersion(Box::new(rec.clone())),
                WriteOp::Audit(
                    AuditDraft::new("ann", AuditAction::MemoryWrite).asset(rec.meta.id.clone()),
                ),
            ])
            .expect("write");
        write.push(t.elapsed());
    }
    let mut get = Vec::with_capacity(n);
    let mut find = Vec::with_capacity(n);
    for i in 0..n {
        let id = &ids[(i * 7919) % n];
        let t = Instant::now();
        store.get(id).expect("get").expect("found");
        get.push(t.elapsed());
        let t = Instant::now();
        let hits = store
            .find(&AssetQuery {
                kind: Some(AssetKind::Memory),
                tenant: Some("acme".into()),
                lookup_key: Some(format!("ann|{}", i % 50)),
                heads_only: true,
                ..Default::default()
            })
            .expect("find");
        assert!(!hits.is_empty());
        find.push(t.elapsed());
    }
    for v in [&mut write, &mut get, &mut find] {
        v.sort();
    }
    Figures { write, get, find }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500);
    let url = std::env::var(URL_VAR).unwrap_or_else(|_| {
        eprintln!("set {URL_VAR} (scripts/pg-test.sh -- cargo run … does)");
        std::process::exit(2)
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite: Arc<dyn Store> =
        Arc::new(SqliteStore::open_dir(dir.path(), StoreOptions::default()).expect("sqlite"));
    let schema = TestSchema::new(&url);
    let pg: Arc<dyn Store> = Arc::new(schema.open(None));
    let results = [
        ("sqlite", run(sqlite.as_ref(), n)),
        ("postgres", run(pg.as_ref(), n)),
    ];
    println!("store bench: {n} writes, {n} gets, {n} finds per backend (ms)");
    println!(
        "{:<10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "backend", "write p50", "write p95", "get p50", "get p95", "find p50", "find p95"
    );
    for (name, f) in &results {
        println!(
            "{:<10} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
            name,
            p(&f.write, 0.5),
            p(&f.write, 0.95),
            p(&f.get, 0.5),
            p(&f.get, 0.95),
            p(&f.find, 0.5),
            p(&f.find, 0.95)
        );
    }
}
