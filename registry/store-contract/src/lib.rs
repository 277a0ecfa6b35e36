#![doc = include_str!("../README.md")]

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use chrono::{DateTime, Duration, TimeZone, Utc};

use registry_core::acl::{Acl, AclEntry};
use registry_core::asset::{
    AssetId, AssetKind, AssetMeta, AssetRecord, AssetStatus, Sensitivity, SourceKind, Trust,
};
use registry_core::audit::{AuditAction, AuditDraft, AuditEvent, AuditKey, verify_chain};
use registry_core::deletion::{
    DeletionLevel, ReachedAsset, Receipt, ReceiptCounts, ReceiptStatus, StoreReach,
};
use registry_core::derivation::{ChildStore, DerivationEdge, Relation};
use registry_core::hash::sha256_hex;
use registry_core::principal::Role;
use registry_core::store::{ApiKeyRecord, AssetQuery, Store, WriteOp};
use registry_core::verify::verify_store;
use registry_core::{CoreError, CoreResult, Scope};

mod operations;
pub use operations::*;

/// Everything a backend implements: the core's whole [`Store`] (assets, keys, receipts, job
/// runs, manifests, usage counters).
pub trait ContractStore: Store {}
impl<T: Store + ?Sized> ContractStore for T {}

/// Raw SQL run past the store's API.
pub type RawSql = Box<dyn Fn(&str) -> CoreResult<()>>;

/// A fresh, empty store for one check, and the backend's ways around its own API.
pub struct Subject {
    pub store: Arc<dyn ContractStore>,
    /// A second handle on the same database, opened as another registry node would open it
    /// (its own connections, its own process state). `None` for a backend that one process
    /// owns (SQLite); the checks that need it then say so and pass.
    pub second: Option<Arc<dyn ContractStore>>,
    /// Runs raw SQL as the database's owner, past the store's API: how the checks try to edit
    /// what must not change. The statements are plain SQL that both dialects accept.
    pub sql: RawSql,
    /// The statement, in this backend's dialect, that removes the trigger refusing UPDATE on
    /// `audit`, as someone with the owner's rights could.
    pub drop_audit_update_guard: String,
    /// Dropped last: whatever keeps the store's storage alive (a temporary directory, a schema).
    pub keep: Box<dyn std::any::Any>,
}

/// Returns a fresh, empty store, keyed with the audit key given.
pub type Factory<'a> = &'a dyn Fn(Option<AuditKey>) -> Subject;

/// One check: a name and the function that panics on a violation.
pub type Check = (&'static str, fn(Factory<'_>));

/// Every check, in the order [`store_contract`] runs them.
pub const CHECKS: &[Check] = &[
    ("versions", versions_are_immutable_and_next_is_head_plus_one),
    ("round_trip", records_round_trip_every_field),
    ("atomic_commit", a_failing_commit_writes_nothing),
    ("status_moves", status_moves_check_the_expected_state),
    ("edges", derivation_edges_both_ways),
    (
        "audit_chain",
        audit_chain_verifies_and_tampering_is_detected,
    ),
    ("keyed_audit", keyed_chain_and_signed_checkpoints),
    (
        "idempotency",
        idempotency_is_remembered_once_per_tenant_and_key,
    ),
    ("find_filters", find_applies_every_filter),
    ("find_paging", find_pages_in_created_id_version_order),
    ("purge", purge_removes_every_version_and_edge_and_audits),
    (
        "purge_versions_before",
        purge_versions_before_keeps_that_version_and_the_edges,
    ),
    ("api_keys", api_keys_are_stored_listed_and_revoked),
    ("receipts", receipts_are_replaced_whole),
    ("nul_text", text_with_nul_is_refused_and_never_found),
    (
        "concurrent_writers",
        concurrent_writers_keep_one_linear_chain,
    ),
    ("contention", contended_moves_let_exactly_one_win),
    (
        "second_handle",
        a_second_handle_reads_at_once_and_shares_the_chain,
    ),
    (
        "job_runs",
        job_runs_are_recorded_and_the_last_good_start_found,
    ),
    (
        "manifests",
        manifests_are_written_once_and_erased_with_their_principal,
    ),
    (
        "usage",
        usage_counters_count_once_per_voter_and_flush_every_retrieval,
    ),
    ("store_meta", the_store_reports_its_schema_and_checkpoints),
];

/// Runs every check, each on a fresh store from `make`, and panics naming every check that
/// failed (after running them all).
pub fn store_contract(make: Factory<'_>) {
    let mut failed = vec![];
    let all = Instant::now();
    for (name, check) in CHECKS {
        let t = Instant::now();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| check(make)));
        let ms = t.elapsed().as_millis();
        match outcome {
            Ok(()) => eprintln!("store contract: {name} ... ok ({ms} ms)"),
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                eprintln!("store contract: {name} ... FAILED ({ms} ms): {msg}");
                failed.push(*name);
            }
        }
    }
    eprintln!(
        "store contract: {} checks in {} ms",
        CHECKS.len(),
        all.elapsed().as_millis()
    );
    assert!(failed.is_empty(), "store contract failed: {failed:?}");
}

// ---------------------------------------------------------------------------------------------
// Fixtures

/// A fixed instant with microsecond precision (what both backends store).
fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap()
}

