//! Checks of the operational parts of a store: job runs, context manifests, usage counters and
//! the `Store` supertrait itself (schema version, checkpoint).

use chrono::Duration;
use registry_core::store::StoredManifest;

use crate::{Factory, conflict, ok, put, record, refused, t0};

/// Runs are numbered in start order; a run killed midway stays `running` and does not count as
/// the last good start; the newest come first, of one job or of all.
pub fn job_runs_are_recorded_and_the_last_good_start_found(make: Factory<'_>) {
    let c = "job_runs";
    let sub = make(None);
    let s = &*sub.store;
    assert_eq!(ok(c, "last_ok_start", s.last_ok_start("decay")), None);
    let a = ok(c, "start", s.start_run("decay", t0()));
    let counts = serde_json::json!({ "decayed": 3 });
    ok(
        c,
        "finish",
        s.finish_run(a, t0() + Duration::seconds(2), "ok", &counts, None),
    );
    let b = ok(
        c,
        "start",
        s.start_run("retention", t0() + Duration::seconds(5)),
    );
    let k = ok(
        c,
        "start",
        s.start_run("decay", t0() + Duration::seconds(10)),
    );
    assert!(a < b && b < k, "{c}: run ids grow in start order");
    ok(
        c,
        "finish failed",
        s.finish_run(
            b,
            t0() + Duration::seconds(6),
            "failed",
            &serde_json::json!({}),
            Some("boom"),
        ),
    );
    assert_eq!(
        ok(c, "last_ok_start", s.last_ok_start("decay")),
        Some(t0()),
        "{c}: a run still running is not a good start"
    );
    assert_eq!(ok(c, "last_ok_start", s.last_ok_start("retention")), None);
    let all = ok(c, "recent_runs", s.recent_runs(None, 10));
    let ids: Vec<i64> = all.iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![k, b, a], "{c}: newest first");
    assert_eq!(all[0].outcome, "running");
    assert_eq!(all[0].finished_at, None);
    assert_eq!(all[1].error.as_deref(), Some("boom"));
    assert_eq!(all[2].counts, counts);
    assert_eq!(all[2].finished_at, Some(t0() + Duration::seconds(2)));
    assert_eq!(all[2].started_at, t0());
    let decay = ok(c, "recent_runs", s.recent_runs(Some("decay"), 1));
    assert_eq!(decay.len(), 1);
    assert_eq!(decay[0].id, k, "{c}: of one job, limited");
    if let Some(second) = &sub.second {
        assert_eq!(
            ok(c, "read on the other handle", second.recent_runs(None, 10)),
            all
        );
    }
}

fn manifest(id: &str, principal: &str, secs: i64) -> StoredManifest {
    StoredManifest {
        id: id.into(),
        tenant: "acme".into(),
        principal: principal.into(),
        created_at: t0() + Duration::seconds(secs),
        manifest: serde_json::json!({ "included": [id], "tokens": secs }),
        request: Some(serde_json::json!({ "goal": format!("goal of {id}") })),
        assets: vec!["doc_1".into(), format!("item_{id}")],
    }
}

/// A manifest as a read gives it back: the asset index is written beside it, not in it.
fn stored(m: &StoredManifest) -> StoredManifest {
    StoredManifest {
        assets: vec![],
        ..m.clone()
    }
}

fn ids_with_asset(
    s: &dyn crate::ContractStore,
    principal: Option<&str>,
    asset: &str,
    limit: usize,
) -> (usize, Vec<String>) {
    let (n, ms) = ok(
        "manifests",
        "manifests_with_asset",
        s.manifests_with_asset("acme", principal, asset, limit),
    );
    (n, ms.into_iter().map(|m| m.id).collect())
}

