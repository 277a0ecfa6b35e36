//! The deletion engine over the real embedded backends: the derivation walk, the three levels,
//! receipts, and a byte scan of the data directory after a purge.

use registry_core::Scope;
use registry_core::asset::{AssetKind, AssetMeta, AssetRecord, AssetStatus, SourceKind};
use registry_core::audit::{AuditAction, AuditDraft};
use registry_core::deletion::{DeletionLevel, Receipt, ReceiptStatus};
use registry_core::derivation::{ChildStore, DerivationEdge, Relation};
use registry_core::hash::sha256_hex;
use registry_core::principal::Principal;
use registry_core::retrieval::{IndexKeys, VisibilityFilter};
use registry_core::store::WriteOp;
use registry_engine::SearchOptions;
use serde_json::json;

use crate::common::*;

fn put(
    app: &TestApp,
    tenant: &str,
    kind: AssetKind,
    text: &str,
    parents: &[&str],
    rel: Relation,
) -> String {
    let mut meta = AssetMeta::new(
        kind,
        Scope::tenant(tenant),
        "ann",
        SourceKind::UserStatement,
    );
    meta.content_hash = sha256_hex(text);
    let id = meta.id.clone();
    let keys = IndexKeys::of(&meta, kind, vec![]);
    let mut ops = vec![WriteOp::PutVersion(Box::new(AssetRecord {
        meta,
        lookup_key: None,
        body: json!({ "text": text }),
    }))];
    for p in parents {
        ops.push(WriteOp::AddEdge(DerivationEdge {
            parent: p.to_string(),
            child: id.clone(),
            relation: rel,
            child_store: ChildStore::Assets,
        }));
    }
    ops.push(WriteOp::Audit(
        AuditDraft::new("ann", AuditAction::MemoryWrite)
            .tenant(tenant)
            .asset(id.clone()),
    ));
    app.state.services.backends.store.commit(ops).unwrap();
    app.state
        .services
        .search
        .index_asset(keys, text.to_string())
        .unwrap();
    id
}

/// Deletes `roots` as ann of acme, up to `level`.
fn delete(app: &TestApp, roots: &[String], level: DeletionLevel) -> Receipt {
    let p = Principal::new("acme", "ann");
    app.state
        .services
        .deletions
        .delete(&p, roots, level, "test")
        .unwrap()
}

fn hits(app: &TestApp, tenant: &str, q: &str) -> Vec<String> {
    let p = Principal::new(tenant, "ann");
    let f = VisibilityFilter::for_principal(&p, &[]);
    app.state
        .services
        .search
        .search(q, &f, &SearchOptions::with_k(20))
        .unwrap()
        .into_iter()
        .map(|h| h.asset_id)
        .collect()
}

/// The files under `dir` holding `needle` anywhere in their bytes.
pub(crate) fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
    let mut found = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                if memchr::memmem::find(&bytes, needle).is_some() {
                    found.push(p.display().to_string());
                }
            }
        }
    }
    found
}

#[test]
fn purge_walks_the_graph_and_leaves_no_byte_behind() {
    let app = TestApp::start();
    let canary = "zqxcanary4417 the vault code is 99-1-2";
    let doc = put(
        &app,
        "acme",
        AssetKind::Document,
        canary,
        &[],
        Relation::ChunkOf,
    );
    let chunk = put(
        &app,
        "acme",
        AssetKind::Chunk,
        canary,
        &[&doc],
        Relation::ChunkOf,
    );
    let keep = put(
        &app,
        "acme",
        AssetKind::Document,
        "quarterly revenue grew five percent",
        &[],
        Relation::ChunkOf,
    );
    assert!(hits(&app, "acme", "zqxcanary4417").contains(&chunk));

    let receipt = delete(&app, std::slice::from_ref(&doc), DeletionLevel::Purged);
    assert_eq!(receipt.status, ReceiptStatus::Completed);
    assert_eq!(receipt.level_reached, DeletionLevel::Purged);
    let reached: Vec<&str> = receipt.assets.iter().map(|a| a.id.as_str()).collect();
    assert!(reached.contains(&doc.as_str()) && reached.contains(&chunk.as_str()));
    assert_eq!(receipt.counts.assets, 2);
    assert!(
        receipt
            .assets
            .iter()
            .all(|a| a.content_hashes == vec![sha256_hex(canary)])
    );
    // The stored receipt says the same, and carries hashes, never the content.
    let stored = app
        .state
        .services
        .backends
        .store
        .get_receipt(&receipt.id)
        .unwrap()
        .unwrap();
    assert_eq!(stored, receipt);
    assert!(
        !serde_json::to_string(&stored)
            .unwrap()
            .contains("zqxcanary4417")
    );

    let after = hits(&app, "acme", "zqxcanary4417");
    assert!(
        !after.contains(&doc) && !after.contains(&chunk),
        "{after:?}"
    );
    assert!(
        app.state
            .services
            .backends
            .store
            .get(&doc)
            .unwrap()
            .is_none()
    );
    let found = files_containing(&app.state.config.data_dir, b"zqxcanary4417");
    assert!(found.is_empty(), "canary still on disk in {found:?}");
    // Unrelated assets are intact and searchable.
    assert!(hits(&app, "acme", "quarterly revenue").contains(&keep));
}

