//! The embedded store against a real SQLite file in a temporary directory: the store contract
//! suite, then what only SQLite promises (its files, its migrations).

use std::sync::Arc;

use registry_core::Scope;
use registry_core::asset::{AssetKind, AssetMeta, AssetRecord, SourceKind};
use registry_core::audit::{AuditAction, AuditDraft, AuditKey, verify_chain};
use registry_core::derivation::{ChildStore, DerivationEdge, Relation};
use registry_core::hash::sha256_hex;
use registry_core::store::{AssetStore, WriteOp};
use registry_store_contract::{Subject, store_contract};
use registry_store_sqlite::{SCHEMA_VERSION, SqliteStore, StoreOptions};

fn open(dir: &std::path::Path) -> SqliteStore {
    SqliteStore::open_dir(dir, StoreOptions::default()).unwrap()
}

/// A fresh store in its own temporary directory. SQLite is owned by one process: no second
/// handle.
fn subject(audit_key: Option<AuditKey>) -> Subject {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        SqliteStore::open_dir(
            dir.path(),
            StoreOptions {
                audit_key,
                ..StoreOptions::default()
            },
        )
        .unwrap(),
    );
    // The owner's way past the API: a connection of its own on the same file.
    let path = store.path().to_path_buf();
    Subject {
        store,
        second: None,
        sql: Box::new(move |sql| {
            let conn = rusqlite::Connection::open(&path).map_err(be)?;
            conn.busy_timeout(std::time::Duration::from_secs(5))
                .map_err(be)?;
            conn.execute_batch(sql).map_err(be)
        }),
        drop_audit_update_guard: "DROP TRIGGER audit_no_update".into(),
        keep: Box::new(dir),
    }
}

fn be(e: rusqlite::Error) -> registry_core::CoreError {
    registry_core::CoreError::Backend {
        store: "sqlite",
        message: e.to_string(),
    }
}

#[test]
fn store_contract_on_sqlite() {
    store_contract(&subject);
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
            WriteOp::Audit(
                AuditDraft::new("ann", AuditAction::MemoryWrite).asset(rec.meta.id.clone()),
            ),
        ])
        .unwrap();
}

fn assert_no_file_holds(dir: &std::path::Path, canary: &str) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        assert!(
            !bytes.windows(canary.len()).any(|w| w == canary.as_bytes()),
            "canary found in {}",
            p.display()
        );
    }
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

/// Keys made before migration 0009 (purposes bound to keys): admin keys hold every purpose,
/// the others none, so a header alone no longer opens a purpose-restricted asset.
#[test]
fn keys_from_before_0009_hold_every_purpose_if_admin_and_none_otherwise() {
    use registry_core::store::KeyStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        for (i, (_, sql)) in registry_store_sqlite::MIGRATIONS.iter().take(8).enumerate() {
            conn.execute_batch(sql).unwrap();
            conn.pragma_update(None, "user_version", (i + 1) as i64)
                .unwrap();
        }
        for (id, roles) in [("k_admin", r#"["admin"]"#), ("k_reader", r#"["reader"]"#)] {
            conn.execute(
                "INSERT INTO api_keys (id, key_hash, tenant, user_name, groups, roles, created_at)
                 VALUES (?1, ?2, 'acme', 'ann', '[]', ?3, '2026-01-01T00:00:00Z')",
                rusqlite::params![id, sha256_hex(id), roles],
            )
            .unwrap();
        }
    }
    let s = open(dir.path());
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    let purposes = |id: &str| s.find_key(&sha256_hex(id)).unwrap().unwrap().purposes;
    assert_eq!(purposes("k_admin"), vec!["*".to_string()]);
    assert!(purposes("k_reader").is_empty());
}