/// A manifest is written once (a second write of its id is a conflict, an UPDATE in SQL is
/// refused), listed newest first, counted and erased with its principal.
pub fn manifests_are_written_once_and_erased_with_their_principal(make: Factory<'_>) {
    let c = "manifests";
    let sub = make(None);
    let s = &*sub.store;
    let m1 = manifest("cm_1", "ann", 1);
    let m2 = manifest("cm_2", "ann", 2);
    let m3 = manifest("cm_3", "bob", 3);
    for m in [&m1, &m2, &m3] {
        ok(c, "put_manifest", s.put_manifest(m));
    }
    assert_eq!(ok(c, "get", s.get_manifest("cm_1")), Some(stored(&m1)));
    assert_eq!(ok(c, "get", s.get_manifest("cm_404")), None);
    let mut changed = m1.clone();
    changed.manifest = serde_json::json!({ "included": [] });
    conflict(c, "writing a manifest id twice", s.put_manifest(&changed));
    refused(
        c,
        &sub,
        "UPDATE context_manifests SET principal = 'eve' WHERE id = 'cm_1'",
        "immutable",
    );
    assert_eq!(ok(c, "get", s.get_manifest("cm_1")), Some(stored(&m1)));
    assert_eq!(
        ok(c, "list", s.list_manifests("acme", None, 10)),
        vec![stored(&m3), stored(&m2), stored(&m1)],
        "{c}: newest first"
    );
    assert_eq!(
        ok(c, "list", s.list_manifests("acme", Some("ann"), 1)),
        vec![stored(&m2)]
    );
    assert_eq!(
        ids_with_asset(s, None, "doc_1", 10),
        (3, vec!["cm_3".into(), "cm_2".into(), "cm_1".into()]),
        "{c}: the asset index, newest first"
    );
    assert_eq!(
        ids_with_asset(s, Some("ann"), "doc_1", 1),
        (2, vec!["cm_2".into()]),
        "{c}: of one principal, limited, counted in all"
    );
    assert_eq!(
        ids_with_asset(s, None, "item_cm_2", 10),
        (1, vec!["cm_2".into()])
    );
    assert_eq!(ids_with_asset(s, None, "doc_404", 10), (0, vec![]));
    assert_eq!(
        ok(
            c,
            "other tenant",
            s.manifests_with_asset("other", None, "doc_1", 10)
        )
        .0,
        0
    );
    assert!(ok(c, "list", s.list_manifests("other", None, 10)).is_empty());
    assert_eq!(ok(c, "count", s.count_manifests("acme", "ann")), 2);
    assert_eq!(ok(c, "erase", s.erase_manifests("acme", "ann")), 2);
    assert_eq!(ok(c, "erase again", s.erase_manifests("acme", "ann")), 0);
    assert_eq!(ok(c, "count", s.count_manifests("acme", "ann")), 0);
    assert_eq!(ok(c, "get", s.get_manifest("cm_1")), None);
    assert_eq!(
        ok(c, "list", s.list_manifests("acme", None, 10)),
        vec![stored(&m3)],
        "{c}: another principal's manifests stay"
    );
    assert_eq!(
        ids_with_asset(s, None, "doc_1", 10),
        (1, vec!["cm_3".into()]),
        "{c}: the asset index is erased with its manifests"
    );
    assert_eq!(ids_with_asset(s, None, "item_cm_1", 10), (0, vec![]));
}

