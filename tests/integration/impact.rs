//! Change impact, replay and procedures that become skills (issue 32 items 4 and 5): a stored
//! manifest replayed after a document changed names exactly the changed items; the impact of
//! an asset lists the manifests that included it and the skills that cite it; another tenant
//! sees neither; a reviewed procedural memory becomes a draft that goes through the whole
//! lifecycle, an unreviewed or harmful one is refused with its code, and deleting it flags the
//! draft. Real HTTP, store, indexes and model.

use serde_json::{Value, json};

use crate::common::*;
use crate::skills::{record_test_evidence, vpath};

const TRAVEL_V1: &str = "# Travel\n\nFlights under six hours are booked in economy class. \
    The traveller books through the company portal and attaches the receipt to the expense \
    report within ten days.";
const TRAVEL_V2: &str = "# Travel\n\nFlights over four hours may be booked in business class. \
    The traveller books through the company portal and attaches the receipt to the expense \
    report within ten days.";
const HOTEL: &str = "# Hotels\n\nHotel nights for business travel are capped at 180 EUR in \
    capitals and 120 EUR elsewhere; the traveller books through the company portal.";

const PROCEDURE: &str = "To rotate the staging database password: generate a new password in \
    the vault, update the staging application secret, restart the staging workers one by one, \
    then revoke the old password in the vault.";

fn ingest(app: &TestApp, key: &Key, source_id: &str, version: &str, content: &str) -> Value {
    let (s, b) = call(app.post(
        key,
        "/v1/knowledge/documents",
        &json!({"source_id": source_id, "version": version, "format": "md", "content": content}),
    ));
    assert!(s == 201 || s == 200, "{s} {b}");
    b
}

fn travel_pack(app: &TestApp, key: &Key) -> Value {
    let (s, b) = call(app.post(
        key,
        "/v1/context",
        &json!({
            "goal": "Book a flight and a hotel for a business trip to Oslo.",
            "budget": 2000,
            "fixed_rules": ["Book through the company portal."],
            "query": "flights booked class hours hotel nights capped traveller portal",
            "draw_on": ["knowledge"],
            "min_score": 0.0,
        }),
    ));
    assert_eq!(s, 200, "{b}");
    b
}

fn replay(app: &TestApp, key: &Key, id: &str) -> (u16, Value) {
    call(app.post(key, &format!("/v1/context/{id}/replay"), &json!({})))
}

fn impact(app: &TestApp, key: &Key, id: &str) -> (u16, Value) {
    call(app.get(key, &format!("/v1/assets/{id}/impact")))
}

