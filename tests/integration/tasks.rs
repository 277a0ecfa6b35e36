//! The working layer over HTTP and MCP (issue 33): tasks, the append-only event log, artifacts
//! read by range, compaction summaries, checkpoints, the Continuation Package, isolation
//! between tenants, and a task's deletion down to the bytes on disk. Runs on SQLite, and on
//! PostgreSQL under `REGISTRY_TEST_STORE=postgres`.

use registry_core::hash::sha256_hex;
use reqwest::blocking::RequestBuilder;
use serde_json::{Value, json};

use crate::common::*;
use crate::deletion::files_containing;
use crate::harness::mcp_http_with;

fn create_task(app: &TestApp, key: &Key, goal: &str, acceptance: &str) -> Value {
    let (s, t) = call(app.post(
        key,
        "/v1/tasks",
        &json!({"goal": goal, "acceptance": acceptance}),
    ));
    assert_eq!(s, 201, "{t}");
    t
}

fn append(app: &TestApp, key: &Key, task: &str, events: Value) -> Value {
    let (s, out) = call(app.post(
        key,
        &format!("/v1/tasks/{task}/events"),
        &json!({ "events": events }),
    ));
    assert_eq!(s, 200, "{out}");
    out
}

fn put_artifact_req(
    app: &TestApp,
    key: &Key,
    task: &str,
    name: &str,
    bytes: Vec<u8>,
) -> RequestBuilder {
    app.client
        .put(app.url(&format!("/v1/tasks/{task}/artifacts/{name}")))
        .bearer_auth(&key.secret)
        .header("content-type", "text/plain")
        .body(bytes)
}

fn put_artifact(app: &TestApp, key: &Key, task: &str, name: &str, bytes: &[u8]) -> Value {
    let (s, a) = call(put_artifact_req(app, key, task, name, bytes.to_vec()));
    assert_eq!(s, 201, "{a}");
    a
}

/// `GET /v1/artifacts/{id}?query`: the status and the raw bytes.
fn read_raw(app: &TestApp, key: &Key, id: &str, query: &str) -> (u16, Vec<u8>) {
    let resp = app
        .get(key, &format!("/v1/artifacts/{id}?{query}"))
        .send()
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.bytes().unwrap().to_vec())
}

/// Every event of `task`, page by page.
fn all_events(app: &TestApp, key: &Key, task: &str, limit: usize) -> Vec<Value> {
    let mut out = vec![];
    let mut after = 0u64;
    loop {
        let (s, page) = call(app.get(
            key,
            &format!("/v1/tasks/{task}/events?after={after}&limit={limit}"),
        ));
        assert_eq!(s, 200, "{page}");
        out.extend(page["events"].as_array().unwrap().iter().cloned());
        match page["next"].as_u64() {
            Some(n) => after = n,
            None => return out,
        }
    }
}

/// The MCP Python SDK's answers to `calls` (`[{tool, args}]`), one per call.
fn mcp(app: &TestApp, key: &Key, calls: Value) -> Vec<Value> {
    let out = mcp_http_with(app, key, &[], &json!({ "calls": calls }));
    out["calls"].as_array().unwrap().clone()
}

/// A task made with a project or session in its body is read back under that context; a body
/// naming another context than its request's is refused with 422 saying which header to send,
/// never made where its own request then answers 404 (schemathesis's "created resource not
/// found", with `{"project": "k8"}` and no `X-Project`).
#[test]
fn a_task_is_made_in_its_requests_context_and_read_back_there() {
    let app = TestApp::start();
    let ann = app.key_with("acme", "ann", &["writer"], |c| {
        c.projects = vec!["k8".into(), "k9".into()];
    });
    for (field, header) in [("project", "X-Project"), ("session", "X-Session")] {
        let body = json!({"goal": "ship the export", field: "k8"});
        let b = assert_error(
            call(app.post(&ann, "/v1/tasks", &body)),
            422,
            "VALIDATION_FAILED",
        );
        assert_eq!(b["error"]["details"]["field"], field, "{b}");
        assert!(
            b["error"]["message"].as_str().unwrap().contains(header),
            "{b}"
        );
        let b = assert_error(
            call(app.post(&ann, "/v1/tasks", &body).header(header, "k9")),
            422,
            "VALIDATION_FAILED",
        );
        assert_eq!(b["error"]["details"]["field"], field, "{b}");
        let (s, t) = call(app.post(&ann, "/v1/tasks", &body).header(header, "k8"));
        assert_eq!(s, 201, "{t}");
        let id = t["id"].as_str().unwrap();
        let (s, got) = call(
            app.get(&ann, &format!("/v1/tasks/{id}"))
                .header(header, "k8"),
        );
        assert_eq!((s, &got["goal"]), (200, &json!("ship the export")), "{got}");
        // The header alone, as before: the body may leave it out.
        let (s, t) = call(
            app.post(&ann, "/v1/tasks", &json!({"goal": "ship the import"}))
                .header(header, "k8"),
        );
        assert_eq!(s, 201, "{t}");
        let id = t["id"].as_str().unwrap();
        let (s, _) = call(
            app.get(&ann, &format!("/v1/tasks/{id}"))
                .header(header, "k8"),
        );
        assert_eq!(s, 200);
    }
}