fn record(tenant: &str, text: &str) -> AssetRecord {
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

/// The next version of `rec` with new text.
fn next(rec: &AssetRecord, version: u32, text: &str) -> AssetRecord {
    let mut r = rec.clone();
    r.meta.version = version;
    r.meta.content_hash = sha256_hex(text);
    r.body = serde_json::json!({ "text": text });
    r
}

fn put_op(rec: &AssetRecord) -> Vec<WriteOp> {
    vec![
        WriteOp::PutVersion(Box::new(rec.clone())),
        WriteOp::Audit(
            AuditDraft::new("ann", AuditAction::MemoryWrite)
                .in_scope(&rec.meta.scope)
                .asset(rec.meta.id.clone())
                .hashes(None, Some(rec.meta.content_hash.clone())),
        ),
    ]
}

fn put(c: &str, s: &dyn ContractStore, rec: &AssetRecord) -> Vec<AuditEvent> {
    s.commit(put_op(rec)).unwrap_or_else(|e| {
        panic!(
            "{c}: writing {} v{} failed: {e}",
            rec.meta.id, rec.meta.version
        )
    })
}

fn ok<T>(c: &str, what: &str, r: CoreResult<T>) -> T {
    r.unwrap_or_else(|e| panic!("{c}: {what} failed: {e}"))
}

fn conflict<T: std::fmt::Debug>(c: &str, what: &str, r: CoreResult<T>) {
    match r {
        Err(CoreError::Conflict(_)) => {}
        other => panic!("{c}: {what} must fail with Conflict, got {other:?}"),
    }
}

fn events(c: &str, s: &dyn ContractStore) -> Vec<AuditEvent> {
    ok(c, "reading the audit log", s.audit_events(0, 100_000))
}

fn versions(rows: &[AssetRecord]) -> Vec<(String, u32)> {
    rows.iter()
        .map(|r| (r.meta.id.clone(), r.meta.version))
        .collect()
}

fn status_of(c: &str, s: &dyn ContractStore, id: &str, v: u32) -> AssetStatus {
    ok(c, "get_version", s.get_version(id, v))
        .unwrap_or_else(|| panic!("{c}: {id} v{v} is missing"))
        .meta
        .status
}

fn refused(c: &str, sub: &Subject, sql: &str, says: &str) {
    match (sub.sql)(sql) {
        Ok(()) => panic!("{c}: the database accepted `{sql}`"),
        Err(e) => assert!(
            e.to_string().contains(says),
            "{c}: `{sql}` was refused, but not by the guard ({says:?}): {e}"
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Checks

/// `(id, version)` is written once; the next version is head + 1; a stored version's content
/// cannot be edited, even in SQL.
pub fn versions_are_immutable_and_next_is_head_plus_one(make: Factory<'_>) {
    let c = "versions";
    let sub = make(None);
    let s = &*sub.store;
    assert!(ok(c, "get", s.get("missing")).is_none());
    assert!(ok(c, "history", s.history("missing")).is_empty());
    let v1 = record("acme", "likes tea");
    let id = v1.meta.id.clone();
    let mut v0 = v1.clone();
    v0.meta.version = 0;
    conflict(
        c,
        "writing version 0",
        s.commit(vec![WriteOp::PutVersion(Box::new(v0))]),
    );
    conflict(
        c,
        "writing version 2 of a new asset",
        s.commit(vec![WriteOp::PutVersion(Box::new(next(&v1, 2, "x")))]),
    );
    put(c, s, &v1);
    conflict(
        c,
        "writing version 1 again",
        s.commit(vec![WriteOp::PutVersion(Box::new(v1.clone()))]),
    );
    conflict(
        c,
        "skipping to version 3",
        s.commit(vec![WriteOp::PutVersion(Box::new(next(&v1, 3, "x")))]),
    );
    let v2 = next(&v1, 2, "likes coffee");
    ok(
        c,
        "writing version 2",
        s.commit(vec![
            WriteOp::PutVersion(Box::new(v2.clone())),
            WriteOp::SetStatus {
                id: id.clone(),
                version: Some(1),
                status: AssetStatus::Superseded,
                expect: Some(AssetStatus::Active),
            },
        ]),
    );
    let h = ok(c, "history", s.history(&id));
    assert_eq!(
        versions(&h),
        vec![(id.clone(), 1), (id.clone(), 2)],
        "{c}: history, oldest first"
    );
    assert_eq!(h[0].body, v1.body, "{c}: version 1 keeps its body");
    assert_eq!(h[0].meta.status, AssetStatus::Superseded);
    assert_eq!(h[1], v2, "{c}: version 2 as written");
    assert_eq!(ok(c, "get", s.get(&id)), Some(v2.clone()), "{c}: the head");
    assert_eq!(
        ok(c, "get_version", s.get_version(&id, 1)),
        Some(h[0].clone())
    );
    assert!(ok(c, "get_version", s.get_version(&id, 3)).is_none());
    let heads = ok(
        c,
        "find heads",
        s.find(&AssetQuery {
            ids: Some(vec![id.clone()]),
            heads_only: true,
            ..Default::default()
        }),
    );
    assert_eq!(versions(&heads), vec![(id.clone(), 2)], "{c}: one head");
    // The database itself refuses an in-place edit of any immutable column.
    for set in [
        "body = '{}'",
        "meta = '{}'",
        "content_hash = 'x'",
        "owner = 'mallory'",
        "scope_key = 't:globex'",
        "tenant = 'globex'",
        "lookup_key = 'x'",
        "kind = 'document'",
        "expires_at = NULL",
        "retain_until = NULL",
        "version = 9",
        "id = 'other'",
    ] {
        refused(
            c,
            &sub,
            &format!("UPDATE assets SET {set} WHERE version = 1"),
            "immutable",
        );
    }
    assert_eq!(ok(c, "history", s.history(&id)), h, "{c}: nothing changed");
    // A record that does not validate is refused before anything is written.
    let mut bad = record("acme", "x");
    bad.meta.owner.clear();
    assert!(
        matches!(
            s.commit(vec![WriteOp::PutVersion(Box::new(bad.clone()))]),
            Err(CoreError::Validation { .. })
        ),
        "{c}: an empty owner must fail validation"
    );
    assert!(ok(c, "get", s.get(&bad.meta.id)).is_none());
}

/// Every field of a record, every kind and every status come back exactly as written.
pub fn records_round_trip_every_field(make: Factory<'_>) {
    let c = "round_trip";
    let sub = make(None);
    let s = &*sub.store;
    let mut rec = record("acme", "every field");
    let m = &mut rec.meta;
    m.scope = Scope {
        tenant: Some("acme".into()),
        project: Some("web".into()),
        user: Some("ann@example.com".into()),
        session: Some("s-1".into()),
        task: Some("t_2.3".into()),
    };
    m.kind = AssetKind::Summary;
    m.source = SourceKind::ModelInference;
    m.trust = Trust::ModelInference;
    m.sensitivity = Sensitivity::Confidential;
    m.acl = Acl::new(vec![
        AclEntry::User("ann".into()),
        AclEntry::Group("hr".into()),
        AclEntry::Role("reviewer".into()),
    ])
    .unwrap();
    // Nanoseconds survive in the metadata even where a column keeps microseconds.
    m.created_at = t0() + Duration::nanoseconds(123_456_789);
    m.updated_at = t0() + Duration::seconds(5);
    m.valid_from = Some(t0() - Duration::days(400));
    m.valid_to = Some(t0() + Duration::days(400));
    m.expires_at = Some(t0() + Duration::days(30));
    m.retain_until = Some(t0() + Duration::days(60));
    m.status = AssetStatus::Candidate;
    m.parents = vec!["p1".into(), "p2".into()];
    m.purposes = vec!["support".into(), "hr".into()];
    rec.lookup_key = Some("ann|ünïcödé ✓ 🦀".into());
    rec.body = serde_json::json!({
        "text": "line one\nline \"two\"\t\\ \u{0000} ünïcödé 🦀",
        "nested": { "a": [1, -2, 3.5, 1e-7, 18446744073709551615u64, -9223372036854775808i64],
                    "b": null, "c": true, "d": "" },
        "empty": {},
        "list": [],
    });
    put(c, s, &rec);
    assert_eq!(
        ok(c, "get", s.get(&rec.meta.id)),
        Some(rec.clone()),
        "{c}: the record must come back exactly as written"
    );
    let mut bare = record("globex", "no lookup key");
    bare.lookup_key = None;
    bare.meta.scope = Scope::global();
    put(c, s, &bare);
    assert_eq!(ok(c, "get", s.get(&bare.meta.id)), Some(bare.clone()));
    for kind in AssetKind::ALL {
        let mut r = record("acme", kind.as_str());
        r.meta.kind = kind;
        put(c, s, &r);
        assert_eq!(
            ok(c, "get", s.get(&r.meta.id)).map(|x| x.meta.kind),
            Some(kind)
        );
    }
    use AssetStatus::*;
    let all = [
        Draft,
        Active,
        Candidate,
        Quarantined,
        ConflictPending,
        Confirmed,
        Superseded,
        Deprecated,
        Yanked,
        Revoked,
        Expired,
    ];
    let id = rec.meta.id.clone();
    for st in all {
        ok(
            c,
            "set_status",
            s.commit(vec![WriteOp::SetStatus {
                id: id.clone(),
                version: None,
                status: st,
                expect: None,
            }]),
        );
        let got = ok(c, "get", s.get(&id)).unwrap();
        assert_eq!(got.meta.status, st, "{c}: status {st:?}");
        // Only the status moved.
        let mut want = rec.clone();
        want.meta.status = st;
        assert_eq!(got, want, "{c}: a status move changes nothing else");
    }
}

/// A commit whose last operation fails leaves no trace of any of its operations, and the
/// store stays usable.
pub fn a_failing_commit_writes_nothing(make: Factory<'_>) {
    let c = "atomic_commit";
    let sub = make(None);
    let s = &*sub.store;
    let a = record("acme", "a");
    put(c, s, &a);
    let b = record("acme", "b");
    let ops = |last: Option<WriteOp>| {
        let mut v = vec![
            WriteOp::PutVersion(Box::new(b.clone())),
            WriteOp::AddEdge(DerivationEdge {
                parent: a.meta.id.clone(),
                child: b.meta.id.clone(),
                relation: Relation::SummaryOf,
                child_store: ChildStore::Assets,
            }),
            WriteOp::Audit(AuditDraft::new("ann", AuditAction::MemoryWrite)),
            WriteOp::Idempotency {
                tenant: "acme".into(),
                key: "k1".into(),
                request_hash: "h".into(),
                response: serde_json::json!({"ok": true}),
            },
            WriteOp::SetStatus {
                id: a.meta.id.clone(),
                version: None,
                status: AssetStatus::Superseded,
                expect: Some(AssetStatus::Active),
            },
        ];
        v.extend(last);
        v
    };
    let mut invalid = record("acme", "invalid");
    invalid.meta.owner.clear();
    let failures = [
        (
            "a duplicate version",
            WriteOp::PutVersion(Box::new(a.clone())),
        ),
        (
            "a status move from the wrong state",
            WriteOp::SetStatus {
                id: a.meta.id.clone(),
                version: None,
                status: AssetStatus::Revoked,
                expect: Some(AssetStatus::Active),
            },
        ),
        (
            "a status move of a missing asset",
            WriteOp::SetStatus {
                id: "missing".into(),
                version: None,
                status: AssetStatus::Revoked,
                expect: None,
            },
        ),
        ("an invalid record", WriteOp::PutVersion(Box::new(invalid))),
    ];
    for (what, last) in failures {
        assert!(
            s.commit(ops(Some(last))).is_err(),
            "{c}: a commit ending in {what} must fail"
        );
        assert!(
            ok(c, "get", s.get(&b.meta.id)).is_none(),
            "{c}: {what}: the new record stayed"
        );
        assert!(
            ok(c, "edges", s.edges_from(&a.meta.id)).is_empty(),
            "{c}: {what}: the edge stayed"
        );
        assert_eq!(events(c, s).len(), 1, "{c}: {what}: the audit event stayed");
        assert!(
            ok(c, "idempotency", s.idempotent_response("acme", "k1")).is_none(),
            "{c}: {what}: the idempotency record stayed"
        );
        assert_eq!(
            status_of(c, s, &a.meta.id, 1),
            AssetStatus::Active,
            "{c}: {what}: the status move stayed"
        );
    }
    // The same operations without the failing one land together.
    let sealed = ok(c, "the commit without its failing op", s.commit(ops(None)));
    assert_eq!(sealed.len(), 1, "{c}: one audit event sealed");
    assert!(ok(c, "get", s.get(&b.meta.id)).is_some());
    assert_eq!(ok(c, "edges", s.edges_from(&a.meta.id)).len(), 1);
    assert_eq!(events(c, s).len(), 2);
    assert!(ok(c, "idempotency", s.idempotent_response("acme", "k1")).is_some());
    assert_eq!(status_of(c, s, &a.meta.id, 1), AssetStatus::Superseded);
    assert_eq!(ok(c, "verify", verify_store(s, None, None, None)).events, 2);
}

/// A status move names its version (or the head), and with `expect` fails with `Conflict`
/// unless the current status is that one.
pub fn status_moves_check_the_expected_state(make: Factory<'_>) {
    let c = "status_moves";
    let sub = make(None);
    let s = &*sub.store;
    let a = record("acme", "a");
    let id = a.meta.id.clone();
    put(c, s, &a);
    put(c, s, &next(&a, 2, "a2"));
    let mv = |version, status, expect| {
        s.commit(vec![WriteOp::SetStatus {
            id: id.clone(),
            version,
            status,
            expect,
        }])
    };
    conflict(
        c,
        "a move expecting the wrong state",
        mv(None, AssetStatus::Revoked, Some(AssetStatus::Candidate)),
    );
    assert_eq!(status_of(c, s, &id, 2), AssetStatus::Active);
    match mv(Some(7), AssetStatus::Revoked, None) {
        Err(CoreError::NotFound(_)) => {}
        other => panic!("{c}: moving a missing version must be NotFound, got {other:?}"),
    }
    match s.commit(vec![WriteOp::SetStatus {
        id: "missing".into(),
        version: None,
        status: AssetStatus::Revoked,
        expect: None,
    }]) {
        Err(CoreError::NotFound(_)) => {}
        other => panic!("{c}: moving a missing asset must be NotFound, got {other:?}"),
    }
    ok(
        c,
        "moving the head",
        mv(None, AssetStatus::Confirmed, Some(AssetStatus::Active)),
    );
    assert_eq!(status_of(c, s, &id, 2), AssetStatus::Confirmed);
    assert_eq!(
        status_of(c, s, &id, 1),
        AssetStatus::Active,
        "{c}: only the head"
    );
    ok(
        c,
        "moving version 1",
        mv(Some(1), AssetStatus::Superseded, Some(AssetStatus::Active)),
    );
    assert_eq!(status_of(c, s, &id, 1), AssetStatus::Superseded);
    assert_eq!(status_of(c, s, &id, 2), AssetStatus::Confirmed);
    ok(
        c,
        "a move without expect",
        mv(None, AssetStatus::Revoked, None),
    );
    assert_eq!(status_of(c, s, &id, 2), AssetStatus::Revoked);
    assert_eq!(
        ok(c, "get", s.get(&id)).unwrap().meta.version,
        2,
        "{c}: a status move does not change the head"
    );
}

/// Edges are stored once, read from either end in (created, child) order, and keep their
/// relation and child store.
pub fn derivation_edges_both_ways(make: Factory<'_>) {
    let c = "edges";
    let sub = make(None);
    let s = &*sub.store;
    let edge = |p: &str, ch: &str, relation, child_store| DerivationEdge {
        parent: p.into(),
        child: ch.into(),
        relation,
        child_store,
    };
    let e = |ch: &str| edge("doc", ch, Relation::ChunkOf, ChildStore::Assets);
    ok(
        c,
        "adding edges",
        s.commit(vec![
            WriteOp::AddEdge(e("c2")),
            WriteOp::AddEdge(e("c1")),
            WriteOp::AddEdge(e("c2")),
        ]),
    );
    std::thread::sleep(std::time::Duration::from_millis(2));
    ok(
        c,
        "adding a later edge",
        s.commit(vec![WriteOp::AddEdge(e("c0"))]),
    );
    assert_eq!(
        ok(c, "edges_from", s.edges_from("doc")),
        vec![e("c1"), e("c2"), e("c0")],
        "{c}: duplicates ignored; order by creation, then child"
    );
    assert_eq!(ok(c, "edges_to", s.edges_to("c2")), vec![e("c2")]);
    assert!(ok(c, "edges_to", s.edges_to("doc")).is_empty());
    assert!(ok(c, "edges_from", s.edges_from("nothing")).is_empty());
    let relations = [
        Relation::ChunkOf,
        Relation::IndexedAs,
        Relation::ConsolidatedFrom,
        Relation::SummaryOf,
        Relation::Supersedes,
        Relation::Cites,
    ];
    let stores = [
        ChildStore::Assets,
        ChildStore::TextIndex,
        ChildStore::VectorIndex,
        ChildStore::Blobs,
    ];
    let mut all = vec![];
    for r in relations {
        for st in stores {
            all.push(edge("p", "x", r, st));
        }
    }
    ok(
        c,
        "adding one edge per relation and child store",
        s.commit(all.iter().cloned().map(WriteOp::AddEdge).collect()),
    );
    let got: BTreeSet<_> = ok(c, "edges_to", s.edges_to("x"))
        .into_iter()
        .map(|e| (e.relation.as_str(), e.child_store.as_str()))
        .collect();
    let want: BTreeSet<_> = all
        .iter()
        .map(|e| (e.relation.as_str(), e.child_store.as_str()))
        .collect();
    assert_eq!(
        got, want,
        "{c}: every relation and child store, as distinct edges"
    );
}

/// The audit log chains every event, pages by sequence number, refuses edits, and an edit made
/// past the guard is named by the verifier.
pub fn audit_chain_verifies_and_tampering_is_detected(make: Factory<'_>) {
    let c = "audit_chain";
    let sub = make(None);
    let s = &*sub.store;
    let mut sealed = vec![];
    for i in 0..4 {
        sealed.extend(put(c, s, &record("acme", &format!("m{i}"))));
    }
    let full = AuditDraft::new("ann", AuditAction::MemoryConfirm)
        .tenant("acme")
        .asset("a-1")
        .hashes(Some("before".into()), Some("after".into()))
        .reason("checked by ünïcödé ✓");
    sealed.extend(ok(
        c,
        "auditing",
        s.commit(vec![WriteOp::Audit(full.clone())]),
    ));
    let stored = events(c, s);
    assert_eq!(stored.len(), 5);
    for (a, b) in sealed.iter().zip(&stored) {
        assert_eq!(
            (a.seq, &a.prev_hash, &a.hash, &a.draft, a.keyed),
            (b.seq, &b.prev_hash, &b.hash, &b.draft, b.keyed),
            "{c}: the stored event must be the one the commit sealed"
        );
    }
    assert_eq!(
        stored[4].draft, full,
        "{c}: every field of an event is kept"
    );
    assert!(
        stored.iter().all(|e| !e.keyed),
        "{c}: no key, no keyed event"
    );
    assert_eq!(verify_chain(stored.clone(), None), Ok(5));
    let page: Vec<u64> = ok(c, "paging", s.audit_events(2, 2))
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(page, vec![3, 4], "{c}: events after 2, at most 2");
    assert!(ok(c, "paging", s.audit_events(5, 10)).is_empty());
    assert!(ok(c, "paging", s.audit_events(0, 0)).is_empty());
    let v = ok(c, "verify_store", verify_store(s, None, None, None));
    assert!(v.ok && v.events == 5, "{c}: {v:?}");
    // The log refuses edits through SQL...
    refused(
        c,
        &sub,
        "UPDATE audit SET reason = 'x' WHERE seq = 3",
        "append-only",
    );
    refused(c, &sub, "DELETE FROM audit WHERE seq = 3", "append-only");
    assert_eq!(events(c, s), stored, "{c}: nothing changed");
    // ... and a tamperer who drops the guard is caught by the chain, at the edited row.
    ok(
        c,
        "dropping the guard",
        (sub.sql)(&sub.drop_audit_update_guard),
    );
    ok(
        c,
        "editing past the guard",
        (sub.sql)("UPDATE audit SET actor = 'mallory' WHERE seq = 3"),
    );
    assert_eq!(verify_chain(events(c, s), None).unwrap_err().seq, 3);
    let v = ok(c, "verify_store", verify_store(s, None, None, None));
    assert_eq!((v.ok, v.broken_at), (false, Some(3)), "{c}: {v:?}");
}

/// A keyed store seals every event with its key and signs checkpoints of the head, one per
/// head; checkpoints are append-only. A store without a key signs nothing.
pub fn keyed_chain_and_signed_checkpoints(make: Factory<'_>) {
    let c = "keyed_audit";
    let key = AuditKey::from_bytes([42; 32]);
    let sub = make(Some(key.clone()));
    let s = &*sub.store;
    assert_eq!(
        ok(c, "checkpoint of an empty log", s.checkpoint_audit()),
        None
    );
    for i in 0..4 {
        put(c, s, &record("acme", &format!("m{i}")));
    }
    let ev = events(c, s);
    assert!(ev.iter().all(|e| e.keyed), "{c}: every event keyed");
    assert_eq!(verify_chain(ev.clone(), Some(&key)), Ok(4));
    assert_eq!(
        verify_chain(ev, None).unwrap_err().seq,
        1,
        "{c}: without the key the chain cannot be checked"
    );
    assert_eq!(
        verify_chain(events(c, s), Some(&AuditKey::from_bytes([7; 32])))
            .unwrap_err()
            .seq,
        1,
        "{c}: another key does not verify it"
    );
    let cp = ok(c, "checkpoint", s.checkpoint_audit()).expect("a checkpoint of the head");
    assert_eq!(cp.seq, 4);
    assert_eq!(cp.hash, events(c, s)[3].hash);
    assert!(cp.is_signed_by(&key));
    assert_eq!(
        ok(c, "checkpoint again", s.checkpoint_audit()),
        Some(cp.clone()),
        "{c}: nothing new, no second checkpoint"
    );
    assert_eq!(
        ok(c, "checkpoints", s.audit_checkpoints()),
        vec![cp.clone()]
    );
    put(c, s, &record("acme", "m4"));
    let cp2 = ok(c, "checkpoint", s.checkpoint_audit()).unwrap();
    assert_eq!(cp2.seq, 5);
    assert_eq!(
        ok(c, "checkpoints", s.audit_checkpoints()),
        vec![cp.clone(), cp2.clone()],
        "{c}: oldest first"
    );
    let v = ok(
        c,
        "verify_store",
        verify_store(s, Some(&key), Some(&cp2), None),
    );
    assert!(v.ok && v.events == 5 && v.checkpoints == 3, "{c}: {v:?}");
    refused(c, &sub, "DELETE FROM audit_checkpoints", "append-only");
    refused(
        c,
        &sub,
        "UPDATE audit_checkpoints SET mac = 'x'",
        "append-only",
    );
    assert_eq!(ok(c, "checkpoints", s.audit_checkpoints()).len(), 2);
    drop(sub);

    let plain = make(None);
    let p = &*plain.store;
    put(c, p, &record("acme", "m"));
    assert_eq!(
        ok(c, "checkpoint without a key", p.checkpoint_audit()),
        None
    );
    assert!(ok(c, "checkpoints", p.audit_checkpoints()).is_empty());
}

/// An idempotency record is written once per (tenant, key) and answers with what was stored.
pub fn idempotency_is_remembered_once_per_tenant_and_key(make: Factory<'_>) {
    let c = "idempotency";
    let sub = make(None);
    let s = &*sub.store;
    let response = serde_json::json!({"id": 1, "nested": {"list": [1, "two", null]}});
    let op = |tenant: &str, key: &str| WriteOp::Idempotency {
        tenant: tenant.into(),
        key: key.into(),
        request_hash: format!("h-{tenant}-{key}"),
        response: response.clone(),
    };
    assert!(ok(c, "lookup", s.idempotent_response("acme", "k1")).is_none());
    ok(c, "first", s.commit(vec![op("acme", "k1")]));
    conflict(c, "the same key again", s.commit(vec![op("acme", "k1")]));
    ok(c, "another key", s.commit(vec![op("acme", "k2")]));
    ok(c, "another tenant", s.commit(vec![op("globex", "k1")]));
    assert_eq!(
        ok(c, "lookup", s.idempotent_response("acme", "k1")),
        Some(("h-acme-k1".to_string(), response.clone()))
    );
    assert_eq!(
        ok(c, "lookup", s.idempotent_response("globex", "k1")).map(|x| x.0),
        Some("h-globex-k1".to_string())
    );
    assert!(ok(c, "lookup", s.idempotent_response("initech", "k1")).is_none());
}

struct FindSet {
    a1: AssetRecord,
    a2: AssetRecord,
    b: AssetRecord,
    d: AssetRecord,
    e: AssetRecord,
}

fn find_set(c: &str, s: &dyn ContractStore) -> FindSet {
    let t = |secs| t0() + Duration::seconds(secs);
    let mut a1 = record("acme", "a1");
    a1.meta.created_at = t(0);
    a1.meta.expires_at = Some(t(100));
    put(c, s, &a1);
    let mut b = record("globex", "b");
    b.meta.owner = "bob".into();
    b.lookup_key = Some("bob|tea".into());
    b.meta.created_at = t(1);
    b.meta.retain_until = Some(t(50));
    put(c, s, &b);
    let mut d = record("acme", "d");
    d.meta.kind = AssetKind::Document;
    d.meta.scope.project = Some("web".into());
    d.lookup_key = Some("doc:1".into());
    d.meta.created_at = t(2);
    d.meta.status = AssetStatus::Candidate;
    put(c, s, &d);
    let mut a2 = next(&a1, 2, "a2");
    a2.meta.created_at = t(3);
    put(c, s, &a2);
    ok(
        c,
        "superseding a1",
        s.commit(vec![WriteOp::SetStatus {
            id: a1.meta.id.clone(),
            version: Some(1),
            status: AssetStatus::Superseded,
            expect: None,
        }]),
    );
    a1.meta.status = AssetStatus::Superseded;
    let mut e = record("acme", "e");
    e.meta.scope = Scope::global();
    e.meta.kind = AssetKind::SkillVersion;
    e.meta.owner = "platform".into();
    e.lookup_key = Some("skill".into());
    e.meta.created_at = t(4);
    put(c, s, &e);
    FindSet { a1, a2, b, d, e }
}

/// Every field of `AssetQuery` filters as documented; rows come in (created_at, id, version)
/// order; `limit` cuts.
pub fn find_applies_every_filter(make: Factory<'_>) {
    let c = "find_filters";
    let sub = make(None);
    let s = &*sub.store;
    let FindSet { a1, a2, b, d, e } = find_set(c, s);
    let t = |secs| t0() + Duration::seconds(secs);
    let key = |r: &AssetRecord| (r.meta.id.clone(), r.meta.version);
    let cases: Vec<(&str, AssetQuery, Vec<&AssetRecord>)> = vec![
        (
            "no filter",
            AssetQuery::default(),
            vec![&a1, &b, &d, &a2, &e],
        ),
        (
            "kind",
            AssetQuery {
                kind: Some(AssetKind::Memory),
                ..Default::default()
            },
            vec![&a1, &b, &a2],
        ),
        (
            "tenant",
            AssetQuery {
                tenant: Some("acme".into()),
                ..Default::default()
            },
            vec![&a1, &d, &a2],
        ),
        (
            "scope keys",
            AssetQuery {
                scope_keys: Some(vec!["t:acme".into()]),
                ..Default::default()
            },
            vec![&a1, &a2],
        ),
        (
            "scope keys, project and global",
            AssetQuery {
                scope_keys: Some(vec!["t:acme/p:web".into(), "global".into()]),
                ..Default::default()
            },
            vec![&d, &e],
        ),
        (
            "no scope key admits nothing",
            AssetQuery {
                scope_keys: Some(vec![]),
                ..Default::default()
            },
            vec![],
        ),
        (
            "statuses",
            AssetQuery {
                statuses: Some(vec![AssetStatus::Active]),
                ..Default::default()
            },
            vec![&b, &a2, &e],
        ),
        (
            "statuses, two",
            AssetQuery {
                statuses: Some(vec![AssetStatus::Superseded, AssetStatus::Candidate]),
                ..Default::default()
            },
            vec![&a1, &d],
        ),
        (
            "no status admits nothing",
            AssetQuery {
                statuses: Some(vec![]),
                ..Default::default()
            },
            vec![],
        ),
        (
            "lookup key",
            AssetQuery {
                lookup_key: Some("ann|coffee".into()),
                ..Default::default()
            },
            vec![&a1, &a2],
        ),
        (
            "content hash",
            AssetQuery {
                content_hash: Some(a1.meta.content_hash.clone()),
                ..Default::default()
            },
            vec![&a1],
        ),
        (
            "owner",
            AssetQuery {
                owner: Some("ann".into()),
                ..Default::default()
            },
            vec![&a1, &d, &a2],
        ),
        (
            "expires before, inclusive",
            AssetQuery {
                expires_before: Some(t(100)),
                ..Default::default()
            },
            vec![&a1, &a2],
        ),
        (
            "expires before, earlier",
            AssetQuery {
                expires_before: Some(t(99)),
                ..Default::default()
            },
            vec![],
        ),
        (
            "retain before, inclusive",
            AssetQuery {
                retain_before: Some(t(50)),
                ..Default::default()
            },
            vec![&b],
        ),
        (
            "retain before, earlier",
            AssetQuery {
                retain_before: Some(t(50) - Duration::microseconds(1)),
                ..Default::default()
            },
            vec![],
        ),
        (
            "created before, exclusive",
            AssetQuery {
                created_before: Some(t(2)),
                ..Default::default()
            },
            vec![&a1, &b],
        ),
        (
            "created since, inclusive",
            AssetQuery {
                created_since: Some(t(2)),
                ..Default::default()
            },
            vec![&d, &a2, &e],
        ),
        (
            "created in a window",
            AssetQuery {
                created_since: Some(t(1)),
                created_before: Some(t(3)),
                ..Default::default()
            },
            vec![&b, &d],
        ),
        (
            "ids",
            AssetQuery {
                ids: Some(vec![
                    a1.meta.id.clone(),
                    e.meta.id.clone(),
                    "missing".into(),
                ]),
                ..Default::default()
            },
            vec![&a1, &a2, &e],
        ),
        (
            "no id admits nothing",
            AssetQuery {
                ids: Some(vec![]),
                ..Default::default()
            },
            vec![],
        ),
        (
            "heads only",
            AssetQuery {
                heads_only: true,
                ..Default::default()
            },
            vec![&b, &d, &a2, &e],
        ),
        (
            "combined",
            AssetQuery {
                kind: Some(AssetKind::Memory),
                tenant: Some("acme".into()),
                scope_keys: Some(vec!["t:acme".into(), "global".into()]),
                statuses: Some(vec![AssetStatus::Active, AssetStatus::Superseded]),
                lookup_key: Some("ann|coffee".into()),
                owner: Some("ann".into()),
                heads_only: true,
                ..Default::default()
            },
            vec![&a2],
        ),
        (
            "limit",
            AssetQuery {
                limit: Some(2),
                ..Default::default()
            },
            vec![&a1, &b],
        ),
        (
            "limit zero",
            AssetQuery {
                limit: Some(0),
                ..Default::default()
            },
            vec![],
        ),
        (
            "after",
            AssetQuery {
                after: Some((b.meta.created_at, b.meta.id.clone(), 1)),
                limit: Some(2),
                ..Default::default()
            },
            vec![&d, &a2],
        ),
    ];
    for (what, q, want) in cases {
        let got = ok(c, what, s.find(&q));
        assert_eq!(
            versions(&got),
            want.iter().map(|r| key(r)).collect::<Vec<_>>(),
            "{c}: {what}"
        );
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, *w, "{c}: {what}: rows come back whole");
        }
    }
}

/// Paging with `after` and `limit` walks every row once, in (created_at, id, version) order
/// with ids compared byte by byte, whatever the database's collation.
pub fn find_pages_in_created_id_version_order(make: Factory<'_>) {
    let c = "find_paging";
    let sub = make(None);
    let s = &*sub.store;
    let ids = ["B", "a", "a-b", "ab", "Z9", "_x", "é", "a b", "A"];
    let same = t0();
    // Times with sub-microsecond parts: both backends keep microseconds, and must agree.
    let later = t0() + Duration::nanoseconds(1_500);
    let mut want: Vec<(DateTime<Utc>, String, u32)> = vec![];
    for (i, id) in ids.iter().enumerate() {
        let mut r = record("acme", id);
        r.meta.id = id.to_string();
        r.meta.created_at = if i % 3 == 2 { later } else { same };
        put(c, s, &r);
        want.push((r.meta.created_at, r.meta.id.clone(), 1));
        if i % 2 == 0 {
            // A later version created at the same instant: the version breaks the tie.
            put(c, s, &next(&r, 2, &format!("{id} v2")));
            want.push((r.meta.created_at, r.meta.id.clone(), 2));
        }
    }
    let micros = |t: &DateTime<Utc>| t.timestamp_micros();
    want.sort_by(|x, y| (micros(&x.0), &x.1, x.2).cmp(&(micros(&y.0), &y.1, y.2)));
    let want_keys: Vec<(String, u32)> = want.iter().map(|w| (w.1.clone(), w.2)).collect();
    let all = ok(c, "find all", s.find(&AssetQuery::default()));
    assert_eq!(
        versions(&all),
        want_keys,
        "{c}: order is created_at, then id byte by byte, then version"
    );
    for page in [1, 2, 3, 5, 100] {
        let mut seen = vec![];
        let mut after = None;
        loop {
            let rows = ok(
                c,
                "a page",
                s.find(&AssetQuery {
                    after: after.clone(),
                    limit: Some(page),
                    ..Default::default()
                }),
            );
            assert!(rows.len() <= page, "{c}: a page longer than its limit");
            let Some(last) = rows.last() else { break };
            after = Some(last.position());
            seen.extend(versions(&rows));
        }
        assert_eq!(seen, want_keys, "{c}: pages of {page} walk every row once");
        // The shared pager walks the same rows the same way.
        let paged: Vec<_> = registry_core::store::pages(
            s,
            AssetQuery {
                limit: Some(page),
                ..Default::default()
            },
        )
        .flat_map(|rows| versions(&ok(c, "a page", rows)))
        .collect();
        assert_eq!(
            paged, want_keys,
            "{c}: pages() of {page} walks every row once"
        );
    }
    // A position between rows: everything after it, none of it.
    let rest = ok(
        c,
        "after a position between rows",
        s.find(&AssetQuery {
            after: Some((same, "a".into(), 7)),
            ..Default::default()
        }),
    );
    let from = want
        .iter()
        .position(|w| micros(&w.0) > micros(&same) || w.1.as_str() > "a")
        .unwrap();
    assert_eq!(
        versions(&rest),
        want_keys[from..].to_vec(),
        "{c}: after (t, \"a\", 7)"
    );
}

/// Purge deletes every version and every edge (either end) of the ids it names, counts them,
/// and audits, in one transaction; nothing else changes.
pub fn purge_removes_every_version_and_edge_and_audits(make: Factory<'_>) {
    let c = "purge";
    let sub = make(None);
    let s = &*sub.store;
    let a = record("acme", "canary-to-purge");
    let id = a.meta.id.clone();
    put(c, s, &a);
    put(c, s, &next(&a, 2, "canary v2"));
    let keep = record("acme", "unrelated");
    put(c, s, &keep);
    let edge = |p: &str, ch: &str| DerivationEdge {
        parent: p.into(),
        child: ch.into(),
        relation: Relation::SummaryOf,
        child_store: ChildStore::Assets,
    };
    ok(
        c,
        "edges",
        s.commit(vec![
            WriteOp::AddEdge(edge("parent", &id)),
            WriteOp::AddEdge(edge(&id, "child")),
            WriteOp::AddEdge(edge(&keep.meta.id, "other")),
        ]),
    );
    let before = events(c, s).len();
    let counts = ok(
        c,
        "purge",
        s.purge(
            &[id.clone(), "missing".into()],
            AuditDraft::new("admin", AuditAction::DeletionPurge).asset("receipt-1"),
        ),
    );
    assert_eq!((counts.versions, counts.edges), (2, 2), "{c}: counts");
    assert!(ok(c, "get", s.get(&id)).is_none());
    assert!(ok(c, "get_version", s.get_version(&id, 1)).is_none());
    assert!(ok(c, "history", s.history(&id)).is_empty());
    assert!(
        ok(
            c,
            "find",
            s.find(&AssetQuery {
                ids: Some(vec![id.clone()]),
                ..Default::default()
            })
        )
        .is_empty()
    );
    assert!(
        ok(
            c,
            "find by hash",
            s.find(&AssetQuery {
                content_hash: Some(a.meta.content_hash.clone()),
                ..Default::default()
            })
        )
        .is_empty()
    );
    assert!(ok(c, "edges", s.edges_to(&id)).is_empty());
    assert!(ok(c, "edges", s.edges_from(&id)).is_empty());
    assert!(ok(c, "edges", s.edges_from("parent")).is_empty());
    assert!(ok(c, "edges", s.edges_to("child")).is_empty());
    assert_eq!(ok(c, "get", s.get(&keep.meta.id)), Some(keep.clone()));
    assert_eq!(ok(c, "edges", s.edges_from(&keep.meta.id)).len(), 1);
    let ev = events(c, s);
    assert_eq!(ev.len(), before + 1, "{c}: one audit event");
    let last = ev.last().unwrap();
    assert_eq!(
        (last.draft.action.as_str(), last.draft.asset_id.as_deref()),
        ("deletion.purge", Some("receipt-1"))
    );
    assert_eq!(verify_chain(ev.clone(), None), Ok(ev.len() as u64));
    // Purging nothing still records that it ran.
    let none = ok(
        c,
        "purge of nothing",
        s.purge(&[], AuditDraft::new("admin", AuditAction::DeletionPurge)),
    );
    assert_eq!((none.versions, none.edges), (0, 0));
    assert_eq!(events(c, s).len(), before + 2);
}

/// `purge_versions_before` deletes the versions below one, keeps it, any later one and the
/// edges, and audits.
pub fn purge_versions_before_keeps_that_version_and_the_edges(make: Factory<'_>) {
    let c = "purge_versions_before";
    let sub = make(None);
    let s = &*sub.store;
    let parent = record("acme", "a parent");
    put(c, s, &parent);
    let v1 = record("acme", "canary v1");
    let id = v1.meta.id.clone();
    ok(
        c,
        "v1 and its edge",
        s.commit(vec![
            WriteOp::PutVersion(Box::new(v1.clone())),
            WriteOp::AddEdge(DerivationEdge {
                parent: parent.meta.id.clone(),
                child: id.clone(),
                relation: Relation::ConsolidatedFrom,
                child_store: ChildStore::Assets,
            }),
        ]),
    );
    for (v, text) in [
        (2, "canary v2"),
        (3, "rebuilt without it"),
        (4, "and later"),
    ] {
        put(c, s, &next(&v1, v, text));
    }
    let before = events(c, s).len();
    let n = ok(
        c,
        "purge_versions_before",
        s.purge_versions_before(
            &id,
            3,
            AuditDraft::new("admin", AuditAction::DeletionPurgeVersions).asset(id.clone()),
        ),
    );
    assert_eq!(n, 2, "{c}: versions 1 and 2");
    let history: Vec<u32> = ok(c, "history", s.history(&id))
        .iter()
        .map(|r| r.meta.version)
        .collect();
    assert_eq!(history, vec![3, 4]);
    assert_eq!(ok(c, "get", s.get(&id)).unwrap().meta.version, 4);
    assert!(ok(c, "get_version", s.get_version(&id, 2)).is_none());
    assert_eq!(ok(c, "edges", s.edges_to(&id)).len(), 1, "{c}: edges stay");
    assert_eq!(ok(c, "get", s.get(&parent.meta.id)), Some(parent.clone()));
    assert_eq!(
        ok(
            c,
            "nothing left below",
            s.purge_versions_before(
                &id,
                3,
                AuditDraft::new("admin", AuditAction::DeletionPurgeVersions)
            )
        ),
        0
    );
    // The next version is still head + 1.
    conflict(
        c,
        "rewriting version 2",
        s.commit(vec![WriteOp::PutVersion(Box::new(next(&v1, 2, "x")))]),
    );
    put(c, s, &next(&v1, 5, "v5"));
    let ev = events(c, s);
    assert_eq!(ev.len(), before + 3);
    assert_eq!(verify_chain(ev.clone(), None), Ok(ev.len() as u64));
}

fn key_record(id: &str, tenant: &str, at: DateTime<Utc>) -> ApiKeyRecord {
    ApiKeyRecord {
        id: id.into(),
        key_hash: sha256_hex(format!("secret-{id}")),
        tenant: tenant.into(),
        user: format!("user-{id}"),
        groups: vec!["hr".into(), "legal".into()],
        roles: vec![Role::Writer, Role::Reviewer],
        platform: false,
        projects: vec!["web".into()],
        purposes: vec!["hr".into(), "support".into()],
        clearance: Sensitivity::Confidential,
        created_at: at,
        revoked_at: None,
    }
}

/// API keys: stored whole (platform flag, projects, purposes, clearance), found by hash, listed by
/// tenant oldest first, unique by id and hash, revoked once; creation and revocation audited.
pub fn api_keys_are_stored_listed_and_revoked(make: Factory<'_>) {
    let c = "api_keys";
    let sub = make(None);
    let s = &*sub.store;
    let k1 = key_record("k1", "acme", t0());
    let mut k2 = key_record("k2", "globex", t0() + Duration::seconds(1));
    k2.platform = true;
    k2.projects = vec!["*".into()];
    k2.purposes = vec!["*".into()];
    k2.roles = Role::ALL.to_vec();
    k2.clearance = Sensitivity::Secret;
    k2.groups = vec![];
    let mut k3 = key_record("k3", "acme", t0() + Duration::seconds(2));
    k3.clearance = Sensitivity::Public;
    k3.projects = vec![];
    k3.purposes = vec![];
    for k in [&k3, &k1, &k2] {
        ok(c, "create_key", s.create_key(k));
    }
    assert_eq!(
        ok(c, "find_key", s.find_key(&k1.key_hash)),
        Some(k1.clone())
    );
    assert_eq!(
        ok(c, "find_key", s.find_key(&k2.key_hash)),
        Some(k2.clone())
    );
    assert!(ok(c, "find_key", s.find_key("nope")).is_none());
    assert_eq!(
        ok(c, "list_keys", s.list_keys(Some("acme"))),
        vec![k1.clone(), k3.clone()],
        "{c}: a tenant's keys, oldest first"
    );
    assert_eq!(
        ok(c, "list_keys", s.list_keys(None))
            .iter()
            .map(|k| k.id.as_str())
            .collect::<Vec<_>>(),
        vec!["k1", "k2", "k3"]
    );
    assert!(ok(c, "list_keys", s.list_keys(Some("initech"))).is_empty());
    let mut same_id = key_record("k1", "acme", t0());
    same_id.key_hash = sha256_hex("another secret");
    conflict(c, "a second key with the same id", s.create_key(&same_id));
    conflict(
        c,
        "a second key with the same hash",
        s.create_key(&key_record_with_hash("k9", &k1.key_hash)),
    );
    assert!(ok(c, "revoke", s.revoke_key("k1", "root")));
    assert!(!ok(c, "revoke again", s.revoke_key("k1", "root")));
    assert!(!ok(c, "revoke a missing key", s.revoke_key("nope", "root")));
    let revoked = ok(c, "find_key", s.find_key(&k1.key_hash)).unwrap();
    assert!(revoked.revoked_at.is_some(), "{c}: revoked_at set");
    assert_eq!(
        ApiKeyRecord {
            revoked_at: None,
            ..revoked
        },
        k1,
        "{c}: revocation changes nothing else"
    );
    let ev = events(c, s);
    let seen: Vec<(&str, Option<&str>, Option<&str>)> = ev
        .iter()
        .map(|e| {
            (
                e.draft.action.as_str(),
                e.draft.asset_id.as_deref(),
                e.draft.tenant.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("key.create", Some("k3"), Some("acme")),
            ("key.create", Some("k1"), Some("acme")),
            ("key.create", Some("k2"), Some("globex")),
            ("key.revoke", Some("k1"), Some("acme")),
        ],
        "{c}: audited once each; refused and no-op calls leave nothing"
    );
    assert_eq!(
        ev[1].draft.after_hash.as_deref(),
        Some(k1.key_hash.as_str())
    );
    assert_eq!(ev[3].draft.actor, "root");
    assert_eq!(verify_chain(ev, None), Ok(4));
}

fn key_record_with_hash(id: &str, hash: &str) -> ApiKeyRecord {
    ApiKeyRecord {
        key_hash: hash.into(),
        ..key_record(id, "acme", t0())
    }
}

fn receipt(id: &str, started: DateTime<Utc>, status: ReceiptStatus) -> Receipt {
    Receipt {
        id: id.into(),
        tenant: Some("acme".into()),
        actor: "ann".into(),
        reason: "user asked".into(),
        roots: vec!["a1".into()],
        target: DeletionLevel::Purged,
        status,
        level_reached: DeletionLevel::Revoked,
        assets: vec![ReachedAsset {
            id: "a1".into(),
            kind: AssetKind::Memory,
            via: "root".into(),
            content_hashes: vec![sha256_hex("a1")],
            versions: 2,
            stores: vec![StoreReach {
                store: "assets".into(),
                level: DeletionLevel::Revoked,
                count: 2,
                method: Some("rows deleted".into()),
            }],
            regenerated_as: None,
            regenerated_version: None,
            blobs: vec![],
        }],
        flagged: vec![],
        counts: ReceiptCounts {
            assets: 1,
            versions: 2,
            ..Default::default()
        },
        started_at: started,
        updated_at: started + Duration::nanoseconds(1_234_567),
        finished_at: None,
        stage_ms: [("plan".to_string(), 3u64)].into_iter().collect(),
        reowned: vec![],
        nodes: vec![registry_core::cluster::NodeReach {
            node: "node-a".into(),
            applied: true,
            applied_seq: 7,
        }],
    }
}

/// A receipt is stored whole, replaced whole under its id, and listed while unfinished, oldest
/// first.
pub fn receipts_are_replaced_whole(make: Factory<'_>) {
    let c = "receipts";
    let sub = make(None);
    let s = &*sub.store;
    let r1 = receipt(
        "r1",
        t0() + Duration::seconds(10),
        ReceiptStatus::InProgress,
    );
    let r2 = receipt("r2", t0(), ReceiptStatus::InProgress);
    let r3 = receipt("r3", t0() + Duration::seconds(5), ReceiptStatus::Completed);
    for r in [&r1, &r2, &r3] {
        ok(c, "put_receipt", s.put_receipt(r));
    }
    assert_eq!(ok(c, "get_receipt", s.get_receipt("r1")), Some(r1.clone()));
    assert!(ok(c, "get_receipt", s.get_receipt("nope")).is_none());
    let ids = |v: Vec<Receipt>| v.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(
        ids(ok(c, "unfinished", s.unfinished_receipts())),
        vec!["r2", "r1"],
        "{c}: unfinished, oldest first"
    );
    let mut done = r2.clone();
    done.status = ReceiptStatus::Completed;
    done.level_reached = DeletionLevel::Purged;
    done.finished_at = Some(t0() + Duration::seconds(20));
    done.updated_at = t0() + Duration::seconds(20);
    done.assets[0].stores[0].level = DeletionLevel::Purged;
    ok(c, "replacing r2", s.put_receipt(&done));
    assert_eq!(ok(c, "get_receipt", s.get_receipt("r2")), Some(done));
    assert_eq!(
        ids(ok(c, "unfinished", s.unfinished_receipts())),
        vec!["r1"]
    );
    // Listed per tenant, newest first, bounded; the global scope's (no tenant) apart.
    let mut global = receipt("r4", t0() + Duration::seconds(30), ReceiptStatus::Completed);
    global.tenant = None;
    ok(c, "put_receipt", s.put_receipt(&global));
    let tenant = r1.tenant.clone();
    assert_eq!(
        ids(ok(c, "recent", s.recent_receipts(tenant.as_deref(), 10))),
        vec!["r1", "r3", "r2"],
        "{c}: a tenant's receipts, newest first"
    );
    assert_eq!(
        ids(ok(c, "recent", s.recent_receipts(tenant.as_deref(), 2))),
        vec!["r1", "r3"]
    );
    assert_eq!(
        ids(ok(c, "recent", s.recent_receipts(None, 10))),
        vec!["r4"],
        "{c}: the global scope's receipts alone"
    );
    assert!(ok(c, "recent", s.recent_receipts(Some("other-tenant"), 10)).is_empty());
}

/// Text that no backend can index the same way, a NUL character, is refused in every stored
/// identifier and name, before anything is written; a lookup by such text finds nothing. (In
/// a JSON body it is data like any other character: `round_trip` stores one.)
pub fn text_with_nul_is_refused_and_never_found(make: Factory<'_>) {
    let c = "nul_text";
    let sub = make(None);
    let s = &*sub.store;
    let nul = "a\u{0}b";
    let invalid = |what: &str, r: CoreResult<Vec<AuditEvent>>| match r {
        Err(CoreError::Validation { .. }) => {}
        other => panic!("{c}: {what} with a NUL must fail validation, got {other:?}"),
    };
    let variants: Vec<(&str, AssetRecord)> = vec![
        ("an id", {
            let mut r = record("acme", "x");
            r.meta.id = nul.into();
            r
        }),
        ("an owner", {
            let mut r = record("acme", "x");
            r.meta.owner = nul.into();
            r
        }),
        ("a lookup key", {
            let mut r = record("acme", "x");
            r.lookup_key = Some(nul.into());
            r
        }),
        ("a content hash", {
            let mut r = record("acme", "x");
            r.meta.content_hash = nul.into();
            r
        }),
    ];
    for (what, r) in variants {
        invalid(what, s.commit(put_op(&r)));
    }
    invalid(
        "an audit reason",
        s.commit(vec![WriteOp::Audit(
            AuditDraft::new("ann", AuditAction::MemoryWrite).reason(nul),
        )]),
    );
    invalid(
        "an audit actor",
        s.commit(vec![WriteOp::Audit(AuditDraft::new(
            nul,
            AuditAction::MemoryWrite,
        ))]),
    );
    invalid(
        "an idempotency key",
        s.commit(vec![WriteOp::Idempotency {
            tenant: "acme".into(),
            key: nul.into(),
            request_hash: "h".into(),
            response: serde_json::json!({}),
        }]),
    );
    invalid(
        "an edge",
        s.commit(vec![WriteOp::AddEdge(DerivationEdge {
            parent: nul.into(),
            child: "c".into(),
            relation: Relation::ChunkOf,
            child_store: ChildStore::Assets,
        })]),
    );
    let mut k = key_record("k1", "acme", t0());
    k.user = nul.into();
    assert!(
        matches!(s.create_key(&k), Err(CoreError::Validation { .. })),
        "{c}: a key with a NUL must fail validation"
    );
    assert!(events(c, s).is_empty(), "{c}: nothing was audited");
    // Lookups by such text find nothing (nothing stored can hold it).
    put(c, s, &record("acme", "stored"));
    assert!(ok(c, "get", s.get(nul)).is_none());
    assert!(ok(c, "get_version", s.get_version(nul, 1)).is_none());
    assert!(ok(c, "history", s.history(nul)).is_empty());
    assert!(ok(c, "edges", s.edges_from(nul)).is_empty());
    assert!(ok(c, "edges", s.edges_to(nul)).is_empty());
    assert!(ok(c, "idempotency", s.idempotent_response("acme", nul)).is_none());
    assert!(ok(c, "find_key", s.find_key(nul)).is_none());
    assert!(ok(c, "list_keys", s.list_keys(Some(nul))).is_empty());
    assert!(ok(c, "get_receipt", s.get_receipt(nul)).is_none());
    for q in [
        AssetQuery {
            lookup_key: Some(nul.into()),
            ..Default::default()
        },
        AssetQuery {
            owner: Some(nul.into()),
            ..Default::default()
        },
        AssetQuery {
            tenant: Some(nul.into()),
            ..Default::default()
        },
        AssetQuery {
            content_hash: Some(nul.into()),
            ..Default::default()
        },
        AssetQuery {
            ids: Some(vec![nul.into()]),
            ..Default::default()
        },
        AssetQuery {
            scope_keys: Some(vec![nul.into()]),
            ..Default::default()
        },
    ] {
        assert!(ok(c, "find", s.find(&q)).is_empty(), "{c}: {q:?}");
    }
    let mut r = receipt("r\u{0}", t0(), ReceiptStatus::InProgress);
    assert!(
        matches!(s.put_receipt(&r), Err(CoreError::Validation { .. })),
        "{c}: a receipt id with a NUL must fail validation"
    );
    r.id = "r1".into();
    r.reason = nul.into();
    ok(
        c,
        "a NUL inside a receipt's JSON is data",
        s.put_receipt(&r),
    );
    assert_eq!(ok(c, "get_receipt", s.get_receipt("r1")), Some(r));
}

/// Writers on several threads (and, where the backend has one, on a second handle) each
/// commit; every commit lands and the audit chain stays one linear, verifiable sequence.
pub fn concurrent_writers_keep_one_linear_chain(make: Factory<'_>) {
    let c = "concurrent_writers";
    let sub = make(None);
    let handles: Vec<Arc<dyn ContractStore>> = match &sub.second {
        Some(b) => vec![sub.store.clone(), sub.store.clone(), b.clone(), b.clone()],
        None => vec![sub.store.clone(); 4],
    };
    let per = 25;
    let start = Arc::new(Barrier::new(handles.len()));
    let written: Vec<Vec<AssetId>> = std::thread::scope(|scope| {
        let joins: Vec<_> = handles
            .iter()
            .enumerate()
            .map(|(t, h)| {
                let start = start.clone();
                scope.spawn(move || {
                    start.wait();
                    let mut ids = vec![];
                    for i in 0..per {
                        let r = record("acme", &format!("thread {t} write {i}"));
                        put(c, &**h, &r);
                        ids.push(r.meta.id);
                    }
                    ids
                })
            })
            .collect();
        joins.into_iter().map(|j| j.join().unwrap()).collect()
    });
    let s = &*sub.store;
    let ev = events(c, s);
    let total = (handles.len() * per) as u64;
    assert_eq!(
        verify_chain(ev.clone(), None),
        Ok(total),
        "{c}: one linear chain"
    );
    let seqs: Vec<u64> = ev.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=total).collect::<Vec<_>>(),
        "{c}: no gap, no fork"
    );
    for id in written.iter().flatten() {
        assert!(ok(c, "get", s.get(id)).is_some(), "{c}: {id} missing");
    }
}

/// Under contention, optimistic concurrency lets exactly one writer win: one status move
/// expecting `active`, one writer of version 2. The others get `Conflict`.
pub fn contended_moves_let_exactly_one_win(make: Factory<'_>) {
    let c = "contention";
    let sub = make(None);
    let s = &*sub.store;
    let handles: Vec<Arc<dyn ContractStore>> = match &sub.second {
        Some(b) => vec![sub.store.clone(), b.clone(), sub.store.clone(), b.clone()],
        None => vec![sub.store.clone(); 4],
    };
    let a = record("acme", "contended");
    let id = a.meta.id.clone();
    put(c, s, &a);
    let race = |ops: &(dyn Fn(usize) -> Vec<WriteOp> + Sync)| -> Vec<CoreResult<Vec<AuditEvent>>> {
        let start = Arc::new(Barrier::new(handles.len()));
        std::thread::scope(|scope| {
            let joins: Vec<_> = handles
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    let start = start.clone();
                    scope.spawn(move || {
                        start.wait();
                        h.commit(ops(i))
                    })
                })
                .collect();
            joins.into_iter().map(|j| j.join().unwrap()).collect()
        })
    };
    let tally = |what: &str, results: Vec<CoreResult<Vec<AuditEvent>>>| {
        let wins = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "{c}: {what}: exactly one winner: {results:?}");
        for r in results.into_iter().filter(|r| r.is_err()) {
            conflict(c, what, r);
        }
    };
    tally(
        "revoking with expect active",
        race(&|i| {
            vec![
                WriteOp::SetStatus {
                    id: id.clone(),
                    version: None,
                    status: AssetStatus::Revoked,
                    expect: Some(AssetStatus::Active),
                },
                WriteOp::Audit(AuditDraft::new(
                    format!("writer-{i}"),
                    AuditAction::MemoryRevoke,
                )),
            ]
        }),
    );
    assert_eq!(status_of(c, s, &id, 1), AssetStatus::Revoked);
    tally(
        "writing version 2",
        race(&|i| put_op(&next(&a, 2, &format!("writer {i}")))),
    );
    assert_eq!(ok(c, "history", s.history(&id)).len(), 2);
    let ev = events(c, s);
    assert_eq!(verify_chain(ev, None), Ok(3), "{c}: losers audited nothing");
}