fn chunk_ids(pack: &Value, document: &str) -> Vec<String> {
    pack["manifest"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["parent_id"] == document)
        .map(|i| i["source_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn replay_after_a_document_changes_names_exactly_the_changed_items() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer", "ingest"], &[]);
    let travel = ingest(&app, &ann, "policy/travel.md", "2023", TRAVEL_V1);
    let travel_id = travel["document_id"].as_str().unwrap().to_string();
    let hotel = ingest(&app, &ann, "policy/hotels.md", "2023", HOTEL);
    let hotel_id = hotel["document_id"].as_str().unwrap().to_string();
    let pack = travel_pack(&app, &ann);
    let pack_id = pack["id"].as_str().unwrap().to_string();
    let old_travel = chunk_ids(&pack, &travel_id);
    let old_hotel = chunk_ids(&pack, &hotel_id);
    assert_eq!(old_travel.len(), 1, "{pack}");
    assert_eq!(old_hotel.len(), 1, "{pack}");
    let items = pack["manifest"]["items"].as_array().unwrap().len();

    // Nothing changed yet: the replay finds every item unchanged.
    let (s, r) = replay(&app, &ann, &pack_id);
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["manifest_id"], pack_id.as_str());
    assert_eq!(r["changes"], json!([]), "{r}");
    assert_eq!(r["unchanged"], items, "{r}");

    ingest(&app, &ann, "policy/travel.md", "2024", TRAVEL_V2);
    let (s, r) = replay(&app, &ann, &pack_id);
    assert_eq!(s, 200, "{r}");
    let changes = r["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "exactly the travel chunk changed: {r}");
    let c = &changes[0];
    assert_eq!(c["change"], "changed", "{c}");
    assert_eq!(c["source_type"], "knowledge_chunk", "{c}");
    assert_eq!(c["before"]["source_id"], old_travel[0].as_str(), "{c}");
    assert_ne!(c["after"]["source_id"], old_travel[0].as_str(), "{c}");
    assert_ne!(
        c["before"]["asset_content_hash"], c["after"]["asset_content_hash"],
        "{c}"
    );
    let reasons: Vec<&str> = c["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(reasons.contains(&"content changed"), "{reasons:?}");
    assert_eq!(r["unchanged"], items - 1, "{r}");
    // The new chunk is the new version's own.
    let (_, doc) = call(app.get(&ann, &format!("/v1/knowledge/documents/{travel_id}")));
    let new_chunks: Vec<&str> = doc["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(
        new_chunks.contains(&c["after"]["source_id"].as_str().unwrap()),
        "{doc}"
    );

    // Impact of the document: the manifest, with the item that stood for it.
    let (s, i) = impact(&app, &ann, &travel_id);
    assert_eq!(s, 200, "{i}");
    assert_eq!(i["asset"]["id"], travel_id.as_str());
    assert_eq!(i["manifests"]["total"], 1, "{i}");
    let m = &i["manifests"]["recent"][0];
    assert_eq!(m["id"], pack_id.as_str());
    assert_eq!(m["replayable"], true);
    assert_eq!(m["items"].as_array().unwrap().len(), 1, "{m}");
    assert_eq!(m["items"][0]["source_id"], old_travel[0].as_str());
    // Its chunks are derived from it.
    assert!(
        i["derived"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["relation"] == "chunk_of" && d["kind"] == "chunk"),
        "{i}"
    );
    // Only a skill version is run: a document's impact lists no runs.
    assert_eq!(i["runs"], json!([]));
    // A bad limit is refused with the field.
    let (s, e) = call(app.get(&ann, &format!("/v1/assets/{travel_id}/impact?limit=101")));
    let e = assert_error((s, e), 422, "VALIDATION_FAILED");
    assert_eq!(e["error"]["details"]["field"], "limit");
}

#[test]
fn another_tenant_cannot_see_impact_or_replay() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer", "ingest"], &[]);
    let bob = app.key("acme", "bob", &["writer"], &[]);
    let gus = app.key("globex", "gus", &["writer", "ingest"], &[]);
    let travel = ingest(&app, &ann, "policy/travel.md", "2023", TRAVEL_V1);
    let travel_id = travel["document_id"].as_str().unwrap().to_string();
    let pack = travel_pack(&app, &ann);
    let pack_id = pack["id"].as_str().unwrap().to_string();

    // Another tenant: the asset and the pack answer exactly like missing ones.
    let missing = impact(&app, &gus, "doc_0000000000000000000000000000");
    let theirs = impact(&app, &gus, &travel_id);
    assert_eq!(missing.0, 404);
    assert_eq!(theirs.0, 404);
    assert_eq!(theirs.1["error"]["code"], missing.1["error"]["code"]);
    assert_eq!(theirs.1["error"]["code"], "NOT_FOUND");
    let missing = replay(&app, &gus, "ctx_00000000000000000000000000000000");
    let theirs = replay(&app, &gus, &pack_id);
    assert_eq!(missing.0, 404);
    assert_eq!(theirs.0, 404);
    assert_eq!(theirs.1["error"]["code"], missing.1["error"]["code"]);
    // The same tenant's other user sees the document but not ann's manifest, and cannot
    // replay it.
    let (s, i) = impact(&app, &bob, &travel_id);
    assert_eq!(s, 200, "{i}");
    assert_eq!(i["manifests"]["total"], 0, "{i}");
    assert_error(replay(&app, &bob, &pack_id), 404, "NOT_FOUND");
    // Gus's own look-alike pack does not count in ann's impact.
    ingest(&app, &gus, "policy/travel.md", "2023", TRAVEL_V1);
    travel_pack(&app, &gus);
    let (s, i) = impact(&app, &ann, &travel_id);
    assert_eq!(s, 200, "{i}");
    assert_eq!(i["manifests"]["total"], 1, "{i}");
}

fn write_procedure(app: &TestApp, key: &Key, content: &str) -> Value {
    let (s, b) = call(app.post(
        key,
        "/v1/memories",
        &json!({"class": "procedural", "scope": "tenant", "source": "user_statement",
                "content": content,
                "applicability": ["the staging database password must be rotated"]}),
    ));
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["decision"], "accepted", "{b}");
    b
}

fn draft(app: &TestApp, key: &Key, ids: &[&str], name: &str) -> (u16, Value) {
    call(app.post(
        key,
        "/v1/skills/drafts/from-memory",
        &json!({"memory_ids": ids, "name": name}),
    ))
}

fn vote(app: &TestApp, key: &Key, id: &str, outcome: &str) {
    let (s, b) = call(app.post(
        key,
        &format!("/v1/memories/{id}/feedback"),
        &json!({"outcome": outcome}),
    ));
    assert_eq!(s, 200, "{b}");
}

/// Ann's procedure, confirmed by the reviewer Rita.
fn confirmed_procedure(app: &TestApp) -> (Key, Key, String) {
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let rita = app.key("acme", "rita", &["reviewer"], &[]);
    let w = write_procedure(app, &ann, PROCEDURE);
    let mem = w["id"].as_str().unwrap().to_string();
    let (s, b) = call(app.post(&rita, &format!("/v1/memories/{mem}/confirm"), &json!({})));
    assert_eq!(s, 200, "{b}");
    (ann, rita, mem)
}

