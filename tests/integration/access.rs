//! Who may change what (issue #31, items 2, 3, 6, 8, 9): each test performs the attack through
//! the door it was found on, then through its twin, and asserts the refusal or the absence. The
//! rule behind every door is one function, `registry_core::access`.

use serde_json::{Value, json};

use crate::common::*;
use crate::harness::mcp_http_with;

fn write(app: &TestApp, key: &Key, body: Value) -> Value {
    let (s, b) = call(app.post(key, "/v1/memories", &body));
    assert_eq!(s, 200, "{b}");
    b
}

fn write_in(app: &TestApp, key: &Key, project: &str, body: Value) -> Value {
    let (s, b) = call(
        app.post(key, "/v1/memories", &body)
            .header("X-Project", project),
    );
    assert_eq!(s, 200, "{b}");
    b
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

fn fact(subject: &str, attribute: &str, value: &str, source: &str) -> Value {
    json!({"class": "semantic", "scope": "tenant", "subject": subject, "attribute": attribute,
           "value": value, "source": source,
           "content": format!("The {attribute} of {subject} is {value}")})
}

/// A console session for `key`: the cookie header value.
fn console(app: &TestApp, key: &Key) -> String {
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let resp = client
        .post(app.url("/ui/sign-in"))
        .form(&[("key", key.secret.as_str())])
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 303);
    let cookie = resp.headers()["set-cookie"].to_str().unwrap();
    cookie.split(';').next().unwrap().to_string()
}

fn console_get(app: &TestApp, cookie: &str, path: &str) -> (u16, String) {
    let resp = reqwest::blocking::Client::new()
        .get(app.url(path))
        .header("Cookie", cookie)
        .send()
        .unwrap();
    (resp.status().as_u16(), resp.text().unwrap())
}

// 2 ------------------------------------------------------------------------------------------

#[test]
fn item2_self_erasure_purges_only_the_users_own_and_lists_nothing_it_cannot_read() {
    let app = TestApp::start();
    let prod = app.key("acme", "prod", &["writer"], &[]);
    let bob = app.key("acme", "bob", &["writer"], &[]);
    let admin = app.key("acme", "root", &["admin"], &[]);
    let hana = app.key_with("acme", "hana", &["writer"], |c| {
        c.clearance = Some("confidential".into());
    });
    let mia = app.project_key("acme", "mia", &["writer"], &["mergers"]);
    // Other people's records about "prod": a private note, an admin's authoritative fact, a
    // confidential tenant memory, a memory in a project prod is not in.
    let note = id(&write(
        &app,
        &bob,
        json!({"class": "semantic", "subject": "prod", "attribute": "retro",
               "value": "rude", "content": "Private note: prod was rude in the retro"}),
    ));
    let authoritative = id(&write(
        &app,
        &admin,
        fact("prod", "region", "eu-west-1", "system"),
    ));
    let confidential = id(&write(
        &app,
        &hana,
        json!({"class": "semantic", "scope": "tenant", "subject": "prod",
               "attribute": "review", "value": "pip", "sensitivity": "confidential",
               "content": "prod is on a performance improvement plan"}),
    ));
    let in_project = id(&write_in(
        &app,
        &mia,
        "mergers",
        json!({"class": "semantic", "scope": "project", "subject": "prod",
               "attribute": "questions", "value": "merger", "content": "prod asked about the merger twice"}),
    ));
    let others = [&note, &authoritative, &confidential, &in_project];
    // What is prod's own: its user scope and a tenant memory it wrote about itself.
    let own = id(&write(
        &app,
        &prod,
        json!({"class": "semantic", "content": "I prefer the night shift"}),
    ));
    let own_about = id(&write(
        &app,
        &prod,
        json!({"class": "semantic", "scope": "tenant", "subject": "prod",
               "attribute": "on call", "value": "Fridays", "content": "prod is on call on Fridays"}),
    ));

    let (s, plan) = call(app.delete(&prod, "/v1/subjects/prod?dry_run=true"));
    assert_eq!(s, 200, "{plan}");
    let purge = ids(&plan["purge"]);
    assert!(purge.contains(&own) && purge.contains(&own_about), "{plan}");
    assert!(ids(&plan["about_subject_for_review"]).is_empty(), "{plan}");
    let text = plan.to_string();
    for other in others {
        assert!(
            !text.contains(other.as_str()),
            "the dry run names {other}: {plan}"
        );
    }

    let (s, r) = call(app.delete(&prod, "/v1/subjects/prod"));
    assert_eq!(s, 200, "{r}");
    assert_error(
        call(app.get(&prod, &format!("/v1/memories/{own}"))),
        404,
        "NOT_FOUND",
    );
    for (key, other, project) in [
        (&bob, &note, None),
        (&admin, &authoritative, None),
        (&hana, &confidential, None),
        (&mia, &in_project, Some("mergers")),
    ] {
        let mut req = app.get(key, &format!("/v1/memories/{other}"));
        if let Some(x) = project {
            req = req.header("X-Project", x);
        }
        let (s, m) = call(req);
        assert_eq!(
            (s, m["memory"]["status"].as_str()),
            (200, Some("active")),
            "{other} survives: {m}"
        );
    }

    // The admin's plan for the same subject: others' records about it go to review, unpurged.
    let (s, plan) = call(app.delete(&admin, "/v1/subjects/prod?dry_run=true"));
    assert_eq!(s, 200, "{plan}");
    let review = ids(&plan["about_subject_for_review"]);
    assert!(
        review.contains(&authoritative) && review.contains(&confidential),
        "{plan}"
    );
    let purge = ids(&plan["purge"]);
    assert!(others.iter().all(|o| !purge.contains(o)), "{plan}");
}

