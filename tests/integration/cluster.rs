//! Two `registry serve` processes (the real binary) on one PostgreSQL (`REGISTRY_TEST_PG_URL`,
//! see `scripts/pg-test.sh`): a write on one node is found on the other within a bounded lag;
//! a deletion on one is gone from the other's search and data directory, and its receipt names
//! both nodes; a node killed with SIGKILL leaves the other serving, and catches up when it
//! starts again.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use registry_core::CoreResult;
use registry_core::asset::AssetId;
use registry_core::audit::AuditKey;
use registry_core::deletion::{DeletionLevel, ReceiptStatus};
use registry_core::principal::Principal;
use registry_core::retrieval::{
    Embedder, IndexKeys, ModelInfo, ScoredId, VectorEntry, VectorIndex, VisibilityFilter,
};
use registry_embed::{EmbedderConfig, OnnxEmbedder};
use registry_memory::WriteRequest;
use registry_memory::search::SearchRequest;
use registry_services::{Backends, Options, Services};
use registry_store_postgres::test_support::{TestSchema, test_database_url};
use registry_text_index::TantivyTextIndex;
use registry_vector_index::EmbeddedVectorIndex;
use reqwest::blocking::Client;
use serde_json::{Value, json};

use crate::common::{ServerProcess, call, registry_bin};

/// The lag a write may take to reach the other node in this test (the follower polls every
/// 100 ms here; the embedder of the other node must embed it too).
const MAX_LAG: Duration = Duration::from_secs(20);

struct Node {
    proc: ServerProcess,
    dir: std::path::PathBuf,
}

/// The settings every node of the test cluster shares.
pub(crate) fn cluster_env(
    schema: &TestSchema,
    url: &str,
    key_file: &Path,
) -> Vec<(String, String)> {
    vec![
        ("REGISTRY_STORE__URL".into(), url.into()),
        ("REGISTRY_STORE__SCHEMA".into(), schema.name().into()),
        ("REGISTRY_STORE__FOLLOW_INTERVAL_MS".into(), "100".into()),
        ("REGISTRY_STORE__NODE_TIMEOUT_SECS".into(), "5".into()),
        // Every node keys the one audit chain with the same key.
        (
            "REGISTRY_AUDIT_KEY_FILE".into(),
            key_file.display().to_string(),
        ),
    ]
}

fn start(dir: &Path, env: &[(String, String)]) -> Node {
    Node {
        proc: ServerProcess::spawn_with(dir, env),
        dir: dir.to_path_buf(),
    }
}

pub(crate) fn create_key(dir: &Path, env: &[(String, String)]) -> String {
    let out = Command::new(registry_bin())
        .arg("--data-dir")
        .arg(dir)
        .args([
            "keys",
            "create",
            "--tenant",
            "acme",
            "--user",
            "ann",
            "--role",
            "admin",
            "--clearance",
            "secret",
            "--json",
        ])
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["key"].as_str().unwrap().to_string()
}

fn post(c: &Client, base: &str, key: &str, path: &str, body: &Value) -> (u16, Value) {
    let r = c
        .post(format!("{base}{path}"))
        .bearer_auth(key)
        .json(body)
        .send()
        .unwrap();
    let s = r.status().as_u16();
    (s, r.json().unwrap_or(Value::Null))
}

fn delete(c: &Client, base: &str, key: &str, path: &str) -> (u16, Value) {
    let r = c
        .delete(format!("{base}{path}"))
        .bearer_auth(key)
        .send()
        .unwrap();
    let s = r.status().as_u16();
    (s, r.json().unwrap_or(Value::Null))
}