/// A store written before migration 0008 (its large tables WITHOUT ROWID) keeps every row, key,
/// constraint and guard when opened, loses the layout, and is compacted.
#[test]
fn a_store_from_before_0008_is_rewritten_as_rowid_tables_and_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.db");
    // Bodies over a page: the rows that made the old layout slow.
    let recs: Vec<AssetRecord> = (0..200)
        .map(|i| record(&format!("fact {i} {}", "x".repeat(5000)), "acme"))
        .collect();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        for (i, (_, sql)) in registry_store_sqlite::MIGRATIONS.iter().take(7).enumerate() {
            conn.execute_batch(sql).unwrap();
            conn.pragma_update(None, "user_version", (i + 1) as i64)
                .unwrap();
        }
        for r in &recs {
            let m = &r.meta;
            conn.execute(
                "INSERT INTO assets (id, version, kind, tenant, scope_key, owner, status,
                    lookup_key, content_hash, created_at, expires_at, is_head, meta, body)
                 VALUES (?1, ?2, 'memory', ?3, ?4, ?5, ?6, ?7, ?8, '2026-01-01T00:00:00Z', NULL,
                    1, ?9, ?10)",
                rusqlite::params![
                    m.id,
                    m.version,
                    m.scope.tenant,
                    m.scope.key(),
                    m.owner,
                    m.status.as_str(),
                    r.lookup_key,
                    m.content_hash,
                    serde_json::to_string(m).unwrap(),
                    serde_json::to_string(&r.body).unwrap(),
                ],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO idempotency VALUES ('acme', 'k1', 'h1', '{\"ok\":true}', '2026-01-01')",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO context_manifests VALUES ('m1', 'acme', 'ann', '2026-01-01', '{}')",
            [],
        )
        .unwrap();
        // Free pages in the old file: a purge that VACUUM has not yet reclaimed.
        conn.execute("DELETE FROM assets WHERE id = ?1", [&recs[0].meta.id])
            .unwrap();
    }
    let s = open(dir.path());
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    assert!(s.get(&recs[0].meta.id).unwrap().is_none());
    for r in &recs[1..] {
        let got = s.get(&r.meta.id).unwrap().expect("kept");
        assert_eq!(got.body, r.body);
        assert_eq!(got.meta.id, r.meta.id);
    }
    assert_eq!(
        s.idempotent_response("acme", "k1").unwrap(),
        Some(("h1".to_string(), serde_json::json!({"ok": true})))
    );
    let conn = rusqlite::Connection::open(&path).unwrap();
    for table in ["assets", "context_manifests", "idempotency"] {
        let sql: String = conn
            .query_row(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .unwrap();
        assert!(!sql.contains("WITHOUT ROWID"), "{table}: {sql}");
    }
    let free: i64 = conn
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap();
    assert_eq!(free, 0, "compacted after the rewrite");
    let indexes: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'assets'
               AND name LIKE 'assets_%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(indexes, 7, "every index of the old table");
    // The guards and the key came along.
    let err = conn
        .execute(
            "UPDATE assets SET body = '{}' WHERE id = ?1",
            [&recs[1].meta.id],
        )
        .unwrap_err();
    assert!(err.to_string().contains("immutable"), "{err}");
    assert!(
        conn.execute("UPDATE context_manifests SET manifest = 'x'", [])
            .is_err()
    );
    assert!(
        conn.execute(
            "INSERT INTO assets SELECT * FROM assets WHERE id = ?1",
            [&recs[1].meta.id]
        )
        .is_err(),
        "(id, version) stays unique"
    );
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
        AuditDraft::new("admin", AuditAction::DeletionPurgeVersions).asset(a.meta.id.clone()),
    )
    .unwrap();
    assert!(registry_core::store::Store::checkpoint(&s).unwrap());
    assert_no_file_holds(dir.path(), canary);
    assert!(s.get(&keep.meta.id).unwrap().is_some());
}

#[test]
fn purging_earlier_versions_removes_their_bytes_from_every_file() {
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
    assert_eq!(
        s.purge_versions_before(
            &id,
            3,
            AuditDraft::new("admin", AuditAction::DeletionPurgeVersions).asset(id.clone())
        )
        .unwrap(),
        2
    );
    assert!(verify_chain(s.audit_events(0, 100).unwrap(), None).is_ok());
    assert!(registry_core::store::Store::checkpoint(&s).unwrap());
    assert_no_file_holds(dir.path(), canary);
}

/// Commits are copied into the main file by the background checkpointer, not by the commit
/// that crosses a WAL size: the main file grows shortly after a burst of writes far smaller
/// than the inline checkpoint limit, and everything written is there after a reopen.
#[test]
fn the_background_checkpointer_copies_commits_into_the_main_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.db");
    let filler = "x".repeat(4000);
    let mut ids = Vec::new();
    {
        let store = open(dir.path());
        let before = std::fs::metadata(&db).unwrap().len();
        for i in 0..200 {
            let rec = record(&format!("note {i} {filler}"), "acme");
            put(&store, &rec);
            ids.push(rec.meta.id.clone());
        }
        // 200 × 4 KB: well past what the main file held, far below 16,384 WAL pages.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut grown = std::fs::metadata(&db).unwrap().len();
        while grown < before + 200 * 4000 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            grown = std::fs::metadata(&db).unwrap().len();
        }
        assert!(
            grown >= before + 200 * 4000,
            "main file {before} -> {grown} bytes: the WAL was not checkpointed"
        );
    }
    let store = open(dir.path());
    for id in &ids {
        assert!(store.get(id).unwrap().is_some(), "{id} lost");
    }
}
