//! The web console at `/ui/`, driven in Debian's chromium through Playwright for Python
//! (tests/clients/console.py): sign-in and the session cookie, every page at 1280×800 and
//! 390×844 with axe-core, confirming a conflict from Review, approving and promoting a skill
//! version, a receipt, audit Verify, sign-out, a reader's view and forged POSTs. Outcomes are
//! checked over the HTTP API, the door the console must agree with.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::*;
use crate::harness::{python, script};
use crate::skills::{ONE_TEST, make_skill, pack, pass_all, publish, release, vpath};

/// Where the tests write the screenshots: `<target dir>/ui-screenshots/` (the README says so).
fn screenshots_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("REGISTRY_SCREENSHOTS_DIR") {
        return PathBuf::from(d);
    }
    // The test binary is <target>/debug/deps/integration-…
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().join("ui-screenshots")
}

fn chromium() -> PathBuf {
    for c in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if std::path::Path::new(c).exists() {
            return c.into();
        }
    }
    panic!(
        "Debian's chromium is not installed: run scripts/fetch-clients.sh (scripts/test.sh does)"
    );
}

fn axe_core() -> PathBuf {
    let p = python();
    // <clients>/venv/bin/python → <clients>/inspector/node_modules/axe-core/axe.min.js
    let root = p.ancestors().nth(3).unwrap();
    let axe = root.join("inspector/node_modules/axe-core/axe.min.js");
    assert!(
        axe.exists(),
        "axe-core is not installed: run scripts/fetch-clients.sh"
    );
    axe
}

