//! The embedded store against a real SQLite file in a temporary directory.

use registry_core::asset::{AssetKind, AssetMeta, AssetRecord, AssetStatus, SourceKind};
use registry_core::audit::{AuditDraft, AuditKey, verify_chain};
use registry_core::derivation::{ChildStore, DerivationEdge, Relation};
use registry_core::hash::sha256_hex;
use registry_core::store::{AssetQuery, AssetStore, WriteOp};
use registry_core::{CoreError, Scope};
use registry_store_sqlite::{SCHEMA_VERSION, SqliteStore, StoreOptions};

fn open(dir: &std::path::Path) -> SqliteStore {
    SqliteStore::open_dir(dir, StoreOptions::default()).unwrap()
}

/// Raw SQL on the store's file, as a tamperer with file access (or a migration test) runs it.
fn sql(dir: &std::path::Path, sql: &str) -> rusqlite::Result<()> {
    rusqlite::Connection::open(dir.join("registry.db"))?.execute_batch(sql)
}

fn record(text: &str, tenant: &str) -> AssetRecord {
    let mut meta = AssetMeta::new(
        AssetKind::Memory,
        Scope::tenant(tenant),
        "ann",
        SourceKind::UserStatement,
    );
    meta.content_hash = sha256_hex(text);
    AssetRecord {
        meta,
        lookup_key: Some("ann|coffee".into()),
        body: serde_json::json!({ "text": text }),
    }
}

fn put(store: &SqliteStore, rec: &AssetRecord) {
    store
        .commit(vec![
            WriteOp::PutVersion(Box::new(rec.clone())),
            WriteOp::Audit(AuditDraft::new("ann", "memory.write").asset(rec.meta.id.clone())),
        ])
        .unwrap();
}

#[test]
fn migrates_an_empty_directory_and_reopens_an_existing_one() {
    let dir = tempfile::tempdir().unwrap();
    let rec = record("likes tea", "acme");
    {
        let s = open(dir.path());
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        put(&s, &rec);
    }
    let s = open(dir.path());
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(s.get(&rec.meta.id).unwrap().unwrap().body, rec.body);
}

#[test]
fn versions_are_immutable_and_history_keeps_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let v1 = record("likes tea", "acme");
    put(&s, &v1);
    // Writing version 1 again is a conflict, not an overwrite.
    let err = s
        .commit(vec![WriteOp::PutVersion(Box::new(v1.clone()))])
        .unwrap_err();
    assert!(matches!(err, CoreError::Conflict(_)), "{err:?}");
    // Skipping a version is refused too.
    let mut v3 = v1.clone();
    v3.meta.version = 3;
    assert!(matches!(
        s.commit(vec![WriteOp::PutVersion(Box::new(v3))])
            .unwrap_err(),
        CoreError::Conflict(_)
    ));
    let mut v2 = record("likes coffee", "acme");
    v2.meta.id = v1.meta.id.clone();
    v2.meta.version = 2;
    s.commit(vec![
        WriteOp::PutVersion(Box::new(v2.clone())),
        WriteOp::SetStatus {
            id: v1.meta.id.clone(),
            version: Some(1),
            status: AssetStatus::Superseded,
            expect: Some(AssetStatus::Active),
        },
    ])
    .unwrap();
    let h = s.history(&v1.meta.id).unwrap();
    assert_eq!(h.len(), 2);
    assert_eq!(h[0].body["text"], "likes tea");
    assert_eq!(h[0].meta.status, AssetStatus::Superseded);
    assert_eq!(s.get(&v1.meta.id).unwrap().unwrap().meta.version, 2);
    // The database itself refuses an in-place edit of a stored body.
    let err = sql(
        dir.path(),
        "UPDATE assets SET body = '{}' WHERE version = 1",
    )
    .unwrap_err();
    assert!(err.to_string().contains("immutable"));
}