#[test]
fn a_procedural_memory_becomes_a_draft_that_passes_the_whole_lifecycle() {
    let app = TestApp::start();
    let (ann, rita, mem) = confirmed_procedure(&app);
    let hash = app
        .state
        .services
        .backends
        .store
        .get(&mem)
        .unwrap()
        .unwrap()
        .meta
        .content_hash;

    // A pack that includes the procedure, so its impact lists a manifest.
    let (s, pack) = call(app.post(
        &ann,
        "/v1/context",
        &json!({"goal": "Rotate the staging database password.", "budget": 2000,
                "draw_on": ["memory"], "min_score": 0.0}),
    ));
    assert_eq!(s, 200, "{pack}");
    assert!(
        pack["manifest"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["source_id"] == mem.as_str()),
        "{pack}"
    );

    let (s, d) = draft(&app, &ann, &[&mem], "rotate-staging-password");
    assert_eq!(s, 201, "{d}");
    let v = &d["draft"];
    assert_eq!(v["name"], "rotate-staging-password");
    assert_eq!(v["version"], "0.1.0");
    assert_eq!(v["state"], "draft");
    assert_eq!(v["scan"]["verdict"], "pass", "{v}");
    assert_eq!(
        d["evidence"],
        json!([{"memory_id": mem, "version": 1, "content_hash": hash}])
    );
    // The same request again is the same draft (same digest).
    let (s, again) = draft(&app, &ann, &[&mem], "rotate-staging-password");
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["draft"]["digest"], v["digest"]);

    // The package validates strictly, and its SKILL.md carries the procedure, when to use it
    // and the evidence by id and hash.
    let resp = app
        .get(&ann, &vpath("rotate-staging-password", "0.1.0", "archive"))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let bytes = resp.bytes().unwrap();
    let archive = skills_sdk::read_archive(&bytes, &skills_sdk::ArchiveLimits::default()).unwrap();
    let report = skills_sdk::validate_archive(&archive, skills_sdk::ValidationMode::Strict);
    assert!(report.is_valid(), "{:?}", report.diagnostics);
    let (s, ins) = call(app.get(
        &ann,
        &vpath("rotate-staging-password", "0.1.0", "instructions"),
    ));
    assert_eq!(s, 200, "{ins}");
    let text = ins["instructions"].as_str().unwrap();
    assert!(
        text.contains("revoke the old password in the vault"),
        "{text}"
    );
    assert!(text.contains("## When to use"), "{text}");
    assert!(
        text.contains("the staging database password must be rotated"),
        "{text}"
    );
    assert!(text.contains(&mem) && text.contains(&hash), "{text}");

    // The memory's impact: the manifest that included it and the draft that cites it.
    let (s, i) = impact(&app, &ann, &mem);
    assert_eq!(s, 200, "{i}");
    assert_eq!(i["manifests"]["total"], 1, "{i}");
    assert_eq!(i["manifests"]["recent"][0]["id"], pack["id"]);
    let citing = i["citing"].as_array().unwrap();
    assert_eq!(citing.len(), 1, "{i}");
    assert_eq!(citing[0]["id"], v["id"]);
    assert_eq!(citing[0]["relation"], "cites");
    assert_eq!(citing[0]["skill"], "rotate-staging-password@0.1.0");

    // Test evidence from a tester beside the author (or a reviewer's waiver), review by
    // another key, promote.
    record_test_evidence(&app, &ann, &rita, v, &|r| r);
    let (s, b) = call(app.post(
        &rita,
        &vpath("rotate-staging-password", "0.1.0", "review"),
        &json!({"decision": "approve", "comment": "matches the runbook"}),
    ));
    assert_eq!(s, 200, "{b}");
    let (s, b) = call(app.post(
        &ann,
        &vpath("rotate-staging-password", "0.1.0", "promote"),
        &json!({}),
    ));
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["state"], "published");

    // A harness reports a run of the release: the version's impact lists it; another
    // tenant's key cannot see the version at all.
    let (s, r) = call(app.post(
        &ann,
        &vpath("rotate-staging-password", "0.1.0", "runs"),
        &json!({"run_id": "run-1", "digest": v["digest"], "outcome": "failure", "duration_ms": 40}),
    ));
    assert_eq!(s, 200, "{r}");
    let vid = v["id"].as_str().unwrap();
    let (s, i) = impact(&app, &ann, vid);
    assert_eq!(s, 200, "{i}");
    assert_eq!(i["asset"]["skill"], "rotate-staging-password@0.1.0");
    let runs = i["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{i}");
    assert_eq!(runs[0]["run_id"], "run-1");
    assert_eq!(runs[0]["outcome"], "failure");
    assert_eq!(runs[0]["digest"], v["digest"]);
    let gus = app.key("globex", "gus", &["writer"], &[]);
    assert_error(impact(&app, &gus, vid), 404, "NOT_FOUND");
}