/// Ids of the memories a search on `base` finds for `q`.
fn memory_hits(c: &Client, base: &str, key: &str, q: &str) -> Vec<String> {
    let (s, b) = post(
        c,
        base,
        key,
        "/v1/memories/search",
        &json!({"query": q, "k": 20}),
    );
    assert_eq!(s, 200, "{b}");
    b["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["memory"]["id"].as_str().unwrap().to_string())
        .collect()
}

/// Ids of the knowledge chunks' documents a search on `base` finds for `q`.
fn knowledge_hits(c: &Client, base: &str, key: &str, q: &str) -> usize {
    let (s, b) = post(
        c,
        base,
        key,
        "/v1/knowledge/search",
        &json!({"query": q, "min_score": 0.0}),
    );
    assert_eq!(s, 200, "{b}");
    b["evidence"].as_array().map_or(0, Vec::len)
}

/// Polls until `found` holds; returns how long it took.
fn within(what: &str, found: impl Fn() -> bool) -> Duration {
    let t = Instant::now();
    while !found() {
        assert!(t.elapsed() < MAX_LAG, "{what}: not within {MAX_LAG:?}");
        std::thread::sleep(Duration::from_millis(25));
    }
    t.elapsed()
}

fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read(&p)
                .unwrap()
                .windows(needle.len())
                .any(|w| w == needle)
            {
                found.push(p.display().to_string());
            }
        }
    }
    found
}

