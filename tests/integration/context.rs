//! Context packs: layers in order within the budget counted by the real tokenizer, the fixed
//! zone never cut, and a manifest that accounts for every item and omission, with hashes that
//! match what the model was shown.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::*;

const LAYERS: [&str; 5] = ["fixed", "working_memory", "memory", "knowledge", "skills"];

const RULE: &str = "Refunds over 500 EUR need a second approver from finance.";

fn sha(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

fn write_memory(app: &TestApp, key: &Key, session: Option<&str>, body: Value) {
    let mut req = app.post(key, "/v1/memories", &body);
    if let Some(s) = session {
        req = req.header("x-session", s);
    }
    let (s, b) = call(req);
    assert_eq!(s, 200, "{b}");
    assert!(
        ["accepted", "merged"].contains(&b["decision"].as_str().unwrap()),
        "{b}"
    );
}

fn ingest(app: &TestApp, key: &Key, body: Value) {
    let (s, b) = call(app.post(key, "/v1/knowledge/documents", &body));
    assert_eq!(s, 201, "{b}");
}

fn pack(app: &TestApp, key: &Key, session: Option<&str>, body: Value) -> (u16, Value) {
    let mut req = app.post(key, "/v1/context", &body);
    if let Some(s) = session {
        req = req.header("x-session", s);
    }
    call(req)
}

fn pack_ok(app: &TestApp, key: &Key, session: Option<&str>, body: Value) -> Value {
    let (s, b) = pack(app, key, session, body);
    assert_eq!(s, 200, "{b}");
    b
}

/// A tenant with memories of every class, evidence (fresh, stale, long, a copy of the fixed
/// rule) and a released skill; plus another tenant with look-alike content.
fn seeded() -> (TestApp, Key, Key, Key) {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer", "ingest"], &["finance"]);
    let rev = app.key("acme", "rita", &["reviewer"], &[]);
    let other = app.key("globex", "gus", &["writer"], &[]);
    write_memory(
        &app,
        &ann,
        Some("s1"),
        json!({"class": "working", "scope": "session",
               "content": "Current refund ticket R-88 is waiting for the second approver."}),
    );
    write_memory(
        &app,
        &ann,
        None,
        json!({"class": "semantic", "scope": "user", "source": "user_statement",
               "content": "Ann approves refunds for the Nordic region."}),
    );
    write_memory(
        &app,
        &ann,
        None,
        json!({"class": "episodic", "scope": "user", "source": "user_statement",
               "content": "Last quarter a refund of 900 EUR was sent back because only one person approved it."}),
    );
    write_memory(
        &app,
        &ann,
        None,
        json!({"class": "episodic", "scope": "user", "source": "user_statement",
               "content": "The canteen serves mushroom soup on Fridays."}),
    );
    ingest(
        &app,
        &ann,
        json!({"source_id": "policy/refunds.md", "format": "md", "authority": "policy",
               "content": format!("# Refund approvals\n\nRefund approval requires two people when the refund exceeds 500 EUR. The second approver must sit in finance and must not be the requester. {}", "Approvers record the ticket id, the amount, the currency and the reason in the refund ledger before the money moves; auditors sample the ledger each month and ask for the ticket trail. ".repeat(3))}),
    );
    ingest(
        &app,
        &ann,
        json!({"source_id": "policy/rule-copy.txt", "format": "txt", "content": RULE}),
    );
    ingest(
        &app,
        &ann,
        json!({"source_id": "old/refunds-2019.txt", "format": "txt",
               "effective_at": "2019-01-01T00:00:00Z",
               "content": "Refund approval in 2019: one approver suffices for refunds under 1000 EUR."}),
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = crate::skills::make_skill(
        tmp.path(),
        "refund-approval",
        "1.0.0",
        crate::skills::ONE_TEST,
        "Check both approvers before a refund is sent.",
    );
    let (bytes, _) = crate::skills::pack(&dir);
    crate::skills::release(&app, &ann, &rev, &bytes, None);
    write_memory(
        &app,
        &other,
        None,
        json!({"class": "semantic", "scope": "user", "source": "user_statement",
               "content": "Gus approves refunds over 500 EUR for Globex alone."}),
    );
    ingest(
        &app,
        &other,
        json!({"source_id": "globex/refunds.txt", "format": "txt",
               "content": "Globex refunds over 500 EUR need one approver."}),
    );
    (app, ann, rev, other)
}

fn request(budget: usize) -> Value {
    json!({
        "goal": "Decide whether refund R-88 of 900 EUR can be approved and sent.",
        "phase": "review",
        "budget": budget,
        "fixed_rules": [RULE, "Never move money without a ticket id."],
        "query": "refund approval two approvers over 500 EUR",
    })
}

/// Everything a pack must satisfy whatever its budget.
fn check_pack(app: &TestApp, p: &Value) {
    let items = p["items"].as_array().unwrap();
    let m = &p["manifest"];
    let budget = p["budget"].as_u64().unwrap() as usize;
    let used = p["used_tokens"].as_u64().unwrap() as usize;
    assert!(used <= budget, "used {used} > budget {budget}");
    // The real tokenizer agrees with the sum, on the text the model gets.
    let text = p["text"].as_str().unwrap();
    assert_eq!(
        app.state
            .services
            .backends
            .embedder
            .content_tokens(text)
            .unwrap(),
        used
    );
    let sum: u64 = items.iter().map(|i| i["tokens"].as_u64().unwrap()).sum();
    assert_eq!(sum as usize, used);
    assert_eq!(m["used_tokens"], p["used_tokens"]);
    // Layers in order; manifest items match the pack's items one for one.
    let mitems = m["items"].as_array().unwrap();
    assert_eq!(mitems.len(), items.len());
    let mut last = 0;
    for (i, (it, mi)) in items.iter().zip(mitems).enumerate() {
        let layer = LAYERS
            .iter()
            .position(|l| *l == it["layer"].as_str().unwrap())
            .unwrap();
        assert!(layer >= last, "layer order broken at {i}");
        last = layer;
        assert_eq!(mi["position"], i);
        assert_eq!(mi["layer"], it["layer"]);
        assert_eq!(mi["source_id"], it["source_id"]);
        assert_eq!(mi["tokens"], it["tokens"]);
        assert_eq!(mi["transform"], it["transform"]);
        let content = it["content"].as_str().unwrap();
        assert_eq!(mi["content_hash"], sha(content), "hash of item {i}");
        assert_eq!(
            app.state
                .services
                .backends
                .embedder
                .content_tokens(content)
                .unwrap() as u64,
            it["tokens"].as_u64().unwrap()
        );
        for f in ["permission_basis", "selected_reason", "source_type"] {
            assert!(!mi[f].as_str().unwrap().is_empty(), "{f} of item {i}");
        }
        if mi["layer"] != "fixed" {
            for f in ["scope", "version"] {
                assert!(mi[f].is_string(), "{f} of item {i}: {mi}");
            }
        }
    }
    // Every candidate is accounted for, per layer.
    let omitted = m["omitted"].as_array().unwrap();
    for (name, l) in m["layers"].as_object().unwrap() {
        let inc = mitems.iter().filter(|i| i["layer"] == *name).count() as u64;
        let om = omitted.iter().filter(|o| o["layer"] == *name).count() as u64;
        assert_eq!(l["included"].as_u64().unwrap(), inc, "{name}");
        assert_eq!(l["omitted"].as_u64().unwrap(), om, "{name}");
        assert_eq!(l["candidates"].as_u64().unwrap(), inc + om, "{name}");
    }
    for o in omitted {
        assert!(
            [
                "out_of_scope",
                "over_budget",
                "stale",
                "duplicate",
                "low_score"
            ]
            .contains(&o["reason"].as_str().unwrap()),
            "{o}"
        );
        assert!(!o["detail"].as_str().unwrap().is_empty());
    }
    // Nothing of the other tenant anywhere, included or omitted.
    let all = serde_json::to_string(p).unwrap();
    assert!(!all.contains("Globex") && !all.contains("globex"), "{all}");
}

#[test]
fn a_pack_draws_every_layer_in_order_and_its_manifest_accounts_for_everything() {
    let (app, ann, rev, other) = seeded();
    let p = pack_ok(&app, &ann, Some("s1"), request(4000));
    check_pack(&app, &p);
    let items = p["items"].as_array().unwrap();
    let layers: Vec<&str> = items.iter().map(|i| i["layer"].as_str().unwrap()).collect();
    for l in LAYERS {
        assert!(layers.contains(&l), "no {l} item in {layers:?}");
    }
    // Fixed zone first and verbatim.
    assert_eq!(items[0]["content"], RULE);
    assert_eq!(items[0]["transform"], "verbatim");
    let m = &p["manifest"];
    let omitted = m["omitted"].as_array().unwrap();
    let reason_of = |needle: &str| -> Vec<String> {
        omitted
            .iter()
            .filter(|o| o["detail"].is_string())
            .filter(|o| {
                let id = o["source_id"].as_str().unwrap_or("");
                let text = items.iter().any(|i| i["source_id"] == id);
                !text && all_text(&app, o).contains(needle)
            })
            .map(|o| o["reason"].as_str().unwrap().to_string())
            .collect()
    };
    // The document that repeats the fixed rule is a duplicate; the 2019 one is stale; soup is
    // low score.
    assert!(
        reason_of("rule-copy").contains(&"duplicate".to_string()),
        "{m}"
    );
    assert!(
        reason_of("refunds-2019").contains(&"stale".to_string()),
        "{m}"
    );
    assert!(reason_of("soup").contains(&"low_score".to_string()), "{m}");
    // Memory is labelled as past experience; the skill is a reference by digest.
    let mem = items.iter().find(|i| i["layer"] == "memory").unwrap();
    assert!(mem["content"].as_str().unwrap().contains("past experience"));
    let skill = items.iter().find(|i| i["layer"] == "skills").unwrap();
    assert_eq!(skill["transform"], "reference");
    assert!(skill["content"].as_str().unwrap().contains("sha256:"));

    // The stored manifest is the one returned, readable by its owner and a tenant admin only.
    let id = p["id"].as_str().unwrap();
    let (s, stored) = call(app.get(&ann, &format!("/v1/context/{id}")));
    assert_eq!(s, 200, "{stored}");
    assert_eq!(stored, p["manifest"]);
    assert_error(
        call(app.get(&rev, &format!("/v1/context/{id}"))),
        404,
        "NOT_FOUND",
    );
    assert_error(
        call(app.get(&other, &format!("/v1/context/{id}"))),
        404,
        "NOT_FOUND",
    );
    let admin = app.key("acme", "root", &["admin"], &[]);
    assert_eq!(call(app.get(&admin, &format!("/v1/context/{id}"))).0, 200);
    let foreign_admin = app.key("globex", "root", &["admin"], &[]);
    assert_error(
        call(app.get(&foreign_admin, &format!("/v1/context/{id}"))),
        404,
        "NOT_FOUND",
    );

    // The other tenant's pack sees only its own.
    let g = pack_ok(&app, &other, None, request(4000));
    let gtext = g["text"].as_str().unwrap();
    assert!(
        gtext.contains("Globex") && !gtext.contains("Nordic"),
        "{gtext}"
    );

    // Without a session, working memory is skipped and says why.
    let no_session = pack_ok(&app, &ann, None, request(4000));
    check_pack(&app, &no_session);
    assert!(
        no_session["manifest"]["layers"]["working_memory"]["skipped"].is_string(),
        "{}",
        no_session["manifest"]["layers"]
    );
    // Restricting memory to the project level leaves user memories out of scope.
    let mut req = request(4000);
    req["memory_scope"] = json!("tenant");
    let scoped = pack_ok(&app, &ann, None, req);
    check_pack(&app, &scoped);
    let oos = scoped["manifest"]["omitted"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["reason"] == "out_of_scope" && o["layer"] == "memory")
        .count();
    assert!(oos >= 2, "{}", scoped["manifest"]);
    assert!(
        !scoped["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["layer"] == "memory")
    );
}

/// The text behind an omission, found through the asset it names (for assertions only).
fn all_text(app: &TestApp, o: &Value) -> String {
    use registry_core::store::AssetQuery;
    let id = o["source_id"].as_str().unwrap_or("").to_string();
    let recs = app
        .state
        .services
        .backends
        .store
        .find(&AssetQuery {
            ids: Some(vec![id]),
            ..Default::default()
        })
        .unwrap();
    let mut s = o.to_string();
    for r in recs {
        s.push_str(&r.body.to_string());
        s.push_str(r.lookup_key.as_deref().unwrap_or(""));
    }
    s
}

#[test]
fn the_fixed_zone_is_never_cut_and_over_budget_is_refused_with_nothing_stored() {
    let (app, ann, _, _) = seeded();
    let count = || -> i64 {
        app.state
            .services
            .backends
            .store
            .list_manifests("acme", None, 100_000)
            .unwrap()
            .len() as i64
    };
    // Find the fixed zone's size from a pack that fits, then ask for one token less.
    let p = pack_ok(&app, &ann, None, request(4000));
    let fixed = p["manifest"]["fixed_tokens"].as_u64().unwrap();
    let before = count();
    let b = assert_error(
        pack(&app, &ann, None, request(fixed as usize - 1)),
        422,
        "FIXED_ZONE_OVER_BUDGET",
    );
    assert_eq!(b["error"]["details"]["fixed_tokens"], fixed);
    assert_eq!(count(), before, "a refused pack stores no manifest");
    // Exactly the fixed zone: every retrieved candidate is over budget, the fixed zone whole.
    let p = pack_ok(&app, &ann, Some("s1"), request(fixed as usize));
    check_pack(&app, &p);
    assert_eq!(p["used_tokens"], fixed);
    let items = p["items"].as_array().unwrap();
    assert!(items.iter().all(|i| i["layer"] == "fixed"));
    assert_eq!(items[0]["content"], RULE);
    let om = p["manifest"]["omitted"].as_array().unwrap();
    assert!(om.iter().any(|o| o["reason"] == "over_budget"), "{om:?}");

    // Bad requests: 4xx with a code and the field, nothing stored.
    let before = count();
    for (body, field) in [
        (json!({"goal": "", "budget": 100}), "goal"),
        (json!({"goal": "x", "budget": 0}), "budget"),
        (json!({"goal": "x", "budget": 10_000_000}), "budget"),
        (
            json!({"goal": "x", "budget": 100, "fixed_rules": ["  "]}),
            "fixed_rules",
        ),
        (
            json!({"goal": "x", "budget": 100, "min_score": 3.0}),
            "min_score",
        ),
    ] {
        let b = assert_error(pack(&app, &ann, None, body), 422, "VALIDATION_FAILED");
        assert_eq!(b["error"]["details"]["field"], field);
    }
    let (s, _) = pack(
        &app,
        &ann,
        None,
        json!({"goal": "x", "budget": 9, "surprise": 1}),
    );
    assert!((400..500).contains(&s));
    let (s, _) = pack(
        &app,
        &ann,
        None,
        json!({"goal": "x", "budget": 9, "draw_on": ["web"]}),
    );
    assert!((400..500).contains(&s));
    assert_eq!(count(), before);
}

#[test]
fn budgets_from_tiny_to_large_are_kept_and_two_packs_explain_their_difference() {
    let (app, ann, _, _) = seeded();
    let big = pack_ok(&app, &ann, Some("s1"), request(8000));
    let fixed = big["manifest"]["fixed_tokens"].as_u64().unwrap() as usize;
    let mut ids = vec![];
    let mut prev_used = 0;
    let mut saw_truncated = false;
    for extra in [0, 3, 20, 45, 80, 130, 200, 400, 1000, 8000] {
        let p = pack_ok(&app, &ann, Some("s1"), request(fixed + extra));
        check_pack(&app, &p);
        let used = p["used_tokens"].as_u64().unwrap() as usize;
        assert!(used >= prev_used, "a larger budget never shows less");
        prev_used = used;
        for (it, mi) in p["items"]
            .as_array()
            .unwrap()
            .iter()
            .zip(p["manifest"]["items"].as_array().unwrap())
        {
            if it["transform"] == "truncated" {
                saw_truncated = true;
                assert_eq!(it["layer"], "knowledge");
                assert!(mi["selected_reason"].as_str().unwrap().contains("cut from"));
            }
        }
        ids.push(p["id"].as_str().unwrap().to_string());
    }
    assert!(
        saw_truncated,
        "some budget should cut the long policy chunk"
    );
    // The largest budget leaves nothing over budget.
    let last = &big["manifest"]["omitted"];
    assert!(
        !last
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["reason"] == "over_budget"),
        "{last}"
    );

    // Compare the tiniest and the largest: what the large one showed, the tiny one left out
    // over budget.
    let (s, cmp) = call(app.get(
        &ann,
        &format!("/v1/context/{}/compare/{}", ids[0], ids[ids.len() - 1]),
    ));
    assert_eq!(s, 200, "{cmp}");
    let diffs = cmp["differences"].as_array().unwrap();
    assert!(!diffs.is_empty());
    for d in diffs {
        assert_eq!(d["in_a"], "omitted: over_budget", "{d}");
        assert_eq!(d["in_b"], "included", "{d}");
    }
    // The same request twice: no differences.
    let (_, same) = call(app.get(
        &ann,
        &format!(
            "/v1/context/{}/compare/{}",
            ids[9],
            big["id"].as_str().unwrap()
        ),
    ));
    assert_eq!(same["differences"], json!([]), "{same}");
}

/// The README's examples, run as written: Ann's travel preference, the travel policy from
/// `travel.md`, then the pack for "Book a trip to Lyon" with the retrieval query the README
/// gives. The pack holds both, and the manifest says why; with the goal alone as the query the
/// manifest names the relevance floor that left them out (a goal is far, in meaning, from the
/// facts it needs).
#[test]
fn the_readme_lyon_pack_holds_the_travel_memory_and_policy() {
    let app = TestApp::start();
    let key = app.key("acme", "ann", &["writer", "ingest"], &[]);
    write_memory(
        &app,
        &key,
        None,
        json!({"class": "semantic", "content": "Ann prefers trains to flights.",
               "scope": "user", "source": "user_statement"}),
    );
    ingest(
        &app,
        &key,
        json!({"source_id": "policy/travel.md", "format": "md", "content": README_TRAVEL_MD}),
    );
    let p = pack_ok(
        &app,
        &key,
        None,
        json!({"goal": "Book a trip to Lyon",
               "query": "Ann's travel preferences and the travel policy", "budget": 1500}),
    );
    let items = p["manifest"]["items"].as_array().unwrap();
    let in_layer = |layer: &str| {
        p["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["layer"] == layer)
            .map(|i| i["content"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let memory = in_layer("memory");
    assert!(
        memory.iter().any(|c| c.contains("Ann prefers trains")),
        "{memory:?} {items:?}"
    );
    let knowledge = in_layer("knowledge");
    assert!(
        knowledge.iter().any(|c| c.contains("policy/travel.md")),
        "{knowledge:?} {items:?}"
    );
    // The goal alone as the query: both fall below the floor, and the manifest says so.
    let goal_only = pack_ok(
        &app,
        &key,
        None,
        json!({"goal": "Book a trip to Lyon", "budget": 1500}),
    );
    let low: Vec<_> = goal_only["manifest"]["omitted"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["reason"] == "low_score")
        .collect();
    assert!(!low.is_empty(), "{}", goal_only["manifest"]);
}

/// `travel.md` as the README writes it.
const README_TRAVEL_MD: &str = "# Travel policy\n\n## Trains or flights\n\nTrips under 500 km go by train; flights need a manager's approval.\n\n## Hotels\n\nHotel stays are capped at 150 EUR per night.\n";