#[test]
fn revoke_is_immediate_and_cites_are_flagged_not_deleted() {
    let app = TestApp::start();
    let reference = put(
        &app,
        "acme",
        AssetKind::Document,
        "reference text about tides",
        &[],
        Relation::ChunkOf,
    );
    let skill = put(
        &app,
        "acme",
        AssetKind::SkillVersion,
        "skill citing tides",
        &[&reference],
        Relation::Cites,
    );
    let r = delete(
        &app,
        std::slice::from_ref(&reference),
        DeletionLevel::Revoked,
    );
    assert_eq!(r.level_reached, DeletionLevel::Revoked);
    assert_eq!(
        app.state
            .services
            .backends
            .store
            .get(&reference)
            .unwrap()
            .unwrap()
            .meta
            .status,
        AssetStatus::Revoked
    );
    assert_eq!(r.flagged.len(), 1);
    assert_eq!(r.flagged[0].id, skill);
    assert!(
        app.state
            .services
            .backends
            .store
            .get(&skill)
            .unwrap()
            .unwrap()
            .meta
            .status
            .is_servable()
    );
}

#[test]
fn a_summary_loses_its_last_parent_and_goes_with_it() {
    let app = TestApp::start();
    let a = put(
        &app,
        "acme",
        AssetKind::Memory,
        "ann likes green tea",
        &[],
        Relation::ChunkOf,
    );
    let b = put(
        &app,
        "acme",
        AssetKind::Memory,
        "ann drinks tea daily",
        &[],
        Relation::ChunkOf,
    );
    let summary = put(
        &app,
        "acme",
        AssetKind::Summary,
        "ann: tea drinker",
        &[&a, &b],
        Relation::SummaryOf,
    );
    let r = delete(&app, &[a.clone(), b.clone()], DeletionLevel::Purged);
    assert!(
        r.assets
            .iter()
            .any(|x| x.id == summary && x.regenerated_as.is_none())
    );
    assert!(
        app.state
            .services
            .backends
            .store
            .get(&summary)
            .unwrap()
            .is_none()
    );
}

#[test]
fn receipts_are_tenant_bound_over_http() {
    let app = TestApp::start();
    let ka = app.key("acme", "ann", &[], &[]);
    let kb = app.key("globex", "bob", &[], &[]);
    let (s, w) = call(app.post(
        &ka,
        "/v1/memories",
        &json!({"class": "semantic", "content": "ann prefers window seats"}),
    ));
    assert_eq!(s, 200, "{w}");
    let (s, r) = call(app.delete(&ka, "/v1/subjects/ann"));
    assert_eq!(s, 200, "{r}");
    let id = r["id"].as_str().unwrap().to_string();
    let (s, got) = call(app.get(&ka, &format!("/v1/receipts/{id}")));
    assert_eq!((s, got["status"].as_str()), (200, Some("completed")));
    assert_error(
        call(app.get(&kb, &format!("/v1/receipts/{id}"))),
        404,
        "NOT_FOUND",
    );
    assert_error(call(app.delete(&kb, "/v1/subjects/ann")), 403, "FORBIDDEN");
}