#[test]
fn a_thousand_events_are_appended_once_each_in_sequence() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let task = create_task(&app, &ann, "migrate the billing service", "all tests green");
    let id = task["id"].as_str().unwrap().to_string();
    assert_eq!(task["status"], "open");
    assert_eq!(task["version"], 1);
    assert_eq!(task["owner"], "ann");

    // Batches of at most 100 events: every batch after the first repeats the previous
    // batch's last id, and the fifth batch is sent twice; each id counts once.
    let mut sent = 0usize;
    let mut b = 0;
    while sent < 1000 {
        let mut events = vec![];
        if sent > 0 {
            events.push(json!({"id": format!("e{}", sent - 1), "type": "note",
                "actor": "agent", "content": format!("event {}", sent - 1)}));
        }
        let fresh = (100 - events.len()).min(1000 - sent);
        for i in sent..sent + fresh {
            let kind = ["note", "tool_call", "tool_result", "plan"][i % 4];
            events.push(
                json!({"id": format!("e{i}"), "type": kind, "actor": "agent",
                "content": format!("event {i}")}),
            );
        }
        let out = append(&app, &ann, &id, json!(events));
        assert_eq!(out["appended"], fresh, "{out}");
        assert_eq!(out["duplicates"], usize::from(sent > 0), "{out}");
        sent += fresh;
        assert_eq!(out["last_seq"], sent);
        if b == 4 {
            let again = append(&app, &ann, &id, json!(events));
            assert_eq!(again["appended"], 0);
            assert_eq!(again["duplicates"], events.len());
            assert_eq!(
                again["events"],
                out["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| json!({"id": e["id"], "seq": e["seq"], "duplicate": true}))
                    .collect::<Value>()
            );
        }
        b += 1;
    }
    // The same id twice in one request is appended once.
    let out = append(
        &app,
        &ann,
        &id,
        json!([
            {"id": "twin", "type": "decision", "actor": "ann", "content": "use blue-green"},
            {"id": "twin", "type": "decision", "actor": "ann", "content": "use blue-green"}
        ]),
    );
    assert_eq!(out["appended"], 1, "{out}");
    assert_eq!(out["events"][0]["seq"], 1001);
    assert_eq!(out["events"][1]["seq"], 1001);

    let events = all_events(&app, &ann, &id, 333);
    assert_eq!(events.len(), 1001);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1);
        assert!(e["at"].is_string() && e["actor"].is_string(), "{e}");
    }
    let ids: std::collections::BTreeSet<&str> =
        events.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 1001);
    assert_eq!(events[0]["content"], "event 0");
    assert_eq!(events[0]["type"], "note");
    assert_eq!(events[1]["type"], "tool_call");
    assert_eq!(events[1]["content_hash"], sha256_hex("event 1"));
    let (_, page) = call(app.get(&ann, &format!("/v1/tasks/{id}/events?after=995&limit=10")));
    let seqs: Vec<u64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![996, 997, 998, 999, 1000, 1001]);
    assert!(page["next"].is_null());
    let (_, t) = call(app.get(&ann, &format!("/v1/tasks/{id}")));
    assert_eq!(t["last_seq"], 1001);

    // Bounded and screened like memory fields.
    assert_error(
        call(app.get(&ann, &format!("/v1/tasks/{id}/events?limit=1001"))),
        422,
        "VALIDATION_FAILED",
    );
    let big = "x".repeat(16 * 1024 + 1);
    assert_error(
        call(app.post(
            &ann,
            &format!("/v1/tasks/{id}/events"),
            &json!({"events": [{"id": "big", "type": "note", "actor": "a", "content": big}]}),
        )),
        413,
        "PAYLOAD_TOO_LARGE",
    );
    let r = assert_error(
        call(app.post(
            &ann,
            &format!("/v1/tasks/{id}/events"),
            &json!({"events": [{"id": "leak", "type": "tool_result", "actor": "shell",
                "content": "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}]}),
        )),
        422,
        "WRITE_GATE_REJECTED",
    );
    assert_eq!(r["error"]["details"]["field"], "events[0].content");
    let many: Vec<Value> = (0..101)
        .map(|i| json!({"id": format!("m{i}"), "type": "note", "actor": "a", "content": "x"}))
        .collect();
    assert_error(
        call(app.post(
            &ann,
            &format!("/v1/tasks/{id}/events"),
            &json!({"events": many}),
        )),
        422,
        "VALIDATION_FAILED",
    );
    assert_error(
        call(app.post(
            &ann,
            &format!("/v1/tasks/{id}/events"),
            &json!({"events": [{"id": "w", "type": "gossip", "actor": "a", "content": "x"}]}),
        )),
        422,
        "VALIDATION_FAILED",
    );
    let (_, t) = call(app.get(&ann, &format!("/v1/tasks/{id}")));
    assert_eq!(t["last_seq"], 1001, "a refused append appends nothing");

    // Status moves make new versions from the head the caller read; a stale one is refused.
    let (s, t2) = call(
        app.client
            .patch(app.url(&format!("/v1/tasks/{id}")))
            .bearer_auth(&ann.secret)
            .json(&json!({"version": 1, "status": "paused"})),
    );
    assert_eq!(s, 200, "{t2}");
    assert_eq!(t2["version"], 2);
    assert_eq!(t2["status"], "paused");
    assert_error(
        call(
            app.client
                .patch(app.url(&format!("/v1/tasks/{id}")))
                .bearer_auth(&ann.secret)
                .json(&json!({"version": 1, "status": "done"})),
        ),
        409,
        "CONFLICT",
    );
    let (s, t3) = call(
        app.client
            .patch(app.url(&format!("/v1/tasks/{id}")))
            .bearer_auth(&ann.secret)
            .json(&json!({"version": 2, "status": "done", "next_step": "write the report"})),
    );
    assert_eq!(s, 200, "{t3}");
    assert_eq!(t3["status"], "done");
    assert!(t3["closed_at"].is_string());
    // Each status change is audited as `task.status`, ids and hashes only.
    let audit = app
        .state
        .services
        .backends
        .store
        .audit_events(0, 100_000)
        .unwrap();
    let moves: Vec<_> = audit
        .iter()
        .filter(|e| {
            e.draft.action == "task.status" && e.draft.asset_id.as_deref() == Some(id.as_str())
        })
        .collect();
    assert_eq!(moves.len(), 2);
    for m in &moves {
        assert!(m.draft.reason.is_none(), "{m:?}");
        assert!(m.draft.before_hash.is_some() && m.draft.after_hash.is_some());
    }
    let all = serde_json::to_string(&audit).unwrap();
    assert!(!all.contains("event 5") && !all.contains("billing service"));
}

/// A deterministic text of about `len` bytes in lines of varying length, some not ASCII.
fn tool_output(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 200);
    let mut i = 0u64;
    while out.len() < len {
        let pad = "~".repeat((i * 7919 % 113) as usize);
        let line = if i.is_multiple_of(50) {
            format!("{i:07} ünïcödé résumé {pad}\n")
        } else if i.is_multiple_of(333) {
            "\n".to_string()
        } else {
            format!("{i:07} pass test_{} in {}ms {pad}\n", i * 31 % 1009, i % 97)
        };
        out.extend_from_slice(line.as_bytes());
        i += 1;
    }
    out.extend_from_slice(b"last line without a terminator");
    out
}

/// Lines `line .. line + n` (from 1), each with its terminator, split independently of the
/// registry's code.
fn expected_lines(bytes: &[u8], line: usize, n: usize) -> Vec<u8> {
    bytes
        .split_inclusive(|b| *b == b'\n')
        .skip(line - 1)
        .take(n)
        .flatten()
        .copied()
        .collect()
}

#[test]
fn a_five_megabyte_tool_result_is_offloaded_and_read_back_exactly() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let task = create_task(&app, &ann, "find the flaky test", "the flaky test is named");
    let id = task["id"].as_str().unwrap();
    let bytes = tool_output(5 * 1024 * 1024);
    let total_lines = bytes.split_inclusive(|b| *b == b'\n').count();

    let a = put_artifact(&app, &ann, id, "pytest-output.txt", &bytes);
    assert_eq!(a["digest"], format!("sha256:{}", sha256_hex(&bytes)));
    assert_eq!(a["size"], bytes.len());
    assert_eq!(a["lines"], total_lines);
    assert_eq!(a["media_type"], "text/plain");
    let art = a["id"].as_str().unwrap();
    // The event carries the reference, not the bytes.
    append(
        &app,
        &ann,
        id,
        json!([{"id": "run-1", "type": "tool_result", "actor": "pytest",
            "content": "pytest finished: 1 failure, output offloaded", "artifact": art}]),
    );
    let (_, evs) = call(app.get(&ann, &format!("/v1/tasks/{id}/events")));
    assert_eq!(evs["events"][0]["artifact"], art);

    // Whole, and by byte ranges (across multi-byte characters too).
    let (s, whole) = read_raw(&app, &ann, art, "");
    assert_eq!(s, 200);
    assert!(whole == bytes, "the whole artifact reads back exactly");
    for (offset, length) in [
        (0usize, 1usize),
        (0, 4096),
        (1_000_003, 65_537),
        (2_500_001, 3),
        (bytes.len() - 10, 10),
        (bytes.len() - 10, 1_000),
    ] {
        let (s, got) = read_raw(&app, &ann, art, &format!("offset={offset}&length={length}"));
        assert_eq!(s, 200);
        let end = (offset + length).min(bytes.len());
        assert!(got == bytes[offset..end], "bytes {offset}+{length}");
    }
    // By line ranges, counted from 1.
    for (line, n) in [
        (1usize, 1usize),
        (2, 10),
        (50_001, 1),
        (12_345, 777),
        (total_lines, 1),
        (total_lines - 2, 50),
    ] {
        let (s, got) = read_raw(&app, &ann, art, &format!("line={line}&lines={n}"));
        assert_eq!(s, 200);
        assert!(got == expected_lines(&bytes, line, n), "lines {line}+{n}");
    }
    let (_, last) = read_raw(&app, &ann, art, &format!("line={total_lines}"));
    assert_eq!(last, b"last line without a terminator");
    assert_error(
        call(app.get(
            &ann,
            &format!("/v1/artifacts/{art}?line={}", total_lines + 1),
        )),
        422,
        "VALIDATION_FAILED",
    );
    assert_error(
        call(app.get(&ann, &format!("/v1/artifacts/{art}?line=0"))),
        422,
        "VALIDATION_FAILED",
    );
    assert_error(
        call(app.get(&ann, &format!("/v1/artifacts/{art}?offset=1&line=2"))),
        422,
        "VALIDATION_FAILED",
    );

    // The same range through MCP: the same bytes (UTF-8 here).
    let calls = mcp(
        &app,
        &ann,
        json!([
            {"tool": "artifact_read_range", "args": {"id": art, "line": 12_345, "lines": 3}},
            {"tool": "artifact_read_range", "args": {"id": art, "offset": 1_000_003, "length": 100}}
        ]),
    );
    assert_eq!(calls[0]["is_error"], false, "{}", calls[0]);
    assert_eq!(
        calls[0]["structured"]["content"]
            .as_str()
            .unwrap()
            .as_bytes(),
        expected_lines(&bytes, 12_345, 3)
    );
    let r = &calls[1]["structured"];
    let got: Vec<u8> = if r["encoding"] == "utf8" {
        r["content"].as_str().unwrap().as_bytes().to_vec()
    } else {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(r["content"].as_str().unwrap())
            .unwrap()
    };
    assert!(got == bytes[1_000_003..1_000_103]);

    // Content-addressed: the same bytes again are one blob, two artifacts.
    let b = put_artifact(&app, &ann, id, "pytest-output-again.txt", &bytes);
    assert_eq!(b["digest"], a["digest"]);
    assert_ne!(b["id"], a["id"]);
    let (_, list) = call(app.get(&ann, &format!("/v1/tasks/{id}/artifacts")));
    assert_eq!(list["artifacts"].as_array().unwrap().len(), 2);
    assert_error(
        call(put_artifact_req(&app, &ann, id, "bad name", b"x".to_vec())),
        422,
        "VALIDATION_FAILED",
    );
    assert_error(
        call(put_artifact_req(
            &app,
            &ann,
            id,
            "huge.bin",
            vec![b'a'; 9 * 1024 * 1024],
        )),
        413,
        "PAYLOAD_TOO_LARGE",
    );
}

#[test]
fn a_continuation_package_within_2000_tokens_carries_open_items_decisions_and_the_artifact() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let task = create_task(
        &app,
        &ann,
        "upgrade the payments service to the new ledger API",
        "every payment test passes against the new ledger",
    );
    let id = task["id"].as_str().unwrap().to_string();
    let log = tool_output(200_000);
    let art = put_artifact(&app, &ann, &id, "ledger-tests.log", &log);
    let art_id = art["id"].as_str().unwrap().to_string();

    let mut events = vec![
        json!({"id": "u1", "type": "user_message", "actor": "ann",
            "content": "Please move payments onto the ledger v2 API this week."}),
        json!({"id": "p1", "type": "plan", "actor": "agent",
            "content": "Plan: port the client, run the payment tests, fix failures."}),
        json!({"id": "d1", "type": "decision", "actor": "agent",
            "content": "Decision: keep the v1 client behind a flag until the tests pass."}),
        json!({"id": "o1", "type": "open_item", "actor": "agent",
            "content": "Open: refunds call the deprecated /v1/refund endpoint."}),
        json!({"id": "o2", "type": "open_item", "actor": "agent",
            "content": "Open: currency rounding differs for JPY."}),
        json!({"id": "o3", "type": "open_item", "actor": "agent",
            "content": "Open: the webhook signature header was renamed."}),
        json!({"id": "r3", "type": "resolved_item", "actor": "agent", "caused_by": "o3",
            "content": "Resolved: header renamed in the verifier."}),
        json!({"id": "t1", "type": "tool_result", "actor": "pytest", "artifact": art_id,
            "content": "Payment tests: 412 passed, 3 failed; output in the artifact."}),
        json!({"id": "a1", "type": "approval", "actor": "ann",
            "content": "Approved: the rounding change may ship behind the flag."}),
    ];
    // A long tail of chatter, so that the budget binds.
    for i in 0..300 {
        events.push(
            json!({"id": format!("n{i}"), "type": "note", "actor": "agent",
            "content": format!("Note {i}: inspected module payments/ledger_{i}.py, \
                nothing unusual in the call sites or the retry policy there.")}),
        );
    }
    events.push(json!({"id": "d2", "type": "decision", "actor": "agent",
        "content": "Decision: round JPY amounts half-even, as the ledger does."}));
    events.push(json!({"id": "o4", "type": "open_item", "actor": "agent",
        "content": "Open: the nightly reconciliation job still reads the v1 tables."}));
    for chunk in events.chunks(100) {
        append(&app, &ann, &id, json!(chunk));
    }
    // A compaction summary of the first 100 events: range checked, covered hash recorded.
    assert_error(
        call(app.post(
            &ann,
            &format!("/v1/tasks/{id}/summaries"),
            &json!({"from_seq": 1, "to_seq": 400, "content": "too far"}),
        )),
        422,
        "VALIDATION_FAILED",
    );
    assert_error(
        call(app.post(
            &ann,
            &format!("/v1/tasks/{id}/summaries"),
            &json!({"from_seq": 5, "to_seq": 4, "content": "backwards"}),
        )),
        422,
        "VALIDATION_FAILED",
    );
    let (s, sum) = call(app.post(
        &ann,
        &format!("/v1/tasks/{id}/summaries"),
        &json!({"from_seq": 1, "to_seq": 100,
            "content": "Summary: client ported; tests run; refunds, JPY rounding open."}),
    ));
    assert_eq!(s, 201, "{sum}");
    let first100 = all_events(&app, &ann, &id, 1000);
    let expected_hash = sha256_hex(
        first100[..100]
            .iter()
            .map(|e| format!("{}\n", e["content_hash"].as_str().unwrap()))
            .collect::<String>(),
    );
    assert_eq!(sum["covered_hash"], expected_hash);
    let (s, cp) = call(app.post(
        &ann,
        &format!("/v1/tasks/{id}/checkpoints"),
        &json!({"seq": 250, "label": "before the JPY decision"}),
    ));
    assert_eq!(s, 201, "{cp}");
    let (s, t) = call(
        app.client
            .patch(app.url(&format!("/v1/tasks/{id}")))
            .bearer_auth(&ann.secret)
            .json(&json!({"version": 1, "next_step": "fix the refund endpoint, then rerun"})),
    );
    assert_eq!(s, 200, "{t}");

    let ask = |budget: usize, checkpoint: Option<&str>| {
        let (s, c) = call(app.post(
            &ann,
            &format!("/v1/tasks/{id}/continuation"),
            &json!({"budget": budget, "checkpoint": checkpoint}),
        ));
        assert_eq!(s, 200, "{c}");
        c
    };
    let c = ask(2000, None);
    let used = c["used_tokens"].as_u64().unwrap();
    assert!(used <= 2000, "{used}");
    // Counted by the real tokenizer, as context packs count.
    let embedder = &app.state.services.backends.embedder;
    let mut sum_tokens = 0;
    for item in c["items"].as_array().unwrap() {
        let n = embedder
            .content_tokens(item["content"].as_str().unwrap())
            .unwrap();
        assert_eq!(item["tokens"], n, "{item}");
        sum_tokens += n;
    }
    assert_eq!(sum_tokens as u64, used);
    assert_eq!(
        embedder
            .content_tokens(c["text"].as_str().unwrap())
            .unwrap() as u64,
        used
    );
    let text = c["text"].as_str().unwrap();
    assert!(text.contains("upgrade the payments service") && text.contains("every payment test"));
    assert!(text.contains("fix the refund endpoint"), "the next step");
    assert!(
        text.contains("client ported; tests run"),
        "the latest summary"
    );
    // Open items: the unresolved ones, none resolved.
    let section = |name: &str| -> Vec<String> {
        c["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["section"] == name)
            .map(|i| i["source_id"].as_str().unwrap().to_string())
            .collect()
    };
    let mut open = section("open_items");
    open.sort();
    assert_eq!(open, vec!["o1", "o2", "o4"]);
    assert!(!text.contains("the webhook signature header was renamed"));
    // The latest decisions, newest first, and the approval.
    assert_eq!(section("decisions"), vec!["d2", "d1"]);
    assert_eq!(section("approvals"), vec!["a1"]);
    assert!(text.contains("round JPY amounts half-even"));
    // The artifact by reference, never its bytes.
    assert_eq!(section("artifacts"), vec![art_id.clone()]);
    assert!(text.contains(&art_id) && text.contains(&sha256_hex(&log)));
    assert!(!text.contains("pass test_"), "artifact content stays out");
    // The events after the summary: the newest that fit, in sequence order; the rest named.
    // (an event placed in an earlier section is not repeated there).
    let in_events: Vec<u64> = c["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["section"] == "events")
        .map(|i| i["seq"].as_u64().unwrap())
        .collect();
    assert!(in_events.windows(2).all(|w| w[0] < w[1]), "{in_events:?}");
    assert!(!in_events.contains(&310) && !in_events.contains(&311));
    let mut seqs: Vec<u64> = c["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["source_type"] == "event" && i["seq"].as_u64() > Some(100))
        .map(|i| i["seq"].as_u64().unwrap())
        .collect();
    seqs.sort();
    assert!(in_events.len() > 10, "{in_events:?}");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert_eq!(*seqs.last().unwrap(), 311);
    assert!(seqs[0] > 100);
    let m = &c["manifest"];
    assert_eq!(m["summary"], sum["id"]);
    assert_eq!(m["through_seq"], 311);
    assert_eq!(m["used_tokens"], used);
    assert!(
        m["omitted"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["reason"] == "over_budget" && o["section"] == "events")
    );
    assert!(
        !m.to_string().contains("Note 1:"),
        "the manifest holds hashes, not text"
    );
    // Deterministic.
    assert_eq!(ask(2000, None), c);

    // As of the checkpoint: nothing after seq 250 (the JPY decision and o4 are later).
    let at = ask(2000, Some(cp["id"].as_str().unwrap()));
    assert_eq!(at["manifest"]["through_seq"], 250);
    let at_text = at["text"].as_str().unwrap();
    assert!(!at_text.contains("half-even") && !at_text.contains("reconciliation"));
    assert!(at_text.contains("currency rounding differs for JPY"));

    // A budget smaller than the goal alone is refused, not cut.
    assert_error(
        call(app.post(
            &ann,
            &format!("/v1/tasks/{id}/continuation"),
            &json!({"budget": 5}),
        )),
        422,
        "FIXED_ZONE_OVER_BUDGET",
    );
    // The MCP tool answers the same package.
    let calls = mcp(
        &app,
        &ann,
        json!([{"tool": "task_continuation", "args": {"task": id, "budget": 2000}}]),
    );
    assert_eq!(calls[0]["is_error"], false, "{}", calls[0]);
    assert_eq!(calls[0]["structured"], c);
}

#[test]
fn another_tenant_reads_none_of_it_over_http_and_mcp() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let gus = app.key("globex", "gus", &["writer", "admin"], &[]);
    let task = create_task(
        &app,
        &ann,
        "rotate the staging certificates",
        "new certs live",
    );
    let id = task["id"].as_str().unwrap().to_string();
    append(
        &app,
        &ann,
        &id,
        json!([{"id": "e1", "type": "note", "actor": "agent", "content": "zqxacme private note"}]),
    );
    let art = put_artifact(&app, &ann, &id, "certs.txt", b"zqxacme cert inventory\n");
    let art_id = art["id"].as_str().unwrap().to_string();
    let (_, cp) = call(app.post(&ann, &format!("/v1/tasks/{id}/checkpoints"), &json!({})));
    let missing = "01HZZZZZZZZZZZZZZZZZZZZZZZ";

    // Every door answers exactly as for a task that does not exist.
    let patch = |key: &Key, t: &str| {
        call(
            app.client
                .patch(app.url(&format!("/v1/tasks/{t}")))
                .bearer_auth(&key.secret)
                .json(&json!({"version": 1, "status": "done"})),
        )
    };
    for t in [id.as_str(), missing] {
        let answers =
            vec![
            call(app.get(&gus, &format!("/v1/tasks/{t}"))),
            call(app.get(&gus, &format!("/v1/tasks/{t}/events"))),
            call(app.get(&gus, &format!("/v1/tasks/{t}/artifacts"))),
            call(app.get(&gus, &format!("/v1/tasks/{t}/marks"))),
            call(app.post(
                &gus,
                &format!("/v1/tasks/{t}/events"),
                &json!({"events": [{"id": "x", "type": "note", "actor": "gus", "content": "hi"}]}),
            )),
            call(app.post(&gus, &format!("/v1/tasks/{t}/continuation"), &json!({"budget": 500}))),
            call(app.post(
                &gus,
                &format!("/v1/tasks/{t}/summaries"),
                &json!({"from_seq": 1, "to_seq": 1, "content": "mine now"}),
            )),
            call(app.post(&gus, &format!("/v1/tasks/{t}/checkpoints"), &json!({}))),
            call(put_artifact_req(&app, &gus, t, "x.txt", b"x".to_vec())),
            patch(&gus, t),
            call(app.delete(&gus, &format!("/v1/tasks/{t}"))),
        ];
        for (i, a) in answers.into_iter().enumerate() {
            let body = assert_error(a, 404, "NOT_FOUND");
            assert!(!body.to_string().contains("zqxacme"), "{i}: {body}");
        }
    }
    for a in [art_id.as_str(), missing] {
        assert_error(
            call(app.get(&gus, &format!("/v1/artifacts/{a}"))),
            404,
            "NOT_FOUND",
        );
        assert_error(
            call(app.get(&gus, &format!("/v1/artifacts/{a}?line=1"))),
            404,
            "NOT_FOUND",
        );
        assert_error(
            call(app.get(&gus, &format!("/v1/artifacts/{a}/meta"))),
            404,
            "NOT_FOUND",
        );
    }
    let (_, list) = call(app.get(&gus, "/v1/tasks"));
    assert_eq!(list["tasks"], json!([]));
    // Nor may gus pin a checkpoint of ann's through a continuation of a task of his own.
    let own = create_task(&app, &gus, "gus's own task", "done");
    assert_error(
        call(app.post(
            &gus,
            &format!("/v1/tasks/{}/continuation", own["id"].as_str().unwrap()),
            &json!({"budget": 500, "checkpoint": cp["id"]}),
        )),
        422,
        "VALIDATION_FAILED",
    );

    // MCP: the same answers.
    let calls = mcp(
        &app,
        &gus,
        json!([
            {"tool": "task_append", "args": {"task": id, "events": [
                {"id": "x", "type": "note", "actor": "gus", "content": "hi"}]}},
            {"tool": "artifact_read_range", "args": {"id": art_id, "offset": 0, "length": 10}},
            {"tool": "task_continuation", "args": {"task": id, "budget": 500}},
            {"tool": "task_append", "args": {"task": missing, "events": [
                {"id": "x", "type": "note", "actor": "gus", "content": "hi"}]}},
            {"tool": "artifact_read_range", "args": {"id": missing, "line": 1}},
            {"tool": "task_continuation", "args": {"task": missing, "budget": 500}}
        ]),
    );
    for (i, c) in calls.iter().enumerate() {
        assert_eq!(c["is_error"], true, "{i}: {c}");
        assert_eq!(c["structured"]["error"]["code"], "NOT_FOUND", "{i}: {c}");
        assert!(!c.to_string().contains("zqxacme"), "{i}: {c}");
    }
    // Ann still has all of it, through MCP too.
    let calls = mcp(
        &app,
        &ann,
        json!([
            {"tool": "artifact_read_range", "args": {"id": art_id, "line": 1}},
            {"tool": "task_append", "args": {"task": id, "events": [
                {"id": "e1", "type": "note", "actor": "agent", "content": "zqxacme private note"},
                {"id": "e2", "type": "note", "actor": "agent", "content": "second"}]}}
        ]),
    );
    assert_eq!(
        calls[0]["structured"]["content"],
        "zqxacme cert inventory\n"
    );
    assert_eq!(calls[1]["structured"]["appended"], 1, "{}", calls[1]);
    assert_eq!(calls[1]["structured"]["duplicates"], 1);
    let events = all_events(&app, &ann, &id, 100);
    assert_eq!(events.len(), 2);
}

#[test]
fn deleting_a_task_leaves_no_byte_of_its_canaries_on_disk() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let task = create_task(&app, &ann, "debug the vault outage", "root cause found");
    let id = task["id"].as_str().unwrap().to_string();
    let keep = create_task(&app, &ann, "an unrelated task", "stays");
    let keep_id = keep["id"].as_str().unwrap().to_string();
    append(
        &app,
        &ann,
        &keep_id,
        json!([{"id": "k1", "type": "note", "actor": "agent", "content": "zqxkeepme survives"}]),
    );
    let event_canary = "zqxevtcanary5521";
    let artifact_canary = "zqxartcanary7730";
    let summary_canary = "zqxsumcanary3318";
    let mut big = tool_output(300_000);
    big.extend_from_slice(format!("\nvault token dump {artifact_canary}\n").as_bytes());
    let art = put_artifact(&app, &ann, &id, "vault-debug.log", &big);
    let art_id = art["id"].as_str().unwrap().to_string();
    append(
        &app,
        &ann,
        &id,
        json!([
            {"id": "e1", "type": "tool_result", "actor": "vault", "artifact": art_id,
                "content": format!("vault said {event_canary} before sealing")},
            {"id": "e2", "type": "decision", "actor": "agent", "content": "unseal with quorum"}
        ]),
    );
    let (s, _) = call(app.post(
        &ann,
        &format!("/v1/tasks/{id}/summaries"),
        &json!({"from_seq": 1, "to_seq": 2, "content": format!("summary {summary_canary}")}),
    ));
    assert_eq!(s, 201);
    app.client
        .patch(app.url(&format!("/v1/tasks/{id}")))
        .bearer_auth(&ann.secret)
        .json(&json!({"version": 1, "status": "failed"}))
        .send()
        .unwrap();
    let blob_key = registry_core::store::namespaced_blob_key("acme", &sha256_hex(&big));
    let backends = &app.state.services.backends;
    assert!(backends.blobs.get(&blob_key).unwrap().is_some());
    if !on_postgres() {
        // Before: the artifact's bytes are on disk (on PostgreSQL: in the database).
        let found = files_containing(&app.state.config.data_dir, artifact_canary.as_bytes());
        assert!(!found.is_empty());
    }

    let (s, receipt) = call(app.delete(&ann, &format!("/v1/tasks/{id}?reason=done%20with%20it")));
    assert_eq!(s, 200, "{receipt}");
    assert_eq!(receipt["status"], "completed");
    assert_eq!(receipt["level_reached"], "purged");
    assert_eq!(receipt["assets"][0]["id"], id);
    assert_eq!(receipt["assets"][0]["kind"], "task");
    assert_eq!(receipt["counts"]["blobs"], 1, "{receipt}");
    let r = receipt.to_string();
    for c in [event_canary, artifact_canary, summary_canary] {
        assert!(!r.contains(c));
    }

    assert_error(
        call(app.get(&ann, &format!("/v1/tasks/{id}"))),
        404,
        "NOT_FOUND",
    );
    assert_error(
        call(app.get(&ann, &format!("/v1/tasks/{id}/events"))),
        404,
        "NOT_FOUND",
    );
    assert_error(
        call(app.get(&ann, &format!("/v1/artifacts/{art_id}"))),
        404,
        "NOT_FOUND",
    );
    for c in [event_canary, artifact_canary, summary_canary] {
        let found = files_containing(&app.state.config.data_dir, c.as_bytes());
        assert!(found.is_empty(), "{c} still on disk in {found:?}");
    }
    // Gone from the store's tables and the blob store (on PostgreSQL too, where no file of
    // the data directory held them).
    assert!(backends.blobs.get(&blob_key).unwrap().is_none());
    assert!(backends.store.artifact(&art_id).unwrap().is_none());
    assert_eq!(backends.store.last_seq(&id).unwrap(), 0);
    assert!(
        backends
            .store
            .marks(&id, registry_core::task::MarkKind::Summary, 10)
            .unwrap()
            .is_empty()
    );
    // The other task is untouched.
    let events = all_events(&app, &ann, &keep_id, 100);
    assert_eq!(events[0]["content"], "zqxkeepme survives");
}

/// A memory that names a task, one of its events or its artifact as evidence is derived from
/// the task (a `cites` edge): the task's impact lists it and deleting the task flags it in the
/// receipt. Evidence the writer may not read links nothing, across users and tenants.
#[test]
fn memories_citing_a_task_or_its_artifact_are_flagged_when_the_task_is_deleted() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let bob = app.key("acme", "bob", &["writer"], &[]);
    let gus = app.key("globex", "gus", &["writer"], &[]);
    let task = create_task(
        &app,
        &ann,
        "find why the nightly export is slow",
        "cause named",
    );
    let id = task["id"].as_str().unwrap().to_string();
    let art = put_artifact(
        &app,
        &ann,
        &id,
        "export-profile.txt",
        b"scan on orders: 91%\n",
    );
    let art_id = art["id"].as_str().unwrap().to_string();
    append(
        &app,
        &ann,
        &id,
        json!([{"id": "d1", "type": "decision", "actor": "agent",
            "content": "add an index on orders.created_at"}]),
    );
    let write = |key: &Key, content: &str, evidence: Value| -> String {
        let (s, b) = call(app.post(
            key,
            "/v1/memories",
            &json!({"class": "semantic", "content": content, "evidence": evidence}),
        ));
        assert_eq!(s, 200, "{b}");
        b["id"].as_str().unwrap().to_string()
    };
    let from_artifact = write(
        &ann,
        "The nightly export spends most of its time scanning the orders table.",
        json!([format!("artifact:{art_id}"), "https://wiki.example/export"]),
    );
    let from_event = write(
        &ann,
        "An index on orders.created_at fixes the slow nightly export.",
        json!([format!("task:{id}#1")]),
    );
    let unrelated = write(
        &ann,
        "The export runs at 02:00 UTC.",
        json!(["ticket-1182"]),
    );
    // Another user of the tenant and another tenant name the same ids: nothing is linked.
    let bobs = write(
        &bob,
        "Bob heard the export is slow.",
        json!([format!("artifact:{art_id}"), id.clone()]),
    );
    let guss = write(
        &gus,
        "Gus guesses the export is slow.",
        json!([format!("artifact:{art_id}"), format!("task:{id}")]),
    );

    let (s, i) = call(app.get(&ann, &format!("/v1/assets/{id}/impact")));
    assert_eq!(s, 200, "{i}");
    let mut citing: Vec<String> = i["citing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    citing.sort();
    let mut expected = vec![from_artifact.clone(), from_event.clone()];
    expected.sort();
    assert_eq!(citing, expected, "{i}");
    assert!(
        i["citing"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["relation"] == "cites")
    );

    let (s, receipt) = call(app.delete(&ann, &format!("/v1/tasks/{id}?reason=closed")));
    assert_eq!(s, 200, "{receipt}");
    assert_eq!(receipt["status"], "completed");
    let mut flagged: Vec<String> = receipt["flagged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert_eq!(f["cites"], id.as_str(), "{receipt}");
            f["id"].as_str().unwrap().to_string()
        })
        .collect();
    flagged.sort();
    assert_eq!(flagged, expected, "{receipt}");
    // Flagged, not deleted: every memory still reads back, the others untouched.
    for (key, m) in [
        (&ann, &from_artifact),
        (&ann, &from_event),
        (&ann, &unrelated),
        (&bob, &bobs),
        (&gus, &guss),
    ] {
        let (s, b) = call(app.get(key, &format!("/v1/memories/{m}")));
        assert_eq!(s, 200, "{b}");
    }
}