#[test]
fn a_failed_commit_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let a = record("a", "acme");
    put(&s, &a);
    let b = record("b", "acme");
    let err = s.commit(vec![
        WriteOp::PutVersion(Box::new(b.clone())),
        WriteOp::Audit(AuditDraft::new("ann", "x")),
        WriteOp::PutVersion(Box::new(a.clone())), // conflict
    ]);
    assert!(err.is_err());
    assert!(s.get(&b.meta.id).unwrap().is_none());
    assert_eq!(s.audit_events(0, 100).unwrap().len(), 1);
}

#[test]
fn status_moves_check_the_expected_state() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let a = record("a", "acme");
    put(&s, &a);
    let bad = s.commit(vec![WriteOp::SetStatus {
        id: a.meta.id.clone(),
        version: None,
        status: AssetStatus::Revoked,
        expect: Some(AssetStatus::Candidate),
    }]);
    assert!(matches!(bad.unwrap_err(), CoreError::Conflict(_)));
    let missing = s.commit(vec![WriteOp::SetStatus {
        id: "nope".into(),
        version: None,
        status: AssetStatus::Revoked,
        expect: None,
    }]);
    assert!(matches!(missing.unwrap_err(), CoreError::NotFound(_)));
}

#[test]
fn find_filters_by_scope_status_and_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let a = record("a", "acme");
    let b = record("b", "globex");
    put(&s, &a);
    put(&s, &b);
    let q = AssetQuery {
        kind: Some(AssetKind::Memory),
        scope_keys: Some(vec!["global".into(), "t:acme".into()]),
        statuses: Some(vec![AssetStatus::Active]),
        lookup_key: Some("ann|coffee".into()),
        heads_only: true,
        ..Default::default()
    };
    let found = s.find(&q).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].meta.id, a.meta.id);
    let none = s
        .find(&AssetQuery {
            scope_keys: Some(vec![]),
            ..Default::default()
        })
        .unwrap();
    assert!(none.is_empty());
}

#[test]
fn derivation_edges_are_queryable_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let edge = |c: &str| DerivationEdge {
        parent: "doc".into(),
        child: c.into(),
        relation: Relation::ChunkOf,
        child_store: ChildStore::Assets,
    };
    s.commit(vec![
        WriteOp::AddEdge(edge("c1")),
        WriteOp::AddEdge(edge("c2")),
        WriteOp::AddEdge(edge("c2")),
    ])
    .unwrap();
    assert_eq!(s.edges_from("doc").unwrap().len(), 2);
    assert_eq!(s.edges_to("c2").unwrap(), vec![edge("c2")]);
}

#[test]
fn audit_chain_verifies_and_a_tampered_row_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    for i in 0..5 {
        put(&s, &record(&format!("m{i}"), "acme"));
    }
    assert_eq!(verify_chain(s.audit_events(0, 1000).unwrap(), None), Ok(5));
    // The log refuses edits through SQL…
    assert!(sql(dir.path(), "UPDATE audit SET reason = 'x' WHERE seq = 3").is_err());
    assert!(sql(dir.path(), "DELETE FROM audit WHERE seq = 3").is_err());
    // …and a tamperer who drops the guard is caught by the chain.
    sql(
        dir.path(),
        "DROP TRIGGER audit_no_update; UPDATE audit SET actor = 'mallory' WHERE seq = 3",
    )
    .unwrap();
    let broken = verify_chain(s.audit_events(0, 1000).unwrap(), None).unwrap_err();
    assert_eq!(broken.seq, 3);
}