#[test]
fn deleting_a_document_reaches_every_version_and_chunk() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let bob = app.key("globex", "bob", &["writer"], &[]);
    let ingest = |content: &str, version: &str| {
        let (s, out) = call(app.post(
            &ann,
            "/v1/knowledge/documents",
            &json!({"source_id": "vault.md", "version": version, "format": "md", "content": content}),
        ));
        assert!(s == 201, "{out}");
        out
    };
    let v1 = ingest("# Vault\n\nThe zqxvault1 combination is kept offline.", "1");
    let id = v1["document_id"].as_str().unwrap().to_string();
    ingest("# Vault\n\nThe zqxvault2 combination rotates monthly.", "2");
    let other = ingest_other(&app, &ann);
    assert_error(
        call(app.delete(&bob, &format!("/v1/knowledge/documents/{id}"))),
        404,
        "NOT_FOUND",
    );
    let (s, receipt) = call(app.delete(&ann, &format!("/v1/knowledge/documents/{id}")));
    assert_eq!(s, 200, "{receipt}");
    assert_eq!(receipt["level_reached"], "purged");
    let kinds: Vec<&str> = receipt["assets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.iter().filter(|k| **k == "chunk").count() >= 2,
        "{kinds:?}"
    );
    assert_error(
        call(app.get(&ann, &format!("/v1/knowledge/documents/{id}"))),
        404,
        "NOT_FOUND",
    );
    for canary in [&b"zqxvault1"[..], b"zqxvault2"] {
        let found = files_containing(&app.state.config.data_dir, canary);
        assert!(found.is_empty(), "canary still on disk in {found:?}");
    }
    let (s, still) = call(app.get(&ann, &format!("/v1/knowledge/documents/{other}")));
    assert_eq!(s, 200, "an unrelated document must survive: {still}");
}

fn ingest_other(app: &TestApp, key: &Key) -> String {
    let (s, out) = call(app.post(
        key,
        "/v1/knowledge/documents",
        &json!({"source_id": "cafeteria.md", "format": "md", "content": "# Lunch\n\nThe cafeteria opens at noon."}),
    ));
    assert_eq!(s, 201, "{out}");
    out["document_id"].as_str().unwrap().to_string()
}

#[test]
fn retention_purges_what_expired_and_keeps_the_rest() {
    let app = TestApp::start();
    let old = put(
        &app,
        "acme",
        AssetKind::Memory,
        "zqxexpired parking spot B7",
        &[],
        Relation::ChunkOf,
    );
    let keep = put(
        &app,
        "acme",
        AssetKind::Memory,
        "ann parks in spot C2",
        &[],
        Relation::ChunkOf,
    );
    let stale = put(
        &app,
        "acme",
        AssetKind::Document,
        "zqxstale the 2019 travel policy",
        &[],
        Relation::ChunkOf,
    );
    // Give `old` a retention date in the past, and `stale` a past expiry (no longer served)
    // but no retention: new versions, as versions are immutable.
    let mut rec = app
        .state
        .services
        .backends
        .store
        .get(&old)
        .unwrap()
        .unwrap();
    rec.meta.version = 2;
    rec.meta.retain_until = Some(chrono::Utc::now() - chrono::Duration::seconds(5));
    let mut st = app
        .state
        .services
        .backends
        .store
        .get(&stale)
        .unwrap()
        .unwrap();
    st.meta.version = 2;
    st.meta.expires_at = Some(chrono::Utc::now() - chrono::Duration::days(400));
    app.state
        .services
        .backends
        .store
        .commit(vec![
            WriteOp::PutVersion(Box::new(rec)),
            WriteOp::PutVersion(Box::new(st)),
        ])
        .unwrap();
    let report = app.state.services.run_job("retention").unwrap();
    assert_eq!(report.outcome, "ok", "{report:?}");
    assert_eq!(report.counts["assets_purged"], 1);
    assert!(
        app.state
            .services
            .backends
            .store
            .get(&old)
            .unwrap()
            .is_none()
    );
    assert!(
        app.state
            .services
            .backends
            .store
            .get(&keep)
            .unwrap()
            .is_some()
    );
    // Out of date is not out of retention: the stale document stays, only out of answers.
    assert!(
        app.state
            .services
            .backends
            .store
            .get(&stale)
            .unwrap()
            .is_some()
    );
    assert!(files_containing(&app.state.config.data_dir, b"zqxexpired").is_empty());
    // Rerunning finds nothing more to do.
    let again = app.state.services.run_job("retention").unwrap();
    assert_eq!(again.counts["assets_purged"], 0);
}