#[test]
fn retention_purges_tasks_closed_longer_than_task_days() {
    let app = TestApp::start_with(|c| c.retention.task_days = 30);
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let old = create_task(&app, &ann, "an old finished task", "done");
    let old_id = old["id"].as_str().unwrap().to_string();
    let open = create_task(&app, &ann, "a task still open", "done");
    let recent = create_task(&app, &ann, "a task done today", "done");
    append(
        &app,
        &ann,
        &old_id,
        json!([{"id": "e1", "type": "note", "actor": "a", "content": "zqxretcanary8080"}]),
    );
    for t in [&old, &recent] {
        let (s, b) = call(
            app.client
                .patch(app.url(&format!("/v1/tasks/{}", t["id"].as_str().unwrap())))
                .bearer_auth(&ann.secret)
                .json(&json!({"version": 1, "status": "done"})),
        );
        assert_eq!(s, 200, "{b}");
    }
    // Closed 31 days ago: a new version of its head (versions are immutable) says so.
    let store = &app.state.services.backends.store;
    let mut head = store.get(&old_id).unwrap().unwrap();
    let closed = chrono::Utc::now() - chrono::Duration::days(31);
    head.body["closed_at"] = json!(closed);
    head.meta.version += 1;
    store
        .commit(vec![
            registry_core::store::WriteOp::SetStatus {
                id: old_id.clone(),
                version: Some(head.meta.version - 1),
                status: registry_core::asset::AssetStatus::Superseded,
                expect: None,
            },
            registry_core::store::WriteOp::PutVersion(Box::new(head)),
        ])
        .unwrap();
    let report = app.state.services.run_job("retention").unwrap();
    assert_eq!(report.outcome, "ok", "{report:?}");
    assert_eq!(report.counts["assets_purged"], 1, "{report:?}");
    assert_error(
        call(app.get(&ann, &format!("/v1/tasks/{old_id}"))),
        404,
        "NOT_FOUND",
    );
    for t in [&open, &recent] {
        let (s, _) = call(app.get(&ann, &format!("/v1/tasks/{}", t["id"].as_str().unwrap())));
        assert_eq!(s, 200);
    }
    assert!(files_containing(&app.state.config.data_dir, b"zqxretcanary8080").is_empty());
}

