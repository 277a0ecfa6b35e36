//! The scale-out store against a real PostgreSQL (`REGISTRY_TEST_PG_URL`, see
//! `scripts/pg-test.sh`): the store contract suite, then what only PostgreSQL promises
//! (migrations shared by several nodes, what VACUUM leaves after a purge).

use std::sync::Arc;

use registry_core::Scope;
use registry_core::asset::{AssetKind, AssetMeta, AssetRecord, SourceKind};
use registry_core::audit::{AuditAction, AuditDraft, AuditKey};
use registry_core::derivation::{ChildStore, DerivationEdge, Relation};
use registry_core::hash::sha256_hex;
use registry_core::store::{AssetStore, WriteOp};
use registry_store_contract::{Subject, store_contract};
use registry_store_postgres::test_support::{TestSchema, test_database_url};
use registry_store_postgres::{PgOptions, PgStore, SCHEMA_VERSION, StoreError};

/// A fresh store in a schema of its own, and a second handle on it (another node's pool).
fn subject(url: &str, audit_key: Option<AuditKey>) -> Subject {
    let schema = TestSchema::new(url);
    let store = Arc::new(schema.open(audit_key.clone()));
    let second = Arc::new(schema.open(audit_key));
    let raw = store.clone();
    Subject {
        store,
        second: Some(second),
        sql: Box::new(move |sql| raw.execute_batch(sql)),
        drop_audit_update_guard: "DROP TRIGGER audit_no_update ON audit".into(),
        keep: Box::new(schema),
    }
}

#[test]
fn store_contract_on_postgres() {
    let Some(url) = test_database_url("store_contract_on_postgres") else {
        return;
    };
    store_contract(&|key| subject(&url, key));
}

fn record(text: &str) -> AssetRecord {
    let mut meta = AssetMeta::new(
        AssetKind::Memory,
        Scope::tenant("acme"),
        "ann",
        SourceKind::UserStatement,
    );
    meta.content_hash = sha256_hex(text);
    AssetRecord {
        meta,
        lookup_key: Some(format!("ann|{text}")),
        body: serde_json::json!({ "text": text }),
    }
}

fn put(store: &PgStore, rec: &AssetRecord) {
    store
        .commit(vec![
            WriteOp::PutVersion(Box::new(rec.clone())),
            WriteOp::Audit(
                AuditDraft::new("ann", AuditAction::MemoryWrite).asset(rec.meta.id.clone()),
            ),
        ])
        .unwrap();
}

/// The synchronous driver runs a runtime of its own; the store must still work when it is
/// called, and dropped, on a worker thread of the server's (multi-threaded) tokio runtime, as
/// an async handler or the end of an async `main` does.
#[test]
fn the_store_works_and_drops_on_an_async_worker_thread() {
    let Some(url) = test_database_url("the_store_works_and_drops_on_an_async_worker_thread") else {
        return;
    };
    let schema = TestSchema::new(&url);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = schema.open(None);
        let rec = record("written from an async task");
        put(&store, &rec);
        let got = store.get(&rec.meta.id).unwrap().unwrap();
        assert_eq!(got.body, rec.body);
        // Every connection of the pool is closed here, on the worker thread.
        drop(store);
        tokio::task::yield_now().await;
    });
}