#[test]
fn a_deletion_interrupted_after_revoke_is_finished_by_the_purge_job() {
    let app = TestApp::start();
    let doc = put(
        &app,
        "acme",
        AssetKind::Document,
        "zqxhalfway launch codes",
        &[],
        Relation::ChunkOf,
    );
    let chunk = put(
        &app,
        "acme",
        AssetKind::Chunk,
        "zqxhalfway launch codes",
        &[&doc],
        Relation::ChunkOf,
    );
    // The state a crash leaves behind: revoked, receipt in progress, target purged.
    let mut r = delete(&app, std::slice::from_ref(&doc), DeletionLevel::Revoked);
    r.target = DeletionLevel::Purged;
    r.status = ReceiptStatus::InProgress;
    r.finished_at = None;
    app.state.services.backends.store.put_receipt(&r).unwrap();
    let report = app.state.services.run_job("purge").unwrap();
    assert_eq!(report.counts["receipts_completed"], 1, "{report:?}");
    let done = app
        .state
        .services
        .backends
        .store
        .get_receipt(&r.id)
        .unwrap()
        .unwrap();
    assert_eq!(done.level_reached, DeletionLevel::Purged);
    assert_eq!(done.counts.assets, 2);
    assert!(
        app.state
            .services
            .backends
            .store
            .get(&chunk)
            .unwrap()
            .is_none()
    );
    // A second run has nothing left to finish, and the outcome stands.
    let again = app.state.services.run_job("purge").unwrap();
    assert_eq!(again.counts["receipts_completed"], 0);
    assert_eq!(
        app.state
            .services
            .backends
            .store
            .get_receipt(&r.id)
            .unwrap()
            .unwrap()
            .level_reached,
        DeletionLevel::Purged
    );
}

/// Writes a semantic memory through the gate and returns its id.
#[track_caller]
fn remember(app: &TestApp, key: &Key, content: &str) -> String {
    let (s, w) = call(app.post(
        key,
        "/v1/memories",
        &json!({"class": "semantic", "content": content}),
    ));
    assert!(s == 200 || s == 201, "{w}");
    w["id"].as_str().unwrap().to_string()
}

#[test]
fn a_purged_memory_leaves_no_byte_and_its_receipt_says_so() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let id = remember(&app, &ann, "Ann's locker code is zqxlocker8842");
    let kid = remember(&app, &ann, "Ann prefers the north entrance");
    assert_error(
        call(app.delete(&ann, &format!("/v1/memories/{id}?level=everything"))),
        422,
        "VALIDATION_FAILED",
    );
    let (s, r) = call(app.delete(&ann, &format!("/v1/memories/{id}?level=purged")));
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["receipt"]["level_reached"], "purged", "{r}");
    assert_error(
        call(app.get(&ann, &format!("/v1/memories/{id}"))),
        404,
        "NOT_FOUND",
    );
    let found = files_containing(&app.state.config.data_dir, b"zqxlocker8842");
    assert!(found.is_empty(), "canary still on disk in {found:?}");
    let (s, _) = call(app.get(&ann, &format!("/v1/memories/{kid}")));
    assert_eq!(s, 200);
}