/// Counters beside the versions: retrievals are buffered until flushed and never lost, one
/// vote per voter (the last counts), verification, decay weights and review flags.
pub fn usage_counters_count_once_per_voter_and_flush_every_retrieval(make: Factory<'_>) {
    let c = "usage";
    let sub = make(None);
    let s = &*sub.store;
    let rec = record("acme", "the coffee is on the third floor");
    put(c, s, &rec);
    let id = rec.meta.id.clone();
    let other = "mem_other".to_string();
    assert!(ok(c, "stats", s.stats(std::slice::from_ref(&id))).is_empty());
    ok(
        c,
        "record",
        s.record_retrievals(&[id.clone(), other.clone()], t0()),
    );
    ok(
        c,
        "record",
        s.record_retrievals(std::slice::from_ref(&id), t0() + Duration::seconds(9)),
    );
    ok(
        c,
        "record",
        s.record_retrievals(std::slice::from_ref(&id), t0() + Duration::seconds(4)),
    );
    let buffered = s.usage_pending();
    if buffered {
        assert!(
            ok(c, "flush", s.flush_usage()),
            "{c}: a flush writes what waits"
        );
    } else {
        ok(c, "flush", s.flush_usage());
    }
    assert!(!s.usage_pending(), "{c}: nothing waits after a flush");
    assert!(
        !ok(c, "flush", s.flush_usage()),
        "{c}: an empty flush writes nothing"
    );
    let st = ok(
        c,
        "stats",
        s.stats(&[id.clone(), other.clone(), "mem_none".into()]),
    );
    assert_eq!(st.len(), 2, "{c}: only ids with counters");
    assert_eq!(st[&id].usage_count, 3);
    assert_eq!(
        st[&id].last_retrieved,
        Some(t0() + Duration::seconds(9)),
        "{c}: the latest"
    );
    assert_eq!(st[&other].usage_count, 1);
    assert_eq!(st[&id].decay_weight, 1.0);

    let v = ok(c, "vote", s.vote(&id, "ann", true, t0()));
    assert_eq!((v.helpful, v.harmful), (1, 0));
    let v = ok(c, "vote", s.vote(&id, "bob", true, t0()));
    assert_eq!((v.helpful, v.harmful), (2, 0));
    let v = ok(c, "vote again", s.vote(&id, "ann", false, t0()));
    assert_eq!(
        (v.helpful, v.harmful),
        (1, 1),
        "{c}: the voter's last vote counts, once"
    );
    assert_eq!(v.usage_count, 3, "{c}: a vote keeps the other counters");
    let v = ok(
        c,
        "vote on a fresh id",
        s.vote("mem_fresh", "ann", false, t0()),
    );
    assert_eq!((v.usage_count, v.helpful, v.harmful), (0, 0, 1));

    ok(
        c,
        "mark_verified",
        s.mark_verified(&id, t0() + Duration::seconds(30)),
    );
    ok(
        c,
        "set_weights",
        s.set_weights(&[(id.clone(), 0.25), (other.clone(), 0.5)]),
    );
    ok(c, "set_weights", s.set_weights(&[]));
    let st = ok(c, "stats", s.stats(&[id.clone(), other.clone()]));
    assert_eq!(st[&id].last_verified, Some(t0() + Duration::seconds(30)));
    assert_eq!(st[&id].decay_weight, 0.25);
    assert_eq!(st[&other].decay_weight, 0.5);
    assert_eq!(st[&id].usage_count, 3);

    assert!(ok(c, "under_review", s.under_review(10)).is_empty());
    ok(
        c,
        "set_review",
        s.set_review(&other, Some("retire_proposed")),
    );
    ok(c, "set_review", s.set_review(&id, Some("retire_proposed")));
    let mut both = vec![id.clone(), other.clone()];
    both.sort();
    assert_eq!(
        ok(c, "under_review", s.under_review(10)),
        both,
        "{c}: in id order"
    );
    assert_eq!(ok(c, "under_review", s.under_review(1)), both[..1].to_vec());
    let st = ok(c, "stats", s.stats(std::slice::from_ref(&other)));
    assert_eq!(st[&other].review.as_deref(), Some("retire_proposed"));
    ok(c, "clear review", s.set_review(&other, None));
    assert_eq!(ok(c, "under_review", s.under_review(10)), vec![id.clone()]);
    if let Some(second) = &sub.second {
        assert_eq!(
            ok(
                c,
                "stats on the other handle",
                second.stats(std::slice::from_ref(&id))
            ),
            ok(c, "stats", s.stats(std::slice::from_ref(&id)))
        );
    }
}

/// The store says which schema it is migrated to, and a checkpoint after writes completes.
pub fn the_store_reports_its_schema_and_checkpoints(make: Factory<'_>) {
    let c = "store_meta";
    let sub = make(None);
    let s = &*sub.store;
    assert!(ok(c, "schema_version", s.schema_version()) >= 1);
    put(c, s, &record("acme", "before a checkpoint"));
    let mut done = false;
    for _ in 0..20 {
        if ok(c, "checkpoint", s.checkpoint()) {
            done = true;
            break;
        }
    }
    assert!(done, "{c}: a checkpoint with no reader completes");
}