/// Where the backend is shared (several nodes on one database): a write through one handle is
/// read through the other at once, and both append to one chain.
pub fn a_second_handle_reads_at_once_and_shares_the_chain(make: Factory<'_>) {
    let c = "second_handle";
    let sub = make(None);
    let Some(b) = sub.second.clone() else {
        eprintln!("store contract: {c}: not applicable, the backend is owned by one process");
        return;
    };
    let a = &*sub.store;
    let b = &*b;
    let mut last = None;
    for i in 0..6 {
        let (w, r) = if i % 2 == 0 { (a, b) } else { (b, a) };
        let rec = record("acme", &format!("write {i}"));
        put(c, w, &rec);
        assert_eq!(
            ok(c, "read on the other handle", r.get(&rec.meta.id)),
            Some(rec.clone()),
            "{c}: a write is read on the other handle at once"
        );
        last = Some(rec);
    }
    let rec = last.unwrap();
    ok(
        c,
        "moving the status on one handle",
        b.commit(vec![WriteOp::SetStatus {
            id: rec.meta.id.clone(),
            version: None,
            status: AssetStatus::Revoked,
            expect: Some(AssetStatus::Active),
        }]),
    );
    conflict(
        c,
        "the same move on the other handle",
        a.commit(vec![WriteOp::SetStatus {
            id: rec.meta.id.clone(),
            version: None,
            status: AssetStatus::Revoked,
            expect: Some(AssetStatus::Active),
        }]),
    );
    assert_eq!(events(c, a), events(c, b), "{c}: one log");
    assert_eq!(verify_chain(events(c, a), None), Ok(6));
}