// 3 ------------------------------------------------------------------------------------------

#[test]
fn item3_a_writer_neither_versions_nor_deletes_another_owners_document() {
    let app = TestApp::start();
    let pipeline = app.key("acme", "pipeline", &["writer", "ingest"], &[]);
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let admin = app.key("acme", "root", &["admin"], &[]);
    let gus = app.key("globex", "gus", &["writer"], &[]);
    let reader = app.key("acme", "rita", &["reader"], &[]);
    let policy = "# Travel policy\n\nBusiness class needs the approval of a director.";
    let (s, d) = call(app.post(
        &pipeline,
        "/v1/knowledge/documents",
        &json!({
        "source_id": "travel-policy.md", "format": "md", "authority": "policy",
        "content": policy}),
    ));
    assert_eq!(s, 201, "{d}");
    let doc = d["document_id"].as_str().unwrap().to_string();

    // The takeover: a new version by a writer who does not own it.
    assert_error(
        call(app.post(&ann, "/v1/knowledge/documents", &json!({
            "source_id": "travel-policy.md", "format": "md", "version": "v2",
            "content": "# Travel policy\n\nAny employee may book business class without approval."}))),
        403,
        "FORBIDDEN",
    );
    // Its twin: deleting it.
    assert_error(
        call(app.delete(&ann, &format!("/v1/knowledge/documents/{doc}"))),
        403,
        "FORBIDDEN",
    );
    // Another tenant's document answers like a missing one.
    assert_error(
        call(app.delete(&gus, &format!("/v1/knowledge/documents/{doc}"))),
        404,
        "NOT_FOUND",
    );
    let (s, got) = call(app.get(&reader, &format!("/v1/knowledge/documents/{doc}")));
    assert_eq!(s, 200, "{got}");
    assert_eq!(got["document"]["version"], 1, "{got}");
    assert_eq!(got["document"]["authority"], "policy", "{got}");
    assert!(!got.to_string().contains("without approval"), "{got}");

    // The owner's new version keeps the authority it does not name, and may not lower it.
    let (s, v2) = call(app.post(
        &pipeline,
        "/v1/knowledge/documents",
        &json!({
        "source_id": "travel-policy.md", "format": "md", "version": "v2",
        "content": "# Travel policy\n\nBusiness class needs the approval of a vice president."}),
    ));
    assert_eq!(
        (s, v2["status"].as_str()),
        (201, Some("new_version")),
        "{v2}"
    );
    let (_, got) = call(app.get(&reader, &format!("/v1/knowledge/documents/{doc}")));
    assert_eq!(got["document"]["authority"], "policy", "{got}");
    assert_error(
        call(app.post(
            &pipeline,
            "/v1/knowledge/documents",
            &json!({
            "source_id": "travel-policy.md", "format": "md", "version": "v3",
            "authority": "reference", "content": "# Travel policy\n\nAnything goes."}),
        )),
        403,
        "FORBIDDEN",
    );
    // An admin of the scope may do both.
    let (s, v3) = call(app.post(
        &admin,
        "/v1/knowledge/documents",
        &json!({
        "source_id": "travel-policy.md", "format": "md", "version": "v3",
        "authority": "reference", "owner": "pipeline",
        "content": "# Travel policy\n\nFly economy."}),
    ));
    assert_eq!(
        (s, v3["status"].as_str()),
        (201, Some("new_version")),
        "{v3}"
    );
    let (s, r) = call(app.delete(&admin, &format!("/v1/knowledge/documents/{doc}")));
    assert_eq!(s, 200, "{r}");
}