#[test]
fn an_unconfirmed_or_harmful_memory_is_refused_with_a_code() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let voters: Vec<Key> = ["vic", "val", "vera"]
        .iter()
        .map(|u| app.key("acme", u, &["writer"], &[]))
        .collect();
    let gus = app.key("globex", "gus", &["writer"], &[]);
    let w = write_procedure(&app, &ann, PROCEDURE);
    let mem = w["id"].as_str().unwrap().to_string();

    // Active, never reviewed, no votes.
    let e = assert_error(
        draft(&app, &ann, &[&mem], "rotate"),
        422,
        "MEMORY_NOT_ELIGIBLE",
    );
    assert_eq!(e["error"]["details"]["reason"], "not_confirmed", "{e}");
    assert_eq!(e["error"]["details"]["field"], "memory_ids[0]", "{e}");
    // Two helpful votes are not enough (the default asks for three).
    for v in &voters[..2] {
        vote(&app, v, &mem, "helpful");
    }
    let e = assert_error(
        draft(&app, &ann, &[&mem], "rotate"),
        422,
        "MEMORY_NOT_ELIGIBLE",
    );
    assert_eq!(e["error"]["details"]["reason"], "not_confirmed", "{e}");
    vote(&app, &voters[2], &mem, "helpful");
    let (s, d) = draft(&app, &ann, &[&mem], "rotate");
    assert_eq!(s, 201, "{d}");
    // One harmful vote and the memory no longer qualifies.
    vote(&app, &voters[0], &mem, "harmful");
    let e = assert_error(
        draft(&app, &ann, &[&mem], "rotate-again"),
        422,
        "MEMORY_NOT_ELIGIBLE",
    );
    assert_eq!(e["error"]["details"]["reason"], "harmful_feedback", "{e}");

    // A fact is not a procedure.
    let (s, fact) = call(app.post(
        &ann,
        "/v1/memories",
        &json!({"class": "semantic", "scope": "tenant", "source": "user_statement",
                "content": "The staging database runs PostgreSQL 16."}),
    ));
    assert_eq!(s, 200, "{fact}");
    let fact = fact["id"].as_str().unwrap();
    let e = assert_error(
        draft(&app, &ann, &[&mem, fact], "rotate-fact"),
        422,
        "MEMORY_NOT_ELIGIBLE",
    );
    assert_eq!(e["error"]["details"]["reason"], "harmful_feedback", "{e}");
    let e = assert_error(
        draft(&app, &ann, &[fact], "rotate-fact"),
        422,
        "MEMORY_NOT_ELIGIBLE",
    );
    assert_eq!(e["error"]["details"]["reason"], "not_procedural", "{e}");

    // Another tenant's memory answers like a missing one.
    let theirs = draft(&app, &gus, &[&mem], "rotate");
    let missing = draft(
        &app,
        &gus,
        &["mem_00000000000000000000000000000000"],
        "rotate",
    );
    assert_eq!(theirs.0, 404, "{}", theirs.1);
    assert_eq!(missing.0, 404, "{}", missing.1);
    assert_eq!(theirs.1["error"]["code"], missing.1["error"]["code"]);
    // Bad requests name their field.
    let e = assert_error(draft(&app, &ann, &[], "rotate"), 422, "VALIDATION_FAILED");
    assert_eq!(e["error"]["details"]["field"], "memory_ids");
}

#[test]
fn deleting_the_memory_flags_the_draft() {
    let app = TestApp::start();
    let (ann, _rita, mem) = confirmed_procedure(&app);
    let (s, d) = draft(&app, &ann, &[&mem], "rotate-staging-password");
    assert_eq!(s, 201, "{d}");
    let skill_id = d["draft"]["id"].as_str().unwrap();

    let (s, b) = call(app.delete(&ann, &format!("/v1/memories/{mem}?level=purged")));
    assert_eq!(s, 200, "{b}");
    let flagged = b["receipt"]["flagged"].as_array().unwrap();
    assert_eq!(flagged.len(), 1, "{b}");
    assert_eq!(flagged[0]["id"], skill_id);
    assert_eq!(flagged[0]["cites"], mem.as_str());
    // The draft stays (flagged, not deleted), and the memory's impact is gone with it.
    let (s, v) = call(app.get(&ann, "/v1/skills/rotate-staging-password/versions/0.1.0"));
    assert_eq!(s, 200, "{v}");
    assert_error(impact(&app, &ann, &mem), 404, "NOT_FOUND");
}