/// Blobs live in the shared database: what one node stored, another reads; the same contract
/// as the embedded file store (digest keys, idempotent puts, namespaces, validated keys).
#[test]
fn blobs_are_shared_by_every_node_of_the_database() {
    use registry_core::store::{BlobStore, namespaced_blob_key};
    let Some(url) = test_database_url("blobs_are_shared_by_every_node_of_the_database") else {
        return;
    };
    let schema = TestSchema::new(&url);
    let a = registry_store_postgres::PgBlobStore::new(Arc::new(schema.open(None)));
    let b = registry_store_postgres::PgBlobStore::new(Arc::new(schema.open(None)));
    let bytes = b"a skill archive's bytes\x00\xff".to_vec();
    let d = a.put(&bytes).unwrap();
    assert_eq!(d, sha256_hex(&bytes));
    assert_eq!(a.put(&bytes).unwrap(), d, "storing twice is a no-op");
    assert_eq!(b.get(&d).unwrap().as_deref(), Some(bytes.as_slice()));
    assert_eq!(
        b.get(&d.to_ascii_uppercase()).unwrap().as_deref(),
        Some(bytes.as_slice())
    );
    let k = a.put_in("acme", &bytes).unwrap();
    assert_eq!(k, namespaced_blob_key("acme", &d));
    assert_ne!(k, d);
    assert!(b.get(&k).unwrap().is_some());
    assert!(b.delete(&d).unwrap());
    assert!(!a.delete(&d).unwrap());
    assert_eq!(a.get(&d).unwrap(), None);
    assert!(a.get(&k).unwrap().is_some(), "another key is another blob");
    for bad in ["", "../etc/passwd", &"g".repeat(64), &d[..63]] {
        assert!(a.get(bad).is_err(), "{bad:?}");
        assert!(a.delete(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn nodes_starting_together_migrate_once() {
    let Some(url) = test_database_url("nodes_starting_together_migrate_once") else {
        return;
    };
    let schema = TestSchema::new(&url);
    let stores: Vec<PgStore> = std::thread::scope(|s| {
        let joins: Vec<_> = (0..4).map(|_| s.spawn(|| schema.open(None))).collect();
        joins.into_iter().map(|j| j.join().unwrap()).collect()
    });
    for st in &stores {
        assert_eq!(st.schema_version().unwrap(), SCHEMA_VERSION);
    }
    let rec = record("written before a restart");
    put(&stores[0], &rec);
    drop(stores);
    let again = schema.open(None);
    assert_eq!(again.get(&rec.meta.id).unwrap(), Some(rec));
    // Each migration ran once.
    let probe = PgStore::connect(schema.options(None)).unwrap();
    probe
        .execute_batch(
            "DO $$ BEGIN
               IF (SELECT count(*) FROM schema_migrations) <> (SELECT max(version) FROM schema_migrations)
               THEN RAISE EXCEPTION 'a migration ran twice'; END IF;
             END $$",
        )
        .unwrap();
}

#[test]
fn a_schema_newer_than_this_build_is_refused() {
    let Some(url) = test_database_url("a_schema_newer_than_this_build_is_refused") else {
        return;
    };
    let schema = TestSchema::new(&url);
    let s = schema.open(None);
    s.execute_batch("INSERT INTO schema_migrations (version, name) VALUES (999, '0999_future')")
        .unwrap();
    drop(s);
    match PgStore::connect(schema.options(None)) {
        Err(StoreError::SchemaTooNew { found: 999, .. }) => {}
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
}

#[test]
fn a_bad_schema_name_or_url_is_a_configuration_error() {
    let Some(url) = test_database_url("a_bad_schema_name_or_url_is_a_configuration_error") else {
        return;
    };
    for bad in [
        "",
        "Public",
        "1abc",
        "a-b",
        "a;drop table x",
        &"x".repeat(64),
    ] {
        let opts = PgOptions {
            schema: bad.to_string(),
            ..PgOptions::new(url.clone())
        };
        assert!(
            matches!(PgStore::connect(opts), Err(StoreError::Config(_))),
            "schema {bad:?}"
        );
    }
    assert!(PgStore::connect(PgOptions::new("postgres://[not a url")).is_err());
}

/// Counts the live tuples (heap and TOAST) and index items of `assets` and `derivation` whose
/// bytes contain `needle`, page by page with `pageinspect`.
fn tuples_holding(schema: &TestSchema, needle: &str) -> Vec<(String, i64)> {
    let hex: Vec<String> = needle.bytes().map(|b| format!("{b:02x}")).collect();
    let hex = hex.join(" ");
    let sql = format!(
        "CREATE TEMP TABLE found (rel text, n bigint);
         DO $$
         DECLARE r record; n bigint; blocks int;
         BEGIN
           FOR r IN
             SELECT c.oid::regclass::text AS rel, c.relkind
               FROM pg_class c
              WHERE c.oid IN ('assets'::regclass, 'derivation'::regclass)
                 OR c.oid IN (SELECT reltoastrelid FROM pg_class
                               WHERE oid IN ('assets'::regclass, 'derivation'::regclass))
                 OR c.oid IN (SELECT indexrelid FROM pg_index
                               WHERE indrelid IN ('assets'::regclass, 'derivation'::regclass))
           LOOP
             blocks := pg_relation_size(r.rel::regclass) / current_setting('block_size')::int;
             IF r.relkind = 'i' THEN
               -- Block 0 of a btree is its metapage.
               SELECT count(*) INTO n FROM generate_series(1, blocks - 1) AS blk,
                 LATERAL public.bt_page_items(public.get_raw_page(r.rel, blk)) AS it
                WHERE position('{hex}' IN it.data) > 0;
             ELSE
               SELECT count(*) INTO n FROM generate_series(0, blocks - 1) AS blk,
                 LATERAL public.heap_page_items(public.get_raw_page(r.rel, blk)) AS it
                WHERE position(convert_to('{needle}', 'UTF8') IN it.t_data) > 0;
             END IF;
             INSERT INTO found VALUES (r.rel, n);
           END LOOP;
         END $$;"
    );
    let mut client = schema.client();
    client.batch_execute(&sql).unwrap_or_else(|e| {
        panic!(
            "inspecting pages failed ({e:?}); the test database needs the pageinspect \
             extension in schema public (scripts/pg-test.sh creates it) and a superuser"
        )
    });
    client
        .query("SELECT rel, n FROM found ORDER BY rel", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[test]
fn purge_leaves_no_tuple_or_index_item_holding_the_bytes() {
    let Some(url) = test_database_url("purge_leaves_no_tuple_or_index_item_holding_the_bytes")
    else {
        return;
    };
    let schema = TestSchema::new(&url);
    let s = schema.open(None);
    let canary = "canary-0c7e41d2-purge-me";
    // A body long enough to be moved to the TOAST table, stored there uncompressed (a setting
    // of this test's own schema) so that the canary is there in clear.
    s.execute_batch("ALTER TABLE assets ALTER COLUMN body SET STORAGE EXTERNAL")
        .unwrap();
    let long = format!("{canary} ").repeat(1000);
    // Enough other rows that the canary's page is under 2% of the table: there a plain VACUUM
    // skips the indexes (and leaves the lookup key in one); the store's must not.
    s.execute_batch(
        "INSERT INTO assets (id, version, kind, tenant, scope_key, owner, status, lookup_key,
            content_hash, created_at, is_head, meta, body)
         SELECT 'filler-' || g, 1, 'memory', 'acme', 't:acme', 'ann', 'active', 'filler|' || g,
                md5(g::text), now(), true, '{}', json_build_object('text', repeat('x', 200))
           FROM generate_series(1, 5000) AS g",
    )
    .unwrap();
    s.execute_batch("VACUUM assets").unwrap();
    let mut a = record(canary);
    a.body = serde_json::json!({ "text": canary, "long": long });
    let keep = record("unrelated");
    put(&s, &a);
    put(&s, &keep);
    s.commit(vec![WriteOp::AddEdge(DerivationEdge {
        parent: keep.meta.id.clone(),
        child: canary.into(),
        relation: Relation::SummaryOf,
        child_store: ChildStore::Assets,
    })])
    .unwrap();
    let before = tuples_holding(&schema, canary);
    for rel in ["assets", "derivation"] {
        assert!(
            before.iter().any(|(r, n)| r.ends_with(rel) && *n > 0),
            "control: the canary must be found in {rel} before the purge: {before:?}"
        );
    }
    assert!(
        before
            .iter()
            .any(|(r, n)| r.starts_with("pg_toast") && *n > 0),
        "control: the long body must be in the TOAST table: {before:?}"
    );
    assert!(
        before
            .iter()
            .any(|(r, n)| r.contains("assets_head_lookup") && *n > 0),
        "control: the lookup key must be in its index: {before:?}"
    );
    s.purge(
        &[a.meta.id.clone(), canary.to_string()],
        AuditDraft::new("admin", AuditAction::DeletionPurge),
    )
    .unwrap();
    let after = tuples_holding(&schema, canary);
    assert!(
        after.iter().all(|(_, n)| *n == 0),
        "after purge + VACUUM no tuple or index item may hold the canary: {after:?}"
    );
    assert!(s.get(&keep.meta.id).unwrap().is_some());
}

/// A store opened as node `name` of `schema`.
fn node(schema: &TestSchema, name: &str) -> PgStore {
    PgStore::connect(PgOptions {
        node_id: Some(name.into()),
        ..schema.options(None)
    })
    .unwrap()
}

#[test]
fn the_change_log_lists_every_asset_change_in_commit_order() {
    use registry_core::asset::AssetStatus;
    use registry_core::store::Store;
    let Some(url) = test_database_url("the_change_log_lists_every_asset_change_in_commit_order")
    else {
        return;
    };
    let schema = TestSchema::new(&url);
    let a = node(&schema, "node-a");
    let b = node(&schema, "node-b");
    let plain = schema.open(None);
    assert!(
        plain.cluster().is_none(),
        "a store without a node id is no node"
    );
    let ca = a.cluster().expect("a node");
    assert_eq!(ca.node_id(), "node-a");
    assert_eq!(ca.head_seq().unwrap(), 0);
    assert_eq!(ca.applied().unwrap(), None, "never followed");

    let r1 = record("first");
    let r2 = record("second");
    put(&a, &r1);
    put(&b, &r2);
    b.commit(vec![WriteOp::SetStatus {
        id: r1.meta.id.clone(),
        version: None,
        status: AssetStatus::Revoked,
        expect: None,
    }])
    .unwrap();
    b.purge(
        std::slice::from_ref(&r2.meta.id),
        AuditDraft::new("ann", AuditAction::DeletionPurge),
    )
    .unwrap();
    // An edge or an audit event alone changes no asset.
    a.commit(vec![WriteOp::Audit(AuditDraft::new(
        "ann",
        AuditAction::MemoryWrite,
    ))])
    .unwrap();
    let log = ca.changes_after(0, 100).unwrap();
    let seen: Vec<(String, Option<String>)> = log
        .iter()
        .map(|c| (c.asset_id.clone(), c.node.clone()))
        .collect();
    let (a_, b_) = (Some("node-a".to_string()), Some("node-b".to_string()));
    assert_eq!(
        seen,
        vec![
            (r1.meta.id.clone(), a_.clone()),
            (r2.meta.id.clone(), b_.clone()),
            (r1.meta.id.clone(), b_.clone()),
            (r2.meta.id.clone(), b_.clone()),
        ]
    );
    assert!(
        log.windows(2).all(|w| w[0].seq < w[1].seq),
        "in commit order"
    );
    let head = ca.head_seq().unwrap();
    assert_eq!(head, log.last().unwrap().seq);
    assert_eq!(
        ca.changes_after(log[1].seq, 100).unwrap(),
        log[2..].to_vec()
    );
    assert_eq!(ca.changes_after(0, 1).unwrap(), log[..1].to_vec());

    // Nodes report; the log is pruned to what every live node applied.
    let cb = b.cluster().unwrap();
    ca.report_applied(head).unwrap();
    cb.report_applied(log[1].seq).unwrap();
    cb.report_applied(log[0].seq).unwrap();
    assert_eq!(
        cb.applied().unwrap(),
        Some(log[1].seq),
        "a position never goes back"
    );
    let live = ca.live_nodes(std::time::Duration::from_secs(60)).unwrap();
    let names: Vec<&str> = live.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(names, vec!["node-a", "node-b"]);
    assert_eq!(ca.prune(std::time::Duration::from_secs(60)).unwrap(), 2);
    assert_eq!(ca.pruned_through().unwrap(), log[1].seq);
    assert_eq!(ca.changes_after(0, 100).unwrap(), log[2..].to_vec());
    assert_eq!(ca.head_seq().unwrap(), head, "pruning keeps the head");

    // A job lock is held by one node at a time, and released when dropped.
    let held = ca.try_lock_job("decay").unwrap().expect("free");
    assert!(cb.try_lock_job("decay").unwrap().is_none(), "held by A");
    assert!(cb.try_lock_job("purge").unwrap().is_some(), "another job");
    drop(held);
    assert!(cb.try_lock_job("decay").unwrap().is_some(), "released");
}