/// Item 3's other twin: a new version that names no authority keeps its document's, and keeping
/// one above reference is giving it, which needs an admin or ingest key as naming it does (found:
/// an admin filed a policy in a writer's name; the writer's new text, naming no authority, was
/// served as policy with authoritative trust).
#[test]
fn item3_a_writers_new_version_never_inherits_an_authority_it_may_not_give() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let admin = app.key("acme", "root", &["admin"], &[]);
    let reader = app.key("acme", "rita", &["reader"], &[]);
    let (s, d) = call(app.post(
        &admin,
        "/v1/knowledge/documents",
        &json!({
        "source_id": "expenses.md", "format": "md", "authority": "policy", "owner": "ann",
        "content": "# Expenses\n\nMeals above 50 EUR need a receipt and a manager's approval."}),
    ));
    assert_eq!(s, 201, "{d}");
    let doc = d["document_id"].as_str().unwrap().to_string();
    // The same content posted again (a re-sync) is answered unchanged, as before.
    let (s, same) = call(app.post(
        &ann,
        "/v1/knowledge/documents",
        &json!({
        "source_id": "expenses.md", "format": "md",
        "content": "# Expenses\n\nMeals above 50 EUR need a receipt and a manager's approval."}),
    ));
    assert_eq!(
        (s, same["status"].as_str()),
        (200, Some("unchanged")),
        "{same}"
    );
    // Naming it, and keeping it by naming nothing, are refused alike.
    for authority in [Some("policy"), None] {
        let mut body = json!({
            "source_id": "expenses.md", "format": "md", "version": "v2",
            "content": "# Expenses\n\nMeals of any price are approved without a receipt."});
        if let Some(a) = authority {
            body["authority"] = json!(a);
        }
        let e = assert_error(
            call(app.post(&ann, "/v1/knowledge/documents", &body)),
            403,
            "FORBIDDEN",
        );
        assert!(
            e["error"]["message"].as_str().unwrap().contains("policy"),
            "{e}"
        );
    }
    let (_, got) = call(app.get(&reader, &format!("/v1/knowledge/documents/{doc}")));
    assert_eq!(got["document"]["version"], 1, "{got}");
    assert!(!got.to_string().contains("without a receipt"), "{got}");
    // Nor may she lower it to reference to get her text in.
    assert_error(
        call(app.post(
            &ann,
            "/v1/knowledge/documents",
            &json!({
            "source_id": "expenses.md", "format": "md", "version": "v2", "authority": "reference",
            "content": "# Expenses\n\nMeals of any price are approved without a receipt."}),
        )),
        403,
        "FORBIDDEN",
    );
    // A reference document of her own she continues without naming its authority.
    let (s, _) = call(app.post(
        &ann,
        "/v1/knowledge/documents",
        &json!({
        "source_id": "notes.md", "format": "md", "content": "# Notes\n\nFirst."}),
    ));
    assert_eq!(s, 201);
    let (s, v2) = call(app.post(
        &ann,
        "/v1/knowledge/documents",
        &json!({
        "source_id": "notes.md", "format": "md", "version": "v2", "content": "# Notes\n\nSecond."}),
    ));
    assert_eq!(
        (s, v2["status"].as_str()),
        (201, Some("new_version")),
        "{v2}"
    );
    // The admin continues the policy, naming nothing.
    let (s, v2) = call(app.post(
        &admin,
        "/v1/knowledge/documents",
        &json!({
        "source_id": "expenses.md", "format": "md", "version": "v2", "owner": "ann",
        "content": "# Expenses\n\nMeals above 60 EUR need a receipt."}),
    ));
    assert_eq!(
        (s, v2["status"].as_str()),
        (201, Some("new_version")),
        "{v2}"
    );
    let (_, got) = call(app.get(&reader, &format!("/v1/knowledge/documents/{doc}")));
    assert_eq!(got["document"]["authority"], "policy", "{got}");
}