#[test]
fn a_context_pack_draws_on_a_task_as_one_more_layer() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let gus = app.key("globex", "gus", &["writer"], &[]);
    let task = create_task(
        &app,
        &ann,
        "ship the search reindex",
        "reindex done without downtime",
    );
    let id = task["id"].as_str().unwrap().to_string();
    append(
        &app,
        &ann,
        &id,
        json!([
            {"id": "o1", "type": "open_item", "actor": "agent",
                "content": "Open: the reindex needs a maintenance window."},
            {"id": "d1", "type": "decision", "actor": "agent",
                "content": "Decision: reindex shard by shard."}
        ]),
    );
    let ask = |key: &Key, task: &str| {
        call(app.post(
            key,
            "/v1/context",
            &json!({"goal": "continue the reindex", "budget": 1500, "task": task,
                "draw_on": ["memory"], "min_score": 0.0}),
        ))
    };
    let (s, pack) = ask(&ann, &id);
    assert_eq!(s, 200, "{pack}");
    let task_items: Vec<&Value> = pack["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["layer"] == "task")
        .collect();
    let kinds: Vec<&str> = task_items
        .iter()
        .map(|i| i["source_type"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"task_goal") && kinds.contains(&"task_event"),
        "{kinds:?}"
    );
    let text = pack["text"].as_str().unwrap();
    assert!(text.contains("reindex shard by shard") && text.contains("maintenance window"));
    assert!(pack["used_tokens"].as_u64().unwrap() <= 1500);
    assert_eq!(
        pack["manifest"]["layers"]["task"]["included"],
        task_items.len()
    );
    // Another tenant's task answers as a missing one.
    assert_error(ask(&gus, &id), 404, "NOT_FOUND");
    assert_error(ask(&gus, "01HZZZZZZZZZZZZZZZZZZZZZZZ"), 404, "NOT_FOUND");
}