#[test]
fn a_keyed_store_seals_events_with_its_key_and_signs_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let key = AuditKey::from_bytes([42; 32]);
    let s = SqliteStore::open_dir(
        dir.path(),
        StoreOptions {
            audit_key: Some(key.clone()),
            ..StoreOptions::default()
        },
    )
    .unwrap();
    for i in 0..4 {
        put(&s, &record(&format!("m{i}"), "acme"));
    }
    let events = s.audit_events(0, 100).unwrap();
    assert!(events.iter().all(|e| e.keyed));
    assert_eq!(verify_chain(events.clone(), Some(&key)), Ok(4));
    // Without the key the chain cannot be checked, let alone recomputed.
    assert_eq!(verify_chain(events, None).unwrap_err().seq, 1);
    let cp = s
        .checkpoint_audit()
        .unwrap()
        .expect("a checkpoint of the head");
    assert_eq!(cp.seq, 4);
    assert!(cp.is_signed_by(&key));
    // Nothing new: no second checkpoint.
    s.checkpoint_audit().unwrap();
    assert_eq!(s.audit_checkpoints().unwrap(), vec![cp]);
    assert!(sql(dir.path(), "DELETE FROM audit_checkpoints").is_err());
}

#[test]
fn idempotency_answers_are_remembered_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let op = || WriteOp::Idempotency {
        tenant: "acme".into(),
        key: "k1".into(),
        request_hash: "h".into(),
        response: serde_json::json!({"id": 1}),
    };
    s.commit(vec![op()]).unwrap();
    assert!(matches!(
        s.commit(vec![op()]).unwrap_err(),
        CoreError::Conflict(_)
    ));
    let (h, r) = s.idempotent_response("acme", "k1").unwrap().unwrap();
    assert_eq!((h.as_str(), r["id"].as_i64()), ("h", Some(1)));
    assert!(s.idempotent_response("globex", "k1").unwrap().is_none());
}

#[test]
fn purge_removes_the_bytes_from_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let canary = "canary-7f3a9c1e-never-keep-me";
    let a = record(canary, "acme");
    let keep = record("unrelated memory", "acme");
    put(&s, &a);
    put(&s, &keep);
    s.purge(
        std::slice::from_ref(&a.meta.id),
        AuditDraft::new("admin", "purge").asset(a.meta.id.clone()),
    )
    .unwrap();
    registry_core::store::Store::checkpoint(&s).unwrap();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let p = entry.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        assert!(
            !bytes.windows(canary.len()).any(|w| w == canary.as_bytes()),
            "canary found in {}",
            p.display()
        );
    }
    assert!(s.get(&keep.meta.id).unwrap().is_some());
}

#[test]
fn purging_earlier_versions_keeps_the_head_and_the_edges() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let canary = "canary-51d0e2aa-old-version";
    let parent = record("a parent", "acme");
    put(&s, &parent);
    let v1 = record(canary, "acme");
    let id = v1.meta.id.clone();
    s.commit(vec![
        WriteOp::PutVersion(Box::new(v1.clone())),
        WriteOp::AddEdge(DerivationEdge {
            parent: parent.meta.id.clone(),
            child: id.clone(),
            relation: Relation::ConsolidatedFrom,
            child_store: ChildStore::Assets,
        }),
    ])
    .unwrap();
    for (v, text) in [(2, canary), (3, "rebuilt without it")] {
        let mut next = record(text, "acme");
        next.meta.id = id.clone();
        next.meta.version = v;
        put(&s, &next);
    }
    let n = s
        .purge_versions_before(&id, 3, AuditDraft::new("admin", "purge").asset(id.clone()))
        .unwrap();
    assert_eq!(n, 2);
    let history: Vec<u32> = s
        .history(&id)
        .unwrap()
        .iter()
        .map(|r| r.meta.version)
        .collect();
    assert_eq!(history, vec![3]);
    assert_eq!(s.get(&id).unwrap().unwrap().meta.version, 3);
    assert_eq!(s.edges_to(&id).unwrap().len(), 1);
    assert!(verify_chain(s.audit_events(0, 100).unwrap(), None).is_ok());
    registry_core::store::Store::checkpoint(&s).unwrap();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let p = entry.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        assert!(
            !bytes.windows(canary.len()).any(|w| w == canary.as_bytes()),
            "canary found in {}",
            p.display()
        );
    }
}