fn drive(input: &Value) -> Value {
    let mut child = Command::new(python())
        .arg(script("console.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "console.py failed ({}): {}\n{stdout}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

fn write(app: &TestApp, key: &Key, body: Value) -> Value {
    let (s, b) = call(app.post(key, "/v1/memories", &body));
    assert_eq!(s, 200, "{b}");
    b
}

/// Two facts on one subject and attribute; the second, from a lower-trust source, is held as
/// `conflict_pending`. Returns the pending record's id.
fn conflict(app: &TestApp, key: &Key, subject: &str, first: &str, second: &str) -> String {
    let fact = |value: &str, source: &str| {
        json!({"class": "semantic", "scope": "tenant", "subject": subject, "attribute": "home city",
               "value": value, "source": source,
               "content": format!("{subject}'s home city is {value}")})
    };
    assert_eq!(
        write(app, key, fact(first, "user_statement"))["decision"],
        "accepted"
    );
    let held = write(app, key, fact(second, "tool_result"));
    assert_eq!(held["decision"], "conflict_pending", "{held}");
    held["id"].as_str().unwrap().to_string()
}

#[test]
fn the_console_reviews_releases_and_proves_in_a_real_browser() {
    let app = TestApp::start();
    let olga = app.key("acme", "olga", &["admin"], &[]);
    let ann = app.key("acme", "ann", &["writer", "ingest"], &[]);
    let rita = app.key("acme", "rita", &["reader"], &[]);

    let conflict_id = conflict(&app, &ann, "Ann", "Paris", "Berlin");
    let pending_id = conflict(&app, &ann, "Bob", "Oslo", "Bergen");

    // A released 1.0.0, and a 1.1.0 whose tests passed, awaiting review.
    let tmp = tempfile::tempdir().unwrap();
    let (v1, _) = pack(&make_skill(
        tmp.path(),
        "invoice-booker",
        "1.0.0",
        ONE_TEST,
        "v1",
    ));
    release(&app, &ann, &olga, &v1, None);
    let dir2 = tempfile::tempdir().unwrap();
    let (v2, _) = pack(&make_skill(
        dir2.path(),
        "invoice-booker",
        "1.1.0",
        ONE_TEST,
        "v2",
    ));
    let (s, view) = publish(&app, &ann, &v2, None);
    assert!(s == 200 || s == 201, "{view}");
    let (s, b) = call(app.post(
        &app.tester_for(&ann),
        &vpath("invoice-booker", "1.1.0", "test-results"),
        &pass_all(&view),
    ));
    assert_eq!((s, b["state"].as_str()), (200, Some("tested")), "{b}");

    let (s, doc) = call(app.post(
        &ann,
        "/v1/knowledge/documents",
        &json!({"source_id": "policy/refunds.md", "version": "3", "format": "md",
                "authority": "policy",
                "content": "# Refunds\n\nA refund over 500 EUR needs two approvers from finance.\n\n## Tickets\n\nEvery refund names its ticket id."}),
    ));
    assert_eq!(s, 201, "{doc}");
    let document_id = doc["document_id"].as_str().unwrap().to_string();

    let gone = write(
        &app,
        &ann,
        json!({"class": "semantic", "scope": "tenant", "content": "The team lunch moved to Thursdays"}),
    );
    let (s, del) = call(app.delete(
        &ann,
        &format!("/v1/memories/{}?level=purged", gone["id"].as_str().unwrap()),
    ));
    assert_eq!(s, 200, "{del}");
    let receipt_id = del["receipt"]["id"].as_str().unwrap().to_string();

    let mut manifests = vec![];
    for budget in [400, 1200] {
        let (s, p) = call(app.post(
            &olga,
            "/v1/context",
            &json!({"goal": "Decide whether refund R-88 of 900 EUR can be approved.",
                    "query": "refund approval over 500 EUR", "budget": budget}),
        ));
        assert_eq!(s, 200, "{p}");
        manifests.push(p["id"].as_str().unwrap().to_string());
    }

    // A task of olga's with events and an artifact, for the Tasks page.
    let (s, task) = call(app.post(
        &olga,
        "/v1/tasks",
        &json!({"goal": "Decide refund R-88", "acceptance": "a decision with its reason"}),
    ));
    assert_eq!(s, 201, "{task}");
    let task_id = task["id"].as_str().unwrap().to_string();
    let (s, art) = call(
        app.client
            .put(app.url(&format!("/v1/tasks/{task_id}/artifacts/ledger.txt")))
            .bearer_auth(&olga.secret)
            .header("content-type", "text/plain")
            .body("R-88 900 EUR approved by finance\nR-89 20 EUR\n"),
    );
    assert_eq!(s, 201, "{art}");
    let artifact_id = art["id"].as_str().unwrap().to_string();
    let (s, b) = call(app.post(
        &olga,
        &format!("/v1/tasks/{task_id}/events"),
        &json!({"events": [
            {"id": "o1", "type": "open_item", "actor": "olga", "content": "Open: second approver for R-88."},
            {"id": "t1", "type": "tool_result", "actor": "ledger", "content": "ledger lookup", "artifact": artifact_id}
        ]}),
    ));
    assert_eq!(s, 200, "{b}");

    let shots = screenshots_dir();
    let _ = std::fs::remove_dir_all(&shots);
    let out = drive(&json!({
        "base": app.base,
        "admin_key": olga.secret,
        "reader_key": rita.secret,
        "conflict_id": conflict_id,
        "pending_id": pending_id,
        "skill": "invoice-booker",
        "skill_version": "1.1.0",
        "memory_query": "Ann home city",
        "knowledge_query": "refund over 500 EUR approvers",
        "knowledge_miss": "zebra migration in the Serengeti",
        "document_id": document_id,
        "receipt_id": receipt_id,
        "manifests": manifests,
        "task_id": task_id,
        "artifact_id": artifact_id,
        "screenshots": shots,
        "chromium": chromium(),
        "axe": axe_core(),
    }));
    let st = &out["steps"];

    // Sign-in: a session cookie the page's scripts cannot read, same-site only, expiring; the
    // key is in no URL and no page.
    assert!(
        st["unsigned_lands_on"]
            .as_str()
            .unwrap()
            .ends_with("/ui/sign-in")
    );
    assert_eq!(st["cookie"]["httpOnly"], true);
    assert_eq!(st["cookie"]["sameSite"], "Strict");
    assert!(
        st["cookie"]["expires"].as_f64().unwrap() > 0.0,
        "{}",
        st["cookie"]
    );
    assert_eq!(
        (st["key_in_url"].clone(), st["key_in_page"].clone()),
        (json!(false), json!(false))
    );
    assert!(st["principal"].as_str().unwrap().contains("olga"));

    // The overview: counts, jobs, plots.
    let counts = st["overview_counts"].as_str().unwrap();
    assert!(
        counts.contains("memory") && counts.contains("skill_version"),
        "{counts}"
    );
    assert!(st["overview_plots"].as_u64().unwrap() >= 3, "{st}");
    // Job runs cover every tenant: a tenant's admin is shown none (issue 31, item 11).
    assert_eq!(st["overview_jobs"], 0);

    // Review: the pending record beside the one it conflicts with, with the gate's reason;
    // confirmed from the page, and the API sees the new status.
    let item = st["review_item_text"].as_str().unwrap();
    assert!(
        item.contains("Berlin") && item.contains("Conflicts with") && item.contains("Paris"),
        "{item}"
    );
    assert!(item.contains("lower_trust_conflict"), "{item}");
    assert_eq!(st["review_item_left"], 0);
    let (s, m) = call(app.get(&olga, &format!("/v1/memories/{conflict_id}")));
    assert_eq!(
        (s, m["memory"]["status"].as_str()),
        (200, Some("confirmed")),
        "{m}"
    );

    // The skill version: approved, then promoted, from the console; the API agrees.
    assert!(st["review_skill_text"].as_str().unwrap().contains("smoke"));
    assert_eq!(st["state_after_approve"], "approved");
    assert_eq!(st["state_after_promote"], "published");
    assert_eq!(st["current_release"], "1.1.0");
    let (s, v) = call(app.get(&olga, "/v1/skills/invoice-booker/versions/1.1.0"));
    assert_eq!((s, v["state"].as_str()), (200, Some("published")), "{v}");

    // Memory, knowledge, derivation.
    assert!(st["memory_hits"].as_u64().unwrap() >= 1, "{st}");
    assert!(
        st["memory_breakdown"]
            .as_str()
            .unwrap()
            .contains("semantic")
    );
    assert_eq!(st["evidence_status"], "Status: OK");
    assert!(st["evidence_count"].as_u64().unwrap() >= 1);
    assert_eq!(st["miss_status"], "Status: INSUFFICIENT_EVIDENCE");
    assert!(st["derivation_edges"].as_u64().unwrap() >= 1, "{st}");
    assert_eq!(st["derivation_svg"], 1);

    // The receipt, the audit chain.
    assert_eq!(st["receipt_level"], "purged");
    assert!(st["receipt_stores"].as_u64().unwrap() >= 1);
    assert!(
        st["verify"]
            .as_str()
            .unwrap()
            .contains("The chain verifies"),
        "{}",
        st["verify"]
    );
    assert_eq!(st["compare_heading"], "Context comparison");
    assert_eq!(st["keyboard"][0], "Skip to content");
    assert_eq!(st["keyboard"][1], "Overview");

    // Forged POSTs answer 403 and change nothing.
    assert_eq!(st["forged_no_token"], 403);
    assert_eq!(st["forged_bad_token"], 403);
    assert_eq!(st["forged_cross_site"], 403);
    // Signed out: the old cookie opens nothing.
    assert!(
        st["signed_out_at"]
            .as_str()
            .unwrap()
            .ends_with("/ui/sign-in")
    );
    assert!(
        st["old_cookie_get_lands_on"]
            .as_str()
            .unwrap()
            .ends_with("/ui/sign-in")
    );
    assert_eq!(st["old_cookie_post"], 401);
    // A reader: no buttons to act, and acting anyway is refused by the same rule as the API.
    assert_eq!(st["reader_confirm_buttons"], 0);
    assert_eq!(st["reader_approve_buttons"], 0);
    assert_eq!(st["reader_promote_buttons"], 0);
    assert_eq!(st["reader_action_buttons"], 0);
    // A held memory is not seen by a reader: the console answers it as the API does, 404.
    assert_eq!(st["reader_forged_confirm"], 404);
    assert_eq!(st["reader_forged_yank"], 403);
    let (_, m) = call(app.get(&olga, &format!("/v1/memories/{pending_id}")));
    assert_eq!(m["memory"]["status"], "conflict_pending", "{m}");
    let (_, v) = call(app.get(&olga, "/v1/skills/invoice-booker/versions/1.1.0"));
    assert_eq!(v["state"], "published");

    // Tasks: the events, the artifact, the continuation preview naming the open item and the
    // artifact, and the artifact's lines.
    assert_eq!(st["task_events"], 2);
    assert_eq!(st["task_artifacts"], 1);
    let cont = st["continuation"].as_str().unwrap();
    assert!(
        cont.contains("second approver for R-88") && cont.contains(&artifact_id),
        "{cont}"
    );
    assert!(
        st["artifact_lines"]
            .as_str()
            .unwrap()
            .contains("R-88 900 EUR approved")
    );

    // Every page has a heading, and axe-core finds nothing serious or critical at either size.
    let pages = [
        "sign-in",
        "overview",
        "review",
        "skills",
        "skill",
        "memory",
        "memory-search",
        "memory-record",
        "knowledge",
        "knowledge-document",
        "derivation",
        "deletions",
        "receipt",
        "audit",
        "audit-verified",
        "context",
        "context-manifest",
        "context-compare",
        "tasks",
        "task",
        "task-artifact",
        "review-reader",
    ];
    let mut serious = vec![];
    let mut minor = 0;
    for page in pages {
        assert!(
            !out["headings"][page].as_str().unwrap_or("").is_empty(),
            "{page}: no h1"
        );
        for size in ["desktop", "phone"] {
            let key = format!("{page}@{size}");
            let v = out["axe"][&key]
                .as_array()
                .unwrap_or_else(|| panic!("{key}: no axe run"));
            for x in v {
                if matches!(x["impact"].as_str(), Some("serious" | "critical")) {
                    serious.push(format!("{key}: {x}"));
                } else {
                    minor += 1;
                }
            }
            let shot = shots.join(format!("{page}-{size}.png"));
            let len = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
            assert!(len > 1000, "{}: no screenshot", shot.display());
        }
    }
    assert!(serious.is_empty(), "axe-core: {serious:#?}");
    eprintln!(
        "console: {} pages × 2 sizes checked by axe-core: 0 serious or critical, {minor} minor or moderate; screenshots in {}",
        pages.len(),
        shots.display()
    );
}