#[test]
fn two_nodes_on_one_postgres_follow_each_other() {
    let Some(url) = test_database_url("two_nodes_on_one_postgres_follow_each_other") else {
        return;
    };
    let schema = TestSchema::new(&url);
    let tmp = tempfile::tempdir().unwrap();
    let env = cluster_env(&schema, &url, &tmp.path().join("audit.key"));
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let a = start(&dir_a, &env);
    let b = start(&dir_b, &env);
    let key = create_key(&dir_a, &env);
    let c = Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();

    // A write on A: found on A at once, on B within the lag.
    let (s, w) = post(
        &c,
        &a.proc.base,
        &key,
        "/v1/memories",
        &json!({"class": "semantic", "content": "Ann's badge number is zqxbadge5521"}),
    );
    assert!(s == 200 || s == 201, "{w}");
    let id = w["id"].as_str().unwrap().to_string();
    assert!(
        memory_hits(&c, &a.proc.base, &key, "zqxbadge5521").contains(&id),
        "read your writes on A"
    );
    let lag = within("A's write found on B", || {
        memory_hits(&c, &b.proc.base, &key, "zqxbadge5521").contains(&id)
    });
    eprintln!("cluster: a memory written on A was found on B after {lag:?}");

    // A document ingested on A and deleted on B: gone from A's search and A's data directory.
    let (s, d) = post(
        &c,
        &a.proc.base,
        &key,
        "/v1/knowledge/documents",
        &json!({"source_id": "vault.md", "format": "md",
                "content": "# Vault\n\nThe zqxvault7 combination is kept offline."}),
    );
    assert_eq!(s, 201, "{d}");
    let doc = d["document_id"].as_str().unwrap().to_string();
    within("A's document found on B", || {
        knowledge_hits(&c, &b.proc.base, &key, "zqxvault7") > 0
    });
    let t = Instant::now();
    let (s, receipt) = delete(
        &c,
        &b.proc.base,
        &key,
        &format!("/v1/knowledge/documents/{doc}"),
    );
    eprintln!(
        "cluster: the purge on B, applied by both nodes, took {:?}",
        t.elapsed()
    );
    assert_eq!(s, 200, "{receipt}");
    assert_eq!(receipt["level_reached"], "purged", "{receipt}");
    assert_eq!(receipt["status"], "completed", "{receipt}");
    let nodes = receipt["nodes"]
        .as_array()
        .expect("the receipt names the nodes");
    assert_eq!(nodes.len(), 2, "{receipt}");
    assert!(nodes.iter().all(|n| n["applied"] == true), "{receipt}");
    let method = receipt["assets"][0]["stores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["store"] == "assets")
        .and_then(|s| s["method"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(method.contains("VACUUM"), "{receipt}");
    assert_eq!(knowledge_hits(&c, &a.proc.base, &key, "zqxvault7"), 0);
    let left = files_containing(&a.dir, b"zqxvault7");
    assert!(
        left.is_empty(),
        "A's data directory still holds it: {left:?}"
    );

    // A skill published on A: B serves its archive (blobs live in the shared database).
    let skills_dir = tmp.path().join("skills");
    let dir = crate::skills::make_skill(&skills_dir, "ledger-book", "1.0.0", "", "Book them.");
    let (bytes, digest) = crate::skills::pack(&dir);
    let (s, v) = call(
        c.post(format!("{}/v1/skills", a.proc.base))
            .bearer_auth(&key)
            .header("content-type", "application/octet-stream")
            .body(bytes.clone()),
    );
    assert_eq!(s, 201, "{v}");
    let got = c
        .get(format!(
            "{}/v1/skills/by-digest/{digest}/archive",
            b.proc.base
        ))
        .bearer_auth(&key)
        .send()
        .unwrap();
    assert_eq!(got.status().as_u16(), 200);
    assert_eq!(
        got.bytes().unwrap().as_ref(),
        bytes.as_slice(),
        "B serves A's archive"
    );

    // A killed: B keeps serving; what B takes meanwhile reaches A when it starts again.
    a.proc.kill9();
    let (s, w) = post(
        &c,
        &b.proc.base,
        &key,
        "/v1/memories",
        &json!({"class": "semantic", "content": "Ann parks on level zqxlevel33"}),
    );
    assert!(s == 200 || s == 201, "B keeps serving: {w}");
    let late = w["id"].as_str().unwrap().to_string();
    assert!(memory_hits(&c, &b.proc.base, &key, "zqxlevel33").contains(&late));
    let t = Instant::now();
    let a = start(&dir_a, &env);
    eprintln!("cluster: A restarted and caught up in {:?}", t.elapsed());
    assert!(
        memory_hits(&c, &a.proc.base, &key, "zqxlevel33").contains(&late),
        "A caught up from the log before serving"
    );
    assert!(memory_hits(&c, &a.proc.base, &key, "zqxbadge5521").contains(&id));
    drop(b);
    drop(a);
}

/// A vector index every node reaches, as Qdrant is: here the embedded index, one copy that two
/// in-process nodes share (Qdrant itself cannot be installed on these machines).
struct SharedVectors(Arc<EmbeddedVectorIndex>);

impl VectorIndex for SharedVectors {
    fn upsert(&self, entries: &[VectorEntry]) -> CoreResult<()> {
        VectorIndex::upsert(&*self.0, entries)
    }
    fn delete(&self, ids: &[AssetId]) -> CoreResult<()> {
        VectorIndex::delete(&*self.0, ids)
    }
    fn search(&self, v: &[f32], f: &VisibilityFilter, k: usize) -> CoreResult<Vec<ScoredId>> {
        VectorIndex::search(&*self.0, v, f, k)
    }
    fn compact(&self) -> CoreResult<()> {
        VectorIndex::compact(&*self.0)
    }
    fn relabel(&self, keys: &[IndexKeys]) -> CoreResult<usize> {
        VectorIndex::relabel(&*self.0, keys)
    }
    fn ids_not_made_by(&self, tag: &str, limit: usize) -> CoreResult<Vec<AssetId>> {
        VectorIndex::ids_not_made_by(&*self.0, tag, limit)
    }
    fn missing(&self, ids: &[AssetId]) -> CoreResult<Vec<AssetId>> {
        VectorIndex::missing(&*self.0, ids)
    }
    fn len(&self) -> CoreResult<u64> {
        VectorIndex::len(&*self.0)
    }
    fn shared(&self) -> bool {
        true
    }
}

/// The real model, counting the texts each node embeds for storage.
struct Counting(Arc<OnnxEmbedder>, AtomicUsize);

impl Embedder for Counting {
    fn info(&self) -> &ModelInfo {
        Embedder::info(&*self.0)
    }
    fn embed(&self, texts: &[&str]) -> CoreResult<Vec<Vec<f32>>> {
        self.1.fetch_add(texts.len(), Ordering::SeqCst);
        Embedder::embed(&*self.0, texts)
    }
    fn embed_query(&self, texts: &[&str]) -> CoreResult<Vec<Vec<f32>>> {
        Embedder::embed_query(&*self.0, texts)
    }
    fn count_tokens(&self, text: &str) -> CoreResult<usize> {
        Embedder::count_tokens(&*self.0, text)
    }
    fn content_tokens(&self, text: &str) -> CoreResult<usize> {
        Embedder::content_tokens(&*self.0, text)
    }
}

#[test]
fn nodes_sharing_a_vector_index_embed_each_write_once_and_follow_in_text() {
    let Some(url) = test_database_url("nodes_sharing_a_vector_index_embed_each_write_once") else {
        return;
    };
    let schema = TestSchema::new(&url);
    let tmp = tempfile::tempdir().unwrap();
    let key = AuditKey::from_bytes([7; 32]);
    let model = Arc::new(OnnxEmbedder::new(EmbedderConfig::default()).unwrap());
    // The gate's second opinion, shared by the nodes as one server shares it.
    let gate: Arc<dyn Embedder> = Arc::new(
        OnnxEmbedder::new(
            EmbedderConfig::for_model(registry_detect::vector::VECTOR_MODEL_NAME).unwrap(),
        )
        .unwrap(),
    );
    let shared = Arc::new(EmbeddedVectorIndex::open(tmp.path().join("vectors"), 384).unwrap());
    let node = |name: &str| {
        let dir = tmp.path().join(name);
        let store = Arc::new(
            registry_store_postgres::PgStore::connect(registry_store_postgres::PgOptions {
                node_id: Some(name.into()),
                ..schema.options(Some(key.clone()))
            })
            .unwrap(),
        );
        let embedder = Arc::new(Counting(model.clone(), AtomicUsize::new(0)));
        let services = Services::new(
            Backends {
                store: store.clone(),
                blobs: Arc::new(registry_store_postgres::PgBlobStore::new(store)),
                text: Arc::new(TantivyTextIndex::open(dir.join("text")).unwrap()),
                vectors: Arc::new(SharedVectors(shared.clone())),
                embedder: embedder.clone(),
                gate_embedder: Some(gate.clone()),
            },
            Options {
                audit_key: key.clone(),
                audit_anchor: dir.join("anchor"),
                retention: Default::default(),
                cluster: Default::default(),
            },
        );
        services.catch_up().unwrap();
        (services, embedder)
    };
    let (a, a_embeds) = node("node-a");
    let (b, b_embeds) = node("node-b");
    let p = Principal::new("acme", "ann");
    let write: WriteRequest = serde_json::from_value(json!({
        "class": "semantic",
        "content": "The spare key to the zqxshed9 garden shed hangs behind the boiler"
    }))
    .unwrap();
    let id = a.memory.write(&p, &write, None).unwrap().id;
    assert_eq!(
        a_embeds.1.load(Ordering::SeqCst),
        1,
        "the writing node embeds it"
    );
    let report = b.follow_once().unwrap();
    assert!(report.indexed >= 1, "{report:?}");
    assert_eq!(
        b_embeds.1.load(Ordering::SeqCst),
        0,
        "the other node follows in its text index only: the shared vector is there already"
    );
    let search = |s: &Services, q: &str| {
        let req: SearchRequest = serde_json::from_value(json!({"query": q})).unwrap();
        s.memory.search(&p, &req).unwrap().hits
    };
    // Both legs on B: its own text index found the rare word, the shared vectors the meaning.
    let hits = search(&b, "zqxshed9");
    assert_eq!(hits[0].memory.id, id);
    assert!(hits[0].breakdown.lexical > 0.0, "{:?}", hits[0].breakdown);
    let hits = search(&b, "where is the extra key for the shed kept?");
    assert_eq!(hits[0].memory.id, id);
    assert!(hits[0].breakdown.semantic > 0.3, "{:?}", hits[0].breakdown);

    // A purge on B (A following meanwhile, as its follower thread would): the vector leaves
    // the shared index, A's text index follows, and the receipt says how the index purged.
    let done = AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                a.follow_once().unwrap();
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let r = b
            .deletions
            .delete(&p, std::slice::from_ref(&id), DeletionLevel::Purged, "test");
        done.store(true, Ordering::SeqCst);
        r.unwrap()
    });
    assert_eq!(r.status, ReceiptStatus::Completed, "{r:?}");
    assert!(r.nodes.iter().all(|n| n.applied), "{:?}", r.nodes);
    assert!(search(&a, "zqxshed9").iter().all(|h| h.memory.id != id));
    assert_eq!(
        shared.len().unwrap(),
        0,
        "no vector left in the shared index"
    );
    assert_eq!(b_embeds.1.load(Ordering::SeqCst), 0);
}

/// Asks the test Qdrant's REST API (`REGISTRY_TEST_QDRANT_HTTP`) directly, past the registry:
/// `(points in the collection, whether the asset's point is there)`.
pub(crate) fn qdrant_points(http: &str, collection: &str, asset_id: &str) -> (u64, bool) {
    let c = Client::new();
    let count: Value = c
        .post(format!("{http}/collections/{collection}/points/count"))
        .json(&json!({"exact": true}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let got: Value = c
        .post(format!("{http}/collections/{collection}/points"))
        .json(
            &json!({"ids": [registry_vector_qdrant::filter::point_id(asset_id)],
                      "with_payload": true}),
        )
        .send()
        .unwrap()
        .json()
        .unwrap();
    let found = got["result"]
        .as_array()
        .expect("points answer")
        .iter()
        .any(|p| p["payload"][registry_vector_qdrant::filter::ASSET_ID] == asset_id);
    (
        count["result"]["count"].as_u64().expect("count answer"),
        found,
    )
}

#[test]
fn two_nodes_on_one_postgres_and_one_qdrant_embed_once_and_purge_the_points() {
    use registry_vector_qdrant::test_support::{
        skip, test_qdrant_api_key, test_qdrant_http, test_qdrant_url, unique_prefix,
    };
    use registry_vector_qdrant::{QdrantOptions, QdrantVectorIndex};
    const NAME: &str = "two_nodes_on_one_postgres_and_one_qdrant";
    let Some(qdrant) = test_qdrant_url(NAME) else {
        return;
    };
    let Some(url) = test_database_url(NAME) else {
        return;
    };
    let Some(http) = test_qdrant_http() else {
        skip(
            NAME,
            "REGISTRY_TEST_QDRANT_HTTP is not set (scripts/qdrant-test.sh sets it)",
        );
        return;
    };
    let schema = TestSchema::new(&url);
    let tmp = tempfile::tempdir().unwrap();
    let key = AuditKey::from_bytes([7; 32]);
    let model = Arc::new(OnnxEmbedder::new(EmbedderConfig::default()).unwrap());
    let gate: Arc<dyn Embedder> = Arc::new(
        OnnxEmbedder::new(
            EmbedderConfig::for_model(registry_detect::vector::VECTOR_MODEL_NAME).unwrap(),
        )
        .unwrap(),
    );
    // Each node connects to Qdrant on its own, as two servers with one `vectors.qdrant_url` do.
    let options = QdrantOptions {
        api_key: test_qdrant_api_key(),
        collection_prefix: unique_prefix(),
        ..QdrantOptions::new(&qdrant, model.info().dim, model.info().tag())
    };
    let collection = options.collection();
    let node = |name: &str| {
        let dir = tmp.path().join(name);
        let store = Arc::new(
            registry_store_postgres::PgStore::connect(registry_store_postgres::PgOptions {
                node_id: Some(name.into()),
                ..schema.options(Some(key.clone()))
            })
            .unwrap(),
        );
        let embedder = Arc::new(Counting(model.clone(), AtomicUsize::new(0)));
        let services = Services::new(
            Backends {
                store: store.clone(),
                blobs: Arc::new(registry_store_postgres::PgBlobStore::new(store)),
                text: Arc::new(TantivyTextIndex::open(dir.join("text")).unwrap()),
                vectors: Arc::new(QdrantVectorIndex::connect(options.clone()).unwrap()),
                embedder: embedder.clone(),
                gate_embedder: Some(gate.clone()),
            },
            Options {
                audit_key: key.clone(),
                audit_anchor: dir.join("anchor"),
                retention: Default::default(),
                cluster: Default::default(),
            },
        );
        services.catch_up().unwrap();
        (services, embedder)
    };
    let (a, a_embeds) = node("node-a");
    let (b, b_embeds) = node("node-b");
    let p = Principal::new("acme", "ann");
    let write: WriteRequest = serde_json::from_value(json!({
        "class": "semantic",
        "content": "The spare key to the zqxshed9 garden shed hangs behind the boiler"
    }))
    .unwrap();
    let id = a.memory.write(&p, &write, None).unwrap().id;
    assert_eq!(a_embeds.1.load(Ordering::SeqCst), 1, "A embeds it");
    assert_eq!(
        qdrant_points(&http, &collection, &id),
        (1, true),
        "A's write is one point in Qdrant"
    );
    let report = b.follow_once().unwrap();
    assert!(report.indexed >= 1, "{report:?}");
    assert_eq!(
        b_embeds.1.load(Ordering::SeqCst),
        0,
        "B follows in its text index only: the point in Qdrant is there already"
    );
    let search = |s: &Services, q: &str| {
        let req: SearchRequest = serde_json::from_value(json!({"query": q})).unwrap();
        s.memory.search(&p, &req).unwrap().hits
    };
    // Both legs on B: its own text index finds the rare word, Qdrant the meaning.
    let hits = search(&b, "zqxshed9");
    assert_eq!(hits[0].memory.id, id);
    assert!(hits[0].breakdown.lexical > 0.0, "{:?}", hits[0].breakdown);
    let hits = search(&b, "where is the extra key for the shed kept?");
    assert_eq!(hits[0].memory.id, id);
    assert!(hits[0].breakdown.semantic > 0.3, "{:?}", hits[0].breakdown);
    // Another tenant on B: Qdrant's filter keeps the point out of its candidates.
    let other = Principal::new("globex", "gus");
    let req: SearchRequest =
        serde_json::from_value(json!({"query": "where is the extra key for the shed kept?"}))
            .unwrap();
    assert!(b.memory.search(&other, &req).unwrap().hits.is_empty());

    // A purge on B, A following meanwhile: Qdrant itself no longer has the point.
    let done = AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                a.follow_once().unwrap();
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let r = b
            .deletions
            .delete(&p, std::slice::from_ref(&id), DeletionLevel::Purged, "test");
        done.store(true, Ordering::SeqCst);
        r.unwrap()
    });
    assert_eq!(r.status, ReceiptStatus::Completed, "{r:?}");
    assert!(r.nodes.iter().all(|n| n.applied), "{:?}", r.nodes);
    let vectors = r.assets[0]
        .stores
        .iter()
        .find(|s| s.store == "vector_index")
        .unwrap_or_else(|| panic!("the receipt names the vector index: {r:?}"));
    assert_eq!(vectors.count, 1, "{r:?}");
    assert_eq!(
        vectors.method.as_deref(),
        Some(registry_vector_qdrant::PURGE_METHOD)
    );
    assert_eq!(
        qdrant_points(&http, &collection, &id),
        (0, false),
        "Qdrant still holds the purged point"
    );
    assert!(search(&a, "zqxshed9").iter().all(|h| h.memory.id != id));
    assert!(
        search(&b, "where is the extra key for the shed kept?")
            .iter()
            .all(|h| h.memory.id != id)
    );
    assert_eq!(b_embeds.1.load(Ordering::SeqCst), 0);
    drop((a, b));
    let _ = QdrantVectorIndex::connect(options).map(QdrantVectorIndex::drop_collection);
}