/// The twin of item 3 for a document its own ACL keeps from whoever answers for it (an admin's
/// ingest pipeline filing under `group:hr`): its owner and its admins know it exists, continue
/// it and delete it, without reading it; anyone else outside the ACL finds nothing.
#[test]
fn item3_a_document_outside_its_own_acl_is_governed_by_its_owner_and_admins_unread() {
    let app = TestApp::start();
    let pipeline = app.key("acme", "pipeline", &["writer", "ingest"], &[]);
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let admin = app.key("acme", "root", &["admin"], &[]);
    let hana = app.key("acme", "hana", &["reader"], &["hr"]);
    let gadmin = app.key("globex", "groot", &["admin"], &[]);
    let ingest = |k: &Key, version: &str, text: &str| {
        call(app.post(
            k,
            "/v1/knowledge/documents",
            &json!({"source_id": "hr-handbook.md", "format": "md", "version": version,
                "acl": ["group:hr"], "content": text}),
        ))
    };
    let (s, d) = ingest(
        &pipeline,
        "v1",
        "# Handbook\n\nSalary bands are reviewed in March.",
    );
    assert_eq!(s, 201, "{d}");
    let doc = d["document_id"].as_str().unwrap().to_string();
    let (s, got) = call(app.get(&hana, &format!("/v1/knowledge/documents/{doc}")));
    assert_eq!(s, 200, "{got}");

    // Owner and admin: its metadata, never its content.
    for k in [&pipeline, &admin] {
        let (s, a) = call(app.get(k, &format!("/v1/assets/{doc}")));
        assert_eq!(
            (s, a["meta"]["id"].as_str()),
            (200, Some(doc.as_str())),
            "{a}"
        );
        assert!(!a.to_string().contains("Salary"), "{a}");
        assert_error(
            call(app.get(k, &format!("/v1/knowledge/documents/{doc}"))),
            404,
            "NOT_FOUND",
        );
        let (s, l) = call(app.get(k, "/v1/assets?kind=document"));
        assert_eq!(s, 200, "{l}");
        assert!(l.to_string().contains(&doc), "{l}");
    }
    // Its owner continues it: a new version of the same document, not a second one.
    let (s, v2) = ingest(
        &pipeline,
        "v2",
        "# Handbook\n\nSalary bands are reviewed in April.",
    );
    assert_eq!(
        (s, v2["status"].as_str(), v2["document_id"].as_str()),
        (201, Some("new_version"), Some(doc.as_str())),
        "{v2}"
    );
    // Another writer outside the ACL: the document does not exist for it, at every door.
    for (path, k) in [
        (format!("/v1/assets/{doc}"), &ann),
        (format!("/v1/knowledge/documents/{doc}"), &ann),
        (format!("/v1/assets/{doc}"), &gadmin),
    ] {
        assert_error(call(app.get(k, &path)), 404, "NOT_FOUND");
    }
    for k in [&ann, &gadmin] {
        assert_error(
            call(app.delete(k, &format!("/v1/knowledge/documents/{doc}"))),
            404,
            "NOT_FOUND",
        );
    }
    let (s, l) = call(app.get(&ann, "/v1/assets?kind=document"));
    assert_eq!(s, 200, "{l}");
    assert!(!l.to_string().contains(&doc), "{l}");
    // Its ingest under the same source id starts a document of its own and leaves this one be.
    let (s, mine) = ingest(&ann, "v1", "# Handbook\n\nMy own notes.");
    assert_eq!(
        (s, mine["status"].as_str()),
        (201, Some("created")),
        "{mine}"
    );
    assert_ne!(mine["document_id"].as_str(), Some(doc.as_str()), "{mine}");
    let (_, got) = call(app.get(&hana, &format!("/v1/knowledge/documents/{doc}")));
    assert!(got.to_string().contains("April"), "{got}");

    // An admin continues a document it filed into another user's scope (off its own path).
    let filed = |version: &str| {
        call(app.post(
            &admin,
            "/v1/knowledge/documents",
            &json!({"source_id": "ann-review.md", "format": "md", "version": version,
                "scope": {"tenant": "acme", "user": "ann"}, "content": format!("# Review\n\nAnn met her goals, as of {version}.")}),
        ))
    };
    let (s, first) = filed("v1");
    assert_eq!(s, 201, "{first}");
    let (s, second) = filed("v2");
    assert_eq!(
        (s, second["status"].as_str(), second["document_id"].as_str()),
        (201, Some("new_version"), first["document_id"].as_str()),
        "{second}"
    );

    // The admin deletes it without reading it.
    let (s, r) = call(app.delete(&admin, &format!("/v1/knowledge/documents/{doc}")));
    assert_eq!(s, 200, "{r}");
    assert_error(
        call(app.get(&hana, &format!("/v1/knowledge/documents/{doc}"))),
        404,
        "NOT_FOUND",
    );
}