#[test]
fn reindex_re_embeds_what_another_model_made() {
    use registry_core::retrieval::VectorEntry;
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let mid = remember(&app, &ann, "Ann's favourite ferry leaves at dawn");
    let (s, d) = call(app.post(
        &ann,
        "/v1/knowledge/documents",
        &json!({"source_id": "ferry.md", "format": "md", "content": "# Ferries\n\nThe harbour ferry runs hourly."}),
    ));
    assert_eq!(s, 201, "{d}");
    let (_, doc) = call(app.get(
        &ann,
        &format!(
            "/v1/knowledge/documents/{}",
            d["document_id"].as_str().unwrap()
        ),
    ));
    let cid = doc["chunks"][0]["id"].as_str().unwrap().to_string();
    // Pretend an older model made these two vectors.
    let old = |id: &str, kind: AssetKind| VectorEntry {
        keys: IndexKeys {
            asset_id: id.to_string(),
            kind,
            scope_key: "t:acme".into(),
            acl_keys: vec!["public".into()],
            tags: vec![],
        },
        vector: {
            let mut v = vec![0.0f32; 384];
            v[0] = 1.0;
            v
        },
        model: "old-model@0000".into(),
    };
    app.state
        .services
        .backends
        .vectors
        .upsert(&[old(&mid, AssetKind::Memory), old(&cid, AssetKind::Chunk)])
        .unwrap();
    let tag =
        registry_core::retrieval::Embedder::info(app.state.services.backends.embedder.as_ref())
            .tag();
    assert_eq!(
        app.state
            .services
            .backends
            .vectors
            .ids_not_made_by(&tag, 10)
            .unwrap()
            .len(),
        2
    );
    let report = app.state.services.run_job("reindex").unwrap();
    assert_eq!(report.outcome, "ok", "{report:?}");
    assert_eq!(
        (
            report.counts["memories"].as_u64(),
            report.counts["chunks"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert!(
        app.state
            .services
            .backends
            .vectors
            .ids_not_made_by(&tag, 10)
            .unwrap()
            .is_empty()
    );
    // The re-embedded vectors are real again: the vector leg alone finds both.
    let (_, found) = call(app.post(
        &ann,
        "/v1/knowledge/search",
        &json!({"query": "how often does the harbour ferry run", "legs": "vector_only"}),
    ));
    assert!(found.to_string().contains(&cid), "{found}");
    let again = app.state.services.run_job("reindex").unwrap();
    assert_eq!(again.counts["chunks"], 0);
}

#[test]
fn a_changed_embedding_model_re_embeds_at_start_before_serving() {
    use registry_embed::ModelChoice;
    let data = tempfile::tempdir().unwrap();
    let at = data.path().join("data");
    let mid = {
        let app = TestApp::start_with(|c| c.data_dir = at.clone());
        let ann = app.key("acme", "ann", &["writer"], &[]);
        remember(&app, &ann, "Ann's favourite ferry leaves at dawn")
    };
    let app = TestApp::start_with(|c| {
        c.data_dir = at.clone();
        c.embed_model = ModelChoice::MultilingualE5Small;
    });
    let b = &app.state.services.backends;
    let tag = b.embedder.info().tag();
    assert!(tag.contains("multilingual-e5-small"), "{tag}");
    assert!(b.vectors.ids_not_made_by(&tag, 10).unwrap().is_empty());
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let (s, found) = call(app.post(
        &ann,
        "/v1/memories/search",
        &json!({"query": "早上的渡轮", "k": 3}),
    ));
    assert_eq!(s, 200, "{found}");
    assert_eq!(found["hits"][0]["memory"]["id"], mid.as_str(), "{found}");
}

/// Ids the text leg alone finds for `q`, as ann of acme.
fn lexical(app: &TestApp, q: &str) -> Vec<String> {
    let f = VisibilityFilter::for_principal(&Principal::new("acme", "ann"), &[]);
    app.state
        .services
        .backends
        .text
        .search(q, &f, 20)
        .unwrap()
        .into_iter()
        .map(|h| h.asset_id)
        .collect()
}

/// Memory search over the API: `(id, content)` of every hit.
fn memory_hits(app: &TestApp, key: &Key, q: &str) -> Vec<(String, String)> {
    let (s, b) = call(app.post(key, "/v1/memories/search", &json!({"query": q, "k": 20})));
    assert_eq!(s, 200, "{b}");
    b["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["memory"]["id"].as_str().unwrap().to_string(),
                h["memory"]["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_consolidated_memory_is_rebuilt_without_a_purged_parent_and_goes_with_the_last() {
    use registry_memory::record::{MemoryBody, normalise};
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let alpha = "zqxalpha5151";
    let bravo = "zqxbravo6262";
    let (s, w) = call(app.post(
        &ann,
        "/v1/memories",
        &json!({"class": "semantic", "content": format!("Ann's locker is in the east wing, code {alpha}"),
                "subject": "Ann", "attribute": "locker", "value": "east wing"}),
    ));
    assert!(s == 200 || s == 201, "{w}");
    let a = w["id"].as_str().unwrap().to_string();
    // The same fact again as a raw entry that escaped the gate's dedupe (a concurrent writer):
    // seeded in the store, written after `a`, so `a` represents the consolidated record.
    let ra = app.state.services.backends.store.get(&a).unwrap().unwrap();
    let mut rb = ra.clone();
    rb.meta.id = registry_core::asset::new_asset_id();
    rb.meta.created_at = ra.meta.created_at + chrono::Duration::seconds(1);
    let mut body = MemoryBody::from_record(&ra).unwrap();
    body.content = format!("Ann keeps her gym bag in the east wing locker {bravo}");
    rb.meta.content_hash = sha256_hex(normalise(&body.content));
    rb.body = serde_json::to_value(&body).unwrap();
    let b = rb.meta.id.clone();
    app.state
        .services
        .backends
        .store
        .commit(vec![WriteOp::PutVersion(Box::new(rb.clone()))])
        .unwrap();
    let svc = app.state.services.memory.clone();
    svc.reindex(&[rb]).unwrap();
    let report = app.state.services.run_job("consolidate").unwrap();
    assert_eq!(
        report.counts["consolidated_records"], 1,
        "{}",
        report.counts
    );
    assert_eq!(report.counts["raw_merged"], 2);
    let c = app
        .state
        .services
        .backends
        .store
        .edges_from(&a)
        .unwrap()
        .into_iter()
        .find(|e| e.relation == Relation::ConsolidatedFrom)
        .unwrap()
        .child;
    let (_, before) = call(app.get(&ann, &format!("/v1/memories/{c}")));
    assert!(
        before["memory"]["content"]
            .as_str()
            .unwrap()
            .contains(alpha),
        "{before}"
    );

    // Purge the representative: the consolidated record is rebuilt from `b` alone.
    let (s, out) = call(app.delete(&ann, &format!("/v1/memories/{a}?level=purged")));
    assert_eq!(s, 200, "{out}");
    let receipt: Receipt = serde_json::from_value(out["receipt"].clone()).unwrap();
    assert_eq!(receipt.level_reached, DeletionLevel::Purged);
    assert_eq!(receipt.counts.regenerated, 1);
    let reached = receipt.assets.iter().find(|x| x.id == c).unwrap();
    assert_eq!(reached.via, "consolidated_from");
    assert_eq!(reached.regenerated_as.as_deref(), Some(c.as_str()));
    assert_eq!(reached.regenerated_version, Some(2));
    assert!(
        reached
            .stores
            .iter()
            .all(|s| s.level == DeletionLevel::Purged)
    );
    assert!(!serde_json::to_string(&receipt).unwrap().contains(alpha));

    let (s, now) = call(app.get(&ann, &format!("/v1/memories/{c}")));
    assert_eq!(s, 200, "{now}");
    let content = now["memory"]["content"].as_str().unwrap();
    assert!(content.contains(bravo) && !content.contains(alpha), "{now}");
    assert_eq!(now["memory"]["version"], 2);
    assert_eq!(now["memory"]["status"], "active");
    assert_eq!(now["memory"]["consolidated_from"], json!([b]));
    assert_eq!(now["versions"].as_array().unwrap().len(), 1, "{now}");
    assert!(
        app.state
            .services
            .backends
            .store
            .get_version(&c, 1)
            .unwrap()
            .is_none()
    );
    let edges = app.state.services.backends.store.edges_to(&c).unwrap();
    assert_eq!(
        edges
            .iter()
            .map(|e| (e.parent.as_str(), e.relation))
            .collect::<Vec<_>>(),
        vec![(b.as_str(), Relation::ConsolidatedFrom)]
    );
    // Nothing finds the purged parent's word; the rebuilt record is indexed under the other's.
    assert!(lexical(&app, alpha).is_empty());
    let hits = memory_hits(&app, &ann, alpha);
    assert!(
        hits.iter()
            .all(|(id, text)| *id != a && !text.contains(alpha)),
        "{hits:?}"
    );
    assert_eq!(lexical(&app, bravo), vec![c.clone()]);
    assert!(
        memory_hits(&app, &ann, bravo)
            .iter()
            .any(|(id, _)| *id == c)
    );
    // The rebuild is audited with hashes, never content.
    let events = app
        .state
        .services
        .backends
        .store
        .audit_events(0, 10_000)
        .unwrap();
    let regen = events
        .iter()
        .find(|e| e.draft.action == "memory.regenerate")
        .unwrap();
    assert_eq!(regen.draft.asset_id.as_deref(), Some(c.as_str()));
    assert!(regen.draft.after_hash.is_some());
    assert!(!serde_json::to_string(&events).unwrap().contains(alpha));
    // The delete checkpointed the store: no file holds the purged parent's bytes.
    let found = files_containing(&app.state.config.data_dir, alpha.as_bytes());
    assert!(found.is_empty(), "canary still on disk in {found:?}");

    // The purge job resuming this deletion as a crash between the rebuild and its receipt
    // would leave it finds the rebuild made and writes no further version.
    let mut again = receipt.clone();
    again.level_reached = DeletionLevel::Deindexed;
    again.status = ReceiptStatus::InProgress;
    again.finished_at = None;
    again.counts.regenerated = 0;
    for x in &mut again.assets {
        x.regenerated_as = None;
        x.regenerated_version = None;
    }
    app.state
        .services
        .backends
        .store
        .put_receipt(&again)
        .unwrap();
    let report = app.state.services.run_job("purge").unwrap();
    assert_eq!(report.counts["receipts_completed"], 1, "{report:?}");
    let resumed = app
        .state
        .services
        .backends
        .store
        .get_receipt(&receipt.id)
        .unwrap()
        .unwrap();
    let reached = resumed.assets.iter().find(|x| x.id == c).unwrap();
    assert_eq!(reached.regenerated_version, Some(2));
    let versions: Vec<u32> = app
        .state
        .services
        .backends
        .store
        .history(&c)
        .unwrap()
        .iter()
        .map(|r| r.meta.version)
        .collect();
    assert_eq!(versions, vec![2]);

    // Purge the last parent: the consolidated record goes with it.
    let (s, out) = call(app.delete(&ann, &format!("/v1/memories/{b}?level=purged")));
    assert_eq!(s, 200, "{out}");
    let receipt: Receipt = serde_json::from_value(out["receipt"].clone()).unwrap();
    let reached = receipt.assets.iter().find(|x| x.id == c).unwrap();
    assert_eq!(
        (reached.regenerated_as.as_ref(), receipt.counts.regenerated),
        (None, 0)
    );
    assert!(app.state.services.backends.store.get(&c).unwrap().is_none());
    assert_error(
        call(app.get(&ann, &format!("/v1/memories/{c}"))),
        404,
        "NOT_FOUND",
    );
    assert!(lexical(&app, bravo).is_empty());
    let found = files_containing(&app.state.config.data_dir, bravo.as_bytes());
    assert!(found.is_empty(), "canary still on disk in {found:?}");
}

/// Filler points in another tenant, written straight into the registry's vector index: `n`
/// of them in requests of `batch`, each a pseudo-random unit vector of the index's model.
fn fill_vectors(app: &TestApp, from: usize, n: usize, batch: usize) {
    use registry_core::retrieval::VectorEntry;
    let b = &app.state.services.backends;
    let info = b.embedder.info();
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D ^ from as u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let entries: Vec<VectorEntry> = (from..from + n)
        .map(|i| {
            let mut v: Vec<f32> = (0..info.dim).map(|_| next()).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= norm);
            VectorEntry {
                keys: registry_engine::contract::keys(
                    &format!("filler-{i}"),
                    AssetKind::Memory,
                    "t:filler",
                    &["public"],
                    &[],
                ),
                vector: v,
                model: info.tag(),
            }
        })
        .collect();
    for chunk in entries.chunks(batch) {
        b.vectors.upsert(chunk).unwrap();
    }
}

/// As [`files_containing`], for a directory that a running server changes meanwhile (Qdrant
/// removes and renames segment files as it optimises): a file or directory gone is skipped.
fn live_files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
    let mut found = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if file_holds(&p, needle) {
                found.push(p.display().to_string());
            }
        }
    }
    found
}

/// Whether the file at `p` holds `needle` (never all zeros); false when it cannot be read (a
/// file removed mid-scan). Read 1 MiB at a time, each read overlapping the last by the
/// needle's length: by the Qdrant pass of the test command, Qdrant's storage is gigabytes of
/// sparse preallocated pages around a few megabytes of data, and reading it whole per poll held
/// 14 GB and ran for over ten minutes. Searched with `memchr::memmem` (optimised, vectorised):
/// a byte-by-byte `windows` compare in the unoptimised test binary took minutes per poll there.
fn file_holds(p: &std::path::Path, needle: &[u8]) -> bool {
    use std::io::Read;
    let Ok(mut f) = std::fs::File::open(p) else {
        return false;
    };
    let keep = needle.len().saturating_sub(1);
    let mut buf = vec![0u8; keep + (1 << 20)];
    let mut have = 0;
    loop {
        let n = match f.read(&mut buf[have..]) {
            Ok(0) => return false,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        };
        let end = have + n;
        let chunk = &buf[..end];
        if memchr::memmem::find(chunk, needle).is_some() {
            return true;
        }
        let carry = keep.min(end);
        buf.copy_within(end - carry..end, 0);
        have = carry;
    }
}

/// Polls `left` (the files still holding a canary) until it is empty, for at most `limit`.
fn gone_within(what: &str, limit: std::time::Duration, left: impl Fn() -> Vec<String>) {
    let t = std::time::Instant::now();
    loop {
        let found = left();
        if found.is_empty() {
            eprintln!("qdrant canary: {what} after {:?}", t.elapsed());
            return;
        }
        assert!(
            t.elapsed() < limit,
            "{what}: still in {found:?} after {limit:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// The canary in Qdrant's storage directory: a purge's receipt says what Qdrant does with the
/// point (deleted, vacuum optimizer triggered) and what it keeps until when (the segment until
/// the optimizer's rewrite, the write-ahead log until later writes retire its segment), and
/// each promise is checked on the files. The point holds the asset id (payload) and the vector,
/// never the text; the bytes looked for are the id and the stored vector, read from Qdrant.
#[test]
fn a_purged_memory_leaves_no_byte_in_qdrants_storage_when_its_receipt_says() {
    use registry_vector_qdrant::test_support::{
        skip, test_qdrant_http, test_qdrant_storage, test_qdrant_url, unique_prefix,
    };
    use registry_vector_qdrant::{PURGE_METHOD, QdrantOptions, VACUUM_MIN_POINTS};
    const NAME: &str = "a_purged_memory_leaves_no_byte_in_qdrants_storage_when_its_receipt_says";
    let Some(url) = test_qdrant_url(NAME) else {
        return;
    };
    let (Some(http), Some(storage)) = (test_qdrant_http(), test_qdrant_storage()) else {
        // A server named by REGISTRY_TEST_QDRANT_URL alone: its files are out of reach.
        skip(
            NAME,
            "REGISTRY_TEST_QDRANT_HTTP and _STORAGE are not set (scripts/qdrant-test.sh sets them)",
        );
        return;
    };
    let prefix = unique_prefix();
    let app = TestApp::start_with(|c| {
        c.vectors.qdrant_url = Some(url.clone());
        c.vectors.qdrant_collection_prefix = prefix.clone();
    });
    let info = app.state.services.backends.embedder.info().clone();
    let collection = QdrantOptions {
        collection_prefix: prefix,
        ..QdrantOptions::new(&url, info.dim, info.tag())
    }
    .collection();
    let dir = storage.join("collections").join(&collection);
    assert!(dir.is_dir(), "no {}", dir.display());
    // The vacuum rewrites only segments of at least 100 points (the receipt says so): enough
    // points, in several requests, that each of the collection's segments holds that many.
    fill_vectors(&app, 0, 5 * VACUUM_MIN_POINTS as usize, 25);

    let ann = app.key("acme", "ann", &["writer"], &[]);
    let id = remember(&app, &ann, "Ann's safe deposit box is zqxqbox6613");
    let c = reqwest::blocking::Client::new();
    let point: serde_json::Value = c
        .post(format!("{http}/collections/{collection}/points"))
        .json(
            &json!({"ids": [registry_vector_qdrant::filter::point_id(&id)],
                      "with_vector": true, "with_payload": true}),
        )
        .send()
        .unwrap()
        .json()
        .unwrap();
    let stored: Vec<u8> = point["result"][0]["vector"]
        .as_array()
        .unwrap_or_else(|| panic!("the point is in Qdrant: {point}"))
        .iter()
        .take(16)
        .flat_map(|x| (x.as_f64().unwrap() as f32).to_le_bytes())
        .collect();
    let canaries: [&[u8]; 3] = [id.as_bytes(), &stored, b"zqxqbox6613"];
    let holding = |sub: &std::path::Path| -> Vec<String> {
        canaries[..2]
            .iter()
            .flat_map(|c| live_files_containing(sub, c))
            .collect()
    };
    let segments = dir.join("0").join("segments");
    // The scan can see the point (Qdrant may write its segments a flush later).
    let t = std::time::Instant::now();
    while holding(&segments).is_empty() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(30),
            "the canary is not in the segment files before the purge"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }

    let (s, r) = call(app.delete(&ann, &format!("/v1/memories/{id}?level=purged")));
    assert_eq!(s, 200, "{r}");
    let receipt = &r["receipt"];
    assert_eq!(receipt["level_reached"], "purged", "{r}");
    let vectors = receipt["assets"][0]["stores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["store"] == "vector_index")
        .unwrap_or_else(|| panic!("the receipt names the vector index: {r}"))
        .clone();
    assert_eq!(vectors["level"], "purged", "{r}");
    assert_eq!(vectors["method"], PURGE_METHOD, "{r}");
    let found: serde_json::Value = c
        .post(format!("{http}/collections/{collection}/points"))
        .json(&json!({"ids": [registry_vector_qdrant::filter::point_id(&id)]}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(found["result"], json!([]), "the point is deleted at once");

    // The receipt's first promise: the segments are rewritten within seconds.
    gone_within(
        "the segment files no longer hold the point",
        std::time::Duration::from_secs(60),
        || holding(&segments),
    );
    // Its second: the write-ahead log lets go once later writes have filled the point's 1 MiB
    // segment and the next (a 384-float point is about 2 KiB there), and Qdrant has flushed.
    fill_vectors(&app, 10_000, 2_000, 100);
    gone_within(
        "no file of Qdrant's storage holds the point",
        std::time::Duration::from_secs(60),
        || holding(&storage),
    );
    for c in canaries {
        let left = live_files_containing(&storage, c);
        assert!(
            left.is_empty(),
            "canary still in Qdrant's storage: {left:?}"
        );
    }
    let left = files_containing(&app.state.config.data_dir, b"zqxqbox6613");
    assert!(
        left.is_empty(),
        "canary still in the data directory: {left:?}"
    );
}