/// A deletion's receipt, at every door that answers with it, flags only the citing assets its
/// reader may see (found: deleting a document answered with the id of another user's private
/// memory that cited it, an id that answers 404 to the deleter everywhere else).
#[test]
fn a_deletion_receipt_flags_only_the_citing_assets_its_reader_may_see() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let bob = app.key("acme", "bob", &["writer"], &[]);
    let carol = app.key("acme", "carol", &["writer"], &[]);
    let (s, d) = call(app.post(
        &ann,
        "/v1/knowledge/documents",
        &json!({
        "source_id": "onboarding.md", "format": "md",
        "content": "# Onboarding\n\nNew hires get a laptop on their first day."}),
    ));
    assert_eq!(s, 201, "{d}");
    let doc = d["document_id"].as_str().unwrap().to_string();
    let private = id(&write(
        &app,
        &bob,
        json!({"class": "episodic",
        "content": "I was slow to get my laptop and told my manager I might quit",
        "evidence": [doc.clone()]}),
    ));
    let shared = id(&write(
        &app,
        &carol,
        json!({"class": "semantic", "scope": "tenant",
        "content": "Laptops for new hires are ordered two weeks ahead",
        "evidence": [doc.clone()]}),
    ));
    assert_error(
        call(app.get(&ann, &format!("/v1/assets/{private}"))),
        404,
        "NOT_FOUND",
    );
    let (s, receipt) = call(app.delete(&ann, &format!("/v1/knowledge/documents/{doc}")));
    assert_eq!(s, 200, "{receipt}");
    let again = call(app.get(
        &ann,
        &format!("/v1/receipts/{}", receipt["id"].as_str().unwrap()),
    ));
    assert_eq!(again.0, 200, "{}", again.1);
    for r in [&receipt, &again.1] {
        let text = r.to_string();
        assert!(
            !text.contains(&private),
            "the receipt names bob's memory: {r}"
        );
        let flagged: Vec<&str> = r["flagged"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["id"].as_str())
            .collect();
        assert_eq!(flagged, [shared.as_str()], "{r}");
        assert_eq!(r["counts"]["flagged"], 1, "{r}");
    }
    // Flagged, not deleted: bob's memory is as it was.
    let (s, m) = call(app.get(&bob, &format!("/v1/memories/{private}")));
    assert_eq!(s, 200, "{m}");
    // Once the flagged memory is purged, the tenant's admins still read the entry: a receipt is
    // a record.
    let (s, gone) = call(app.delete(&carol, &format!("/v1/memories/{shared}?level=purged")));
    assert_eq!(s, 200, "{gone}");
    let admin = app.key("acme", "root", &["admin"], &[]);
    let rid = receipt["id"].as_str().unwrap();
    let (s, kept) = call(app.get(&admin, &format!("/v1/receipts/{rid}")));
    assert_eq!(s, 200, "{kept}");
    assert!(kept["flagged"].to_string().contains(&shared), "{kept}");
    assert!(!kept.to_string().contains(&private), "{kept}");
}

/// The reached assets of a receipt follow the same rule (found: a writer who purged its own
/// raw memory read, in its receipt, the id and hashes of the consolidated record built from it
/// and from a confidential record it may not read, as rebuilt without it).
#[test]
fn a_deletion_receipt_lists_no_rebuilt_record_its_reader_may_not_see() {
    let app = TestApp::start();
    let sam = app.key_with("acme", "sam", &["writer"], |c| {
        c.clearance = Some("internal".into());
    });
    let admin = app.key("acme", "root", &["admin"], &[]);
    let store = app.state.services.backends.store.clone();
    let mine = id(&write(
        &app,
        &sam,
        json!({"class": "episodic", "scope": "tenant",
        "content": "The quarterly vendor audit found two unpaid invoices"}),
    ));
    // A confidential record of the same text beside it (another writer's, stored beside it
    // because it may not be merged into a less sensitive one), as a concurrent write leaves it.
    let mut other = store.get(&mine).unwrap().unwrap();
    other.meta.id = registry_core::asset::new_asset_id();
    other.meta.owner = "hana".into();
    other.meta.sensitivity = registry_core::asset::Sensitivity::Confidential;
    store
        .commit(vec![registry_core::store::WriteOp::PutVersion(Box::new(
            other.clone(),
        ))])
        .unwrap();
    app.state
        .services
        .memory
        .reindex(std::slice::from_ref(&other))
        .unwrap();
    let r = app.state.services.run_job("consolidate").unwrap();
    assert_eq!(r.counts["consolidated_records"], 1, "{}", r.counts);
    let (s, receipt) = call(app.delete(&sam, &format!("/v1/memories/{mine}?level=purged")));
    assert_eq!(s, 200, "{receipt}");
    let receipt = receipt["receipt"].clone();
    let rid = receipt["id"].as_str().unwrap().to_string();
    let (s, stored) = call(app.get(&admin, &format!("/v1/receipts/{rid}")));
    assert_eq!(s, 200, "{stored}");
    let rebuilt: Vec<String> = stored["assets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["via"] == "consolidated_from")
        .flat_map(|a| [a["id"].as_str(), a["regenerated_as"].as_str()])
        .flatten()
        .map(str::to_string)
        .collect();
    assert!(
        !rebuilt.is_empty(),
        "the admin reads the rebuilt record: {stored}"
    );
    let (_, again) = call(app.get(&sam, &format!("/v1/receipts/{rid}")));
    for r in [&receipt, &again] {
        let text = r.to_string();
        assert!(text.contains(&mine), "{r}");
        for id in &rebuilt {
            assert!(!text.contains(id.as_str()), "sam's receipt names {id}: {r}");
        }
    }
}

// 6 ------------------------------------------------------------------------------------------

#[test]
fn item6_a_writer_neither_supersedes_nor_confirms_a_record_it_cannot_read() {
    let app = TestApp::start();
    let hana = app.key_with("acme", "hana", &["writer"], |c| {
        c.clearance = Some("confidential".into());
    });
    let sam = app.key_with("acme", "sam", &["writer"], |c| {
        c.clearance = Some("internal".into());
    });
    let secret_fact = json!({"class": "semantic", "scope": "tenant",
        "subject": "acquisition", "attribute": "target", "value": "Globex",
        "sensitivity": "confidential",
        "content": "The acquisition target is Globex"});
    let hidden = id(&write(&app, &hana, secret_fact));
    // The supersede: a writer who cannot read the record states another value.
    let w = write(
        &app,
        &sam,
        json!({"class": "semantic", "scope": "tenant",
               "subject": "acquisition", "attribute": "target", "value": "Initech",
               "content": "The acquisition target is Initech"}),
    );
    assert_eq!(w["decision"], "accepted", "{w}");
    assert!(!w.to_string().contains(&hidden), "{w}");
    let (s, m) = call(app.get(&hana, &format!("/v1/memories/{hidden}")));
    assert_eq!(
        (s, m["memory"]["status"].as_str()),
        (200, Some("active")),
        "{m}"
    );
    // The oracle: the exact text of the hidden record.
    let probe = json!({"class": "semantic", "scope": "tenant",
        "content": "The acquisition target is Globex"});
    let w = write(&app, &sam, probe);
    assert_eq!(w["decision"], "accepted", "{w}");
    assert_ne!(id(&w), hidden);
    assert!(!w.to_string().contains(&hidden), "{w}");
    // Its twin door, the MCP tool, with the hidden fact's subject, attribute and value.
    let same_fact = json!({"class": "semantic", "scope": "tenant",
        "subject": "acquisition", "attribute": "target", "value": "Globex",
        "content": "Acquisition: the target is Globex"});
    let out = mcp_http_with(
        &app,
        &sam,
        &[],
        &json!({"calls": [{"tool": "memory_write", "args": same_fact}]}),
    );
    let w = &out["calls"][0]["structured"];
    assert_ne!(w["decision"], "merged", "{out}");
    assert!(!out.to_string().contains(&hidden), "{out}");
    // The owner's record is as it was.
    let (_, m) = call(app.get(&hana, &format!("/v1/memories/{hidden}")));
    assert_eq!(m["memory"]["version"], 1, "{m}");
}

// 8 ------------------------------------------------------------------------------------------

/// Item 8's twin for context manifests, which name no project: an admin bound to some projects
/// reads only its own, at every door that serves them (found: it read a pack compiled under
/// another project, with that project's scope keys and hashes).
#[test]
fn item8_a_project_bound_admin_reads_no_manifest_but_its_own() {
    let app = TestApp::start();
    let dora = app.project_key("acme", "dora", &["writer"], &["mergers"]);
    let web_admin = app.project_key("acme", "wadmin", &["admin"], &["web"]);
    let admin = app.key("acme", "root", &["admin"], &[]);
    let memo = id(&write_in(
        &app,
        &dora,
        "mergers",
        json!({"class": "semantic", "scope": "project",
            "content": "The merger memo for Initech is in the legal drive"}),
    ));
    let (s, pack) = call(
        app.post(
            &dora,
            "/v1/context",
            &json!({"goal": "merger memo Initech", "budget": 2000, "min_score": 0.0}),
        )
        .header("X-Project", "mergers"),
    );
    assert_eq!(s, 200, "{pack}");
    let pid = pack["id"].as_str().unwrap().to_string();
    assert!(
        pack.to_string().contains(&memo),
        "the pack drew on the memo: {pack}"
    );
    assert_error(
        call(app.get(&web_admin, &format!("/v1/context/{pid}"))),
        404,
        "NOT_FOUND",
    );
    let (s, _) = call(app.post(&web_admin, &format!("/v1/context/{pid}/replay"), &json!({})));
    assert_eq!(s, 404);
    let cookie = console(&app, &web_admin);
    let (_, overview) = console_get(&app, &cookie, "/ui/context");
    assert!(!overview.contains(&pid), "listed on the console");
    let (s, page) = console_get(&app, &cookie, &format!("/ui/context/{pid}"));
    assert!(s == 404 && !page.contains(&memo), "{s}: {page}");
    // Its own packs it reads; an admin of every project reads dora's.
    let (s, own) = call(app.post(
        &web_admin,
        "/v1/context",
        &json!({"goal": "deploy web", "budget": 2000}),
    ));
    assert_eq!(s, 200, "{own}");
    let (s, _) = call(app.get(
        &web_admin,
        &format!("/v1/context/{}", own["id"].as_str().unwrap()),
    ));
    assert_eq!(s, 200);
    let (s, got) = call(app.get(&admin, &format!("/v1/context/{pid}")));
    assert_eq!(s, 200, "{got}");
}

#[test]
fn item8_a_project_bound_admin_erases_nothing_in_other_projects() {
    let app = TestApp::start();
    let dora = app.project_key("acme", "dora", &["writer"], &["mergers", "web"]);
    let web_admin = app.project_key("acme", "wadmin", &["admin"], &["web"]);
    let in_mergers = id(&write_in(
        &app,
        &dora,
        "mergers",
        json!({"class": "semantic", "content": "I keep the merger memo in my drive"}),
    ));
    let in_web = id(&write_in(
        &app,
        &dora,
        "web",
        json!({"class": "semantic", "content": "I deploy the web front end on Tuesdays"}),
    ));
    let (s, plan) = call(app.delete(&web_admin, "/v1/subjects/dora?dry_run=true"));
    assert_eq!(s, 200, "{plan}");
    let purge = ids(&plan["purge"]);
    assert!(purge.contains(&in_web), "{plan}");
    assert!(!plan.to_string().contains(&in_mergers), "{plan}");
    assert_eq!(plan["context_manifests"], 0, "{plan}");
    let (s, r) = call(app.delete(&web_admin, "/v1/subjects/dora"));
    assert_eq!(s, 200, "{r}");
    let get = |project: &str, id: &str| {
        call(
            app.get(&dora, &format!("/v1/memories/{id}"))
                .header("X-Project", project),
        )
        .0
    };
    assert_eq!(
        get("mergers", &in_mergers),
        200,
        "the other project keeps it"
    );
    assert_eq!(get("web", &in_web), 404, "erased in the admin's project");
}

// 9 ------------------------------------------------------------------------------------------

#[test]
fn item9_readers_list_no_held_revoked_or_superseded_memory_in_any_door() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let reader = app.key("acme", "rita", &["reader"], &[]);
    let admin = app.key("acme", "root", &["admin"], &[]);
    let first = id(&write(
        &app,
        &ann,
        fact("ceo", "resignation date", "May", "user_statement"),
    ));
    let current = write(
        &app,
        &ann,
        fact("ceo", "resignation date", "June", "user_statement"),
    );
    assert_eq!(current["replaced"], first.as_str(), "{current}");
    let current = id(&current);
    let held = write(
        &app,
        &ann,
        fact("ceo", "resignation date", "July", "tool_result"),
    );
    assert_eq!(held["decision"], "conflict_pending", "{held}");
    let held = id(&held);
    let revoked = id(&write(
        &app,
        &ann,
        json!({"class": "semantic", "scope": "tenant", "subject": "vault", "attribute": "hint",
               "value": "founder", "content": "The vault hint is the founder's birthday"}),
    ));
    assert_eq!(
        call(app.delete(&ann, &format!("/v1/memories/{revoked}"))).0,
        200
    );
    let hidden = [&first, &held, &revoked];
    for h in hidden {
        assert_error(
            call(app.get(&reader, &format!("/v1/memories/{h}"))),
            404,
            "NOT_FOUND",
        );
    }
    // The doors that act on a memory by id answer the same 404, not a 403 (or, to a reviewer,
    // a 409 naming the record's state) that tells the record exists (found: DELETE by another
    // writer answered 403 on a held record).
    let bob = app.key("acme", "bob", &["writer"], &[]);
    let rex = app.key("acme", "rex", &["reviewer"], &[]);
    for h in [&first, &revoked] {
        for (who, key) in [("writer", &bob), ("reviewer", &rex)] {
            for (door, resp) in [
                (
                    "delete",
                    call(app.delete(key, &format!("/v1/memories/{h}"))),
                ),
                (
                    "confirm",
                    call(app.post(key, &format!("/v1/memories/{h}/confirm"), &json!({}))),
                ),
                (
                    "reject",
                    call(app.post(key, &format!("/v1/memories/{h}/reject"), &json!({}))),
                ),
            ] {
                assert_eq!(resp.0, 404, "{who} {door} {h}: {}", resp.1);
            }
        }
        let resp = call(app.post(
            &bob,
            &format!("/v1/memories/{h}/feedback"),
            &json!({"outcome": "helpful"}),
        ));
        assert_eq!(resp.0, 404, "feedback {h}: {}", resp.1);
    }
    for (door, resp) in [
        (
            "delete",
            call(app.delete(&bob, &format!("/v1/memories/{held}"))),
        ),
        (
            "confirm",
            call(app.post(&bob, &format!("/v1/memories/{held}/confirm"), &json!({}))),
        ),
    ] {
        assert_eq!(resp.0, 404, "writer {door} on a held record: {}", resp.1);
    }

    // The door it was found on: the asset listing (and its by-id twin).
    let (s, list) = call(app.get(&reader, "/v1/assets?kind=memory"));
    assert_eq!(s, 200, "{list}");
    let text = list.to_string();
    assert!(text.contains(&current), "{list}");
    for h in hidden {
        assert!(!text.contains(h.as_str()), "{h} listed: {list}");
        assert_error(
            call(app.get(&reader, &format!("/v1/assets/{h}"))),
            404,
            "NOT_FOUND",
        );
    }
    assert!(!text.contains("sa:vault|hint"), "{list}");
    // A governor sees the revoked record's metadata, without its lookup key.
    let (_, list) = call(app.get(&admin, "/v1/assets?kind=memory"));
    let row = list["assets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["meta"]["id"] == revoked.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(row["meta"]["status"], "revoked");
    assert!(row["lookup_key"].is_null(), "{row}");

    // The console: the Derivation page and its list, the Memory list.
    let cookie = console(&app, &reader);
    for h in hidden {
        let (s, page) = console_get(&app, &cookie, &format!("/ui/derivation?id={h}"));
        assert_eq!(s, 404, "{page}");
    }
    let (s, page) = console_get(&app, &cookie, "/ui/derivation");
    assert_eq!(s, 200);
    assert!(page.contains(&current), "the page lists assets");
    let (s, memories) = console_get(&app, &cookie, "/ui/memory");
    assert_eq!(s, 200);
    for h in hidden {
        assert!(!page.contains(h.as_str()), "{h} on the Derivation page");
        assert!(!memories.contains(h.as_str()), "{h} on the Memory page");
    }
    assert!(!page.contains("sa:vault|hint") && !memories.contains("vault hint"));
    // The admin's Memory page shows the revoked record without its content.
    let cookie = console(&app, &admin);
    let (_, memories) = console_get(&app, &cookie, "/ui/memory");
    assert!(memories.contains(&revoked), "an admin lists it");
    assert!(!memories.contains("vault hint"), "without content");
}

/// A project-bound admin's audit: a purged asset's events no longer reach it, whichever
/// project the asset was in (its project went with it, and an event names none); the tenant's
/// unbound admin keeps them. While the asset stands, its project decides, as before.
#[test]
fn a_project_bound_admin_reads_no_event_of_a_purged_asset() {
    let app = TestApp::start();
    let dora = app.project_key("acme", "dora", &["writer"], &["mergers"]);
    let web_admin = app.project_key("acme", "wadmin", &["admin"], &["web"]);
    let admin = app.key("acme", "root", &["admin"], &[]);
    let m = id(&write_in(
        &app,
        &dora,
        "mergers",
        json!({"class": "semantic", "scope": "project",
            "content": "The merger closes on the ninth of March"}),
    ));
    let audit = |key: &Key| {
        let (s, b) = call(app.get(key, "/v1/audit?limit=1000"));
        assert_eq!(s, 200, "{b}");
        b.to_string()
    };
    assert!(!audit(&web_admin).contains(&m));
    let (s, r) = call(
        app.delete(&dora, &format!("/v1/memories/{m}?level=purged"))
            .header("X-Project", "mergers"),
    );
    assert_eq!(s, 200, "{r}");
    let seen = audit(&web_admin);
    assert!(!seen.contains(&m), "a purged asset's events leak");
    assert!(audit(&admin).contains(&m));
    // An event naming a receipt (a deletion's levels), never an asset, is still shown, as the
    // receipt itself is to the tenant's admins.
    let receipt = r["receipt"]["id"].as_str().unwrap();
    assert!(seen.contains(receipt), "{seen}");
}

/// An erasure commits in steps (each re-owned asset, then the purge): none starts after the
/// deadline, as a batch's items (found: once the first step had committed, the rest ran on
/// past the request's 408). A retry plans again and finishes what is left.
#[test]
fn an_erasure_starts_no_step_after_its_deadline() {
    use registry_core::deadline::{Deadline, begin_commit};
    use std::time::Duration;
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let shared = id(&write(
        &app,
        &ann,
        json!({"class": "semantic", "scope": "tenant",
            "content": "The team's standup moved to ten o'clock"}),
    ));
    let own = id(&write(
        &app,
        &ann,
        json!({"class": "semantic", "content": "I prefer the window seat"}),
    ));
    let mut root = registry_core::Principal::new("acme", "root");
    root.roles = vec![registry_core::Role::Admin];
    let services = &app.state.services;
    let plan = services.plan_erasure(&root, "ann").unwrap();
    assert!(plan.reown.contains(&shared), "{plan:?}");
    let owner = || {
        services
            .backends
            .store
            .get(&shared)
            .unwrap()
            .unwrap()
            .meta
            .owner
    };
    let d = Deadline::after(Duration::from_millis(100));
    let late = d.run(|| {
        // An earlier step committed, then the deadline passed.
        begin_commit().unwrap();
        std::thread::sleep(Duration::from_millis(150));
        services.erase(&root, plan.clone(), None)
    });
    assert!(late.is_err(), "{late:?}");
    assert_eq!(owner(), "ann");
    let plan = services.plan_erasure(&root, "ann").unwrap();
    services.erase(&root, plan, None).unwrap();
    assert_ne!(owner(), "ann");
    assert!(services.backends.store.get(&own).unwrap().is_none());
}
