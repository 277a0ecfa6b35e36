//! The wire contract: the served OpenAPI document describes every body with a real schema,
//! and a body the server cannot read answers with the field at fault.

use serde_json::{Value, json};

use crate::common::*;

/// An object schema that says nothing: no properties, no additional properties, no
/// composition, no reference. A client generated from it gets an untyped dict.
fn is_opaque(s: &Value) -> bool {
    let Some(m) = s.as_object() else { return false };
    let is_object_type = match m.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => false,
    };
    let says_something = [
        "properties",
        "additionalProperties",
        "patternProperties",
        "oneOf",
        "anyOf",
        "allOf",
        "$ref",
    ]
    .iter()
    .any(|k| m.contains_key(*k));
    is_object_type && !says_something
}

/// Every opaque object schema and every dangling `$ref`, by JSON path.
fn contract_faults(doc: &Value) -> Vec<String> {
    fn walk(v: &Value, path: &str, doc: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if is_opaque(v) {
                    out.push(format!("opaque object schema at {path}"));
                }
                if let Some(Value::String(r)) = m.get("$ref") {
                    let target = r.strip_prefix('#').and_then(|p| doc.pointer(p));
                    if target.is_none() {
                        out.push(format!("dangling $ref {r} at {path}"));
                    }
                }
                for (k, v) in m {
                    walk(v, &format!("{path}/{k}"), doc, out);
                }
            }
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    walk(v, &format!("{path}/{i}"), doc, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(doc, "", doc, &mut out);
    // A body schema of `{}` (anything) is as opaque as a bare object.
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            let mut bodies = vec![("request", &op["requestBody"])];
            for (status, r) in op["responses"].as_object().into_iter().flatten() {
                bodies.push((status.as_str(), r));
            }
            for (which, b) in bodies {
                for (ct, media) in b["content"].as_object().into_iter().flatten() {
                    let s = &media["schema"];
                    if ct == "application/json" && s.as_object().is_none_or(|m| m.is_empty()) {
                        out.push(format!("{method} {path} {which}: body without a schema"));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn openapi_has_no_opaque_body_and_no_dangling_reference() {
    let app = TestApp::start();
    let (s, doc) = call(app.client.get(app.url("/openapi.json")));
    assert_eq!(s, 200);
    let faults = contract_faults(&doc);
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

#[test]
fn the_opaque_schema_check_can_fail() {
    // The check itself, on a document that has each fault once.
    let doc = json!({
        "paths": {"/x": {"post": {
            "requestBody": {"content": {"application/json": {"schema": {}}}},
            "responses": {"200": {"content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Missing"}}}}}
        }}},
        "components": {"schemas": {
            "Bare": {"type": "object"},
            "Nullable": {"type": ["object", "null"]},
            "Map": {"type": "object", "additionalProperties": true},
            "Typed": {"type": "object", "properties": {"a": {"type": "string"}}}
        }}
    });
    let faults = contract_faults(&doc);
    assert_eq!(faults.len(), 4, "{faults:#?}");
    assert!(
        faults
            .iter()
            .any(|f| f.contains("/components/schemas/Bare"))
    );
    assert!(
        faults
            .iter()
            .any(|f| f.contains("/components/schemas/Nullable"))
    );
    assert!(faults.iter().any(|f| f.contains("dangling")));
    assert!(faults.iter().any(|f| f.contains("body without a schema")));
}

#[test]
fn memory_bodies_are_described_by_their_domain_types() {
    let doc = registry_server::openapi::document();
    let schemas = &doc["components"]["schemas"];
    // The placeholder points at the type serde reads.
    assert_eq!(
        schemas["WriteBody"]["$ref"],
        "#/components/schemas/WriteRequest"
    );
    let w = &schemas["WriteRequest"];
    assert_eq!(w["additionalProperties"], false, "deny_unknown_fields");
    let required: Vec<&str> = w["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(required, ["class", "content"]);
    // A unit enum is an `enum`, or a `oneOf` of documented `const`s.
    let class = &schemas["MemoryClass"];
    let values: Vec<&Value> = match class["enum"].as_array() {
        Some(e) => e.iter().collect(),
        None => class["oneOf"]
            .as_array()
            .expect("enum or oneOf")
            .iter()
            .map(|v| &v["const"])
            .collect(),
    };
    assert_eq!(
        values,
        [
            &json!("working"),
            &json!("episodic"),
            &json!("semantic"),
            &json!("procedural")
        ]
    );
}

/// Each bad body answers with the JSON path of the field at fault and a stable reason.
#[test]
fn a_bad_body_names_the_field_and_the_reason() {
    let app = TestApp::start();
    let k = app.key("acme", "ann", &["writer"], &[]);
    let cases: &[(&str, Value, u16, &str, &str)] = &[
        (
            "/v1/memories",
            json!({"class": "semantic"}),
            422,
            "content",
            "missing",
        ),
        (
            "/v1/memories",
            json!({"class": "nope", "content": "x"}),
            422,
            "class",
            "unknown_variant",
        ),
        (
            "/v1/memories",
            json!({"class": "semantic", "content": "x", "colour": "red"}),
            422,
            "colour",
            "unknown_field",
        ),
        (
            "/v1/memories",
            json!({"class": "semantic", "content": "x", "ttl_secs": -1}),
            422,
            "ttl_secs",
            "invalid_value",
        ),
        (
            "/v1/memories",
            json!({"class": "semantic", "content": "x", "entities": "ann"}),
            422,
            "entities",
            "invalid_type",
        ),
        (
            "/v1/memories",
            json!({"class": "semantic", "content": ""}),
            422,
            "content",
            "invalid",
        ),
        (
            "/v1/memories/search",
            json!({"query": "x", "filters": {"min_trust": "very"}}),
            422,
            "filters.min_trust",
            "unknown_variant",
        ),
        (
            "/v1/memories/batch",
            json!({"memories": [{"class": "semantic", "content": "a"},
                                {"class": "semantic", "content": 7}]}),
            422,
            "memories[1].content",
            "invalid_type",
        ),
        (
            "/v1/context",
            json!({"goal": "x", "budget": -5}),
            422,
            "budget",
            "invalid_value",
        ),
        (
            "/v1/knowledge/documents",
            json!({"source_id": "a.md", "format": "md", "content": ""}),
            422,
            "content",
            "invalid",
        ),
        (
            "/v1/knowledge/search",
            json!({"query": "x", "legs": "all"}),
            422,
            "legs",
            "unknown_variant",
        ),
        ("/v1/memories", json!([1, 2]), 422, "body", "invalid_type"),
    ];
    for (path, body, status, field, reason) in cases {
        let (s, b) = call(app.post(&k, path, body));
        assert_eq!(s, *status, "{path} {body}: {b}");
        assert_eq!(
            b["error"]["code"], "VALIDATION_FAILED",
            "{path} {body}: {b}"
        );
        let d = &b["error"]["details"];
        assert_eq!(d["field"], *field, "{path} {body}: {b}");
        assert_eq!(d["reason"], *reason, "{path} {body}: {b}");
    }
    // Not JSON at all: 400, with where the parser stopped.
    let (s, b) = call(
        app.client
            .post(app.url("/v1/memories"))
            .bearer_auth(&k.secret)
            .header("content-type", "application/json")
            .body("{\"class\": "),
    );
    assert_eq!(s, 400, "{b}");
    assert_eq!(b["error"]["code"], "BAD_REQUEST");
    assert_eq!(b["error"]["details"]["reason"], "invalid_json");
    assert_eq!(b["error"]["details"]["line"], 1);
    // Trailing bytes after a whole value are not JSON either.
    let (s, b) = call(
        app.client
            .post(app.url("/v1/memories/search"))
            .bearer_auth(&k.secret)
            .header("content-type", "application/json")
            .body("{\"query\": \"x\"} {}"),
    );
    assert_eq!(s, 400, "{b}");
    assert_eq!(b["error"]["details"]["reason"], "invalid_json");
    // The wrong content type keeps its own code.
    let (s, b) = call(
        app.client
            .post(app.url("/v1/memories"))
            .bearer_auth(&k.secret)
            .header("content-type", "text/plain")
            .body("{}"),
    );
    assert_eq!(s, 415, "{b}");
    assert_eq!(b["error"]["code"], "UNSUPPORTED_MEDIA_TYPE");
}

/// The typed Python client (`sdk/python`), its pytest suite run against this live server:
/// memory, knowledge, skills, context packs and deletion, errors by code, and every model
/// compared with the served OpenAPI document.
#[test]
fn python_sdk() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let rev = app.key("acme", "rita", &["reviewer"], &[]);
    let gus = app.key("globex", "gus", &["writer"], &[]);
    let tmp = tempfile::tempdir().unwrap();
    let skill_dir = crate::skills::make_skill(
        tmp.path(),
        "travel-booking",
        "1.0.0",
        crate::skills::ONE_TEST,
        "Book trains first; ask for approval before a flight.",
    );
    let (bytes, _) = crate::skills::pack(&skill_dir);
    // Another writer is its author: the SDK's key reports runs as a harness does, and an
    // author's own runs are not counted in its figures.
    let sam = app.key("acme", "sam", &["writer"], &[]);
    crate::skills::release(&app, &sam, &rev, &bytes, None);
    let sdk = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/python");
    let out = std::process::Command::new(crate::harness::python())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .current_dir(&sdk)
        .env("PYTHONPATH", &sdk)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("REGISTRY_URL", &app.base)
        .env("REGISTRY_KEY", &ann.secret)
        .env("REGISTRY_OTHER_KEY", &gus.secret)
        .env("REGISTRY_SKILL", "travel-booking")
        .output()
        .expect("the clients' python runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pytest failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every test ran: none skipped, none deselected.
    assert!(
        text.contains(" passed") && !text.contains("skipped"),
        "{text}"
    );
}

/// Cases schemathesis generates per operation and phase (issue 34: every check, 50 examples).
const SCHEMATHESIS_MAX_EXAMPLES: &str = "50";

/// The seed of this run: `SCHEMATHESIS_SEED` to repeat a run, otherwise a new one each time, so
/// that the contract is held under any seed and not under one that happens to pass. Printed
/// first, so a failure can be replayed.
fn schemathesis_seed() -> String {
    let seed = std::env::var("SCHEMATHESIS_SEED").unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        (u64::from(nanos) ^ (u64::from(std::process::id()) << 20)).to_string()
    });
    eprintln!("schemathesis: seed {seed} (SCHEMATHESIS_SEED={seed} repeats this run)");
    seed
}

/// schemathesis (pinned in tests/clients/requirements.txt) fuzzes every operation of the
/// served document with schema-valid and schema-invalid requests and checks each answer:
/// no 5xx, statuses, content types and bodies as documented, invalid data refused.
#[test]
fn schemathesis_finds_nothing() {
    // The server runs in this process: its warnings and errors (the cause behind a 500's
    // request id) are printed with the test's output when it fails. A DELETE of a document
    // answered 500 once in a full-suite run (2026-12-02) and never when run again.
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("warn")
        .try_init();
    // A feed stream ends after two seconds (the client reconnects), so that schemathesis, which
    // reads a whole answer, reads the stream's events and goes on.
    let app = TestApp::start_with(|c| c.webhooks.max_stream_secs = 2);
    // The key holds one purpose (an admin key made without `--purpose` holds all). A record
    // restricted to purposes is served only under `X-Purpose`, which a stateful run does not
    // send on the read that follows a write; a key restricts what it writes only to purposes it
    // holds, so the restricted writes schemathesis generates are refused (403) rather than kept
    // and then answered 404 by a read without the header.
    let admin = app.key_with("acme", "ann", &["writer", "reviewer", "admin"], |c| {
        c.clearance = Some("secret".into());
        c.purposes = vec!["contract".into()];
    });
    // Something to find, so that reads answer with bodies and not only 404s.
    let (s, b) = call(app.post(
        &admin,
        "/v1/memories",
        &json!({"class": "semantic", "content": "Ann prefers trains to flights.", "scope": "user"}),
    ));
    assert_eq!(s, 200, "{b}");
    let (s, b) = call(app.post(
        &admin,
        "/v1/knowledge/documents",
        &json!({"source_id": "policy/travel.md", "format": "md",
                "content": "# Travel\n\nTrains under 500 km; flights need approval.\n"}),
    ));
    assert_eq!(s, 201, "{b}");
    let seed = schemathesis_seed();
    let report = tempfile::tempdir().unwrap();
    let junit = report.path().join("schemathesis.xml");
    let st = crate::harness::python().with_file_name("st");
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/clients/schemathesis.toml");
    let out = std::process::Command::new(&st)
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(app.url("/openapi.json"))
        .args(["--checks", "all"])
        .args([
            "--header",
            &format!("Authorization: Bearer {}", admin.secret),
        ])
        .args(["--max-examples", SCHEMATHESIS_MAX_EXAMPLES])
        .args(["--seed", &seed])
        // One worker: with two, schemathesis parses lambdas' source in two threads at once, and
        // CPython 3.11 keeps the AST constructor's recursion depth in state shared by threads
        // (python/cpython#106905), so a run failed with "AST constructor recursion depth
        // mismatch", an error of the interpreter, not of this API.
        .args(["--workers", "1"])
        .args(["--request-timeout", "60"])
        .args(["--generation-database", "none"])
        .args(["--report", "junit", "--report-junit-path"])
        .arg(&junit)
        .arg("--no-color")
        .current_dir(report.path())
        .output()
        .expect("schemathesis runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let summary: String = text
        .lines()
        .rev()
        .take(15)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    eprintln!("schemathesis:\n{summary}");
    assert!(
        out.status.success(),
        "schemathesis found failures at seed {seed}:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A text's length is counted in characters, as the document's `maxLength` counts: at its
/// documented cap in Chinese (three bytes a character), in letters with combining marks, or in
/// short words (far more tokens than the embedding model's window: a memory or a query is
/// embedded by its prefix within the window) it is accepted through each door, and one
/// character more is refused with 413 naming the field and its length in characters. The cap is read from the served document, so the
/// document and the server are held to the same figure.
#[test]
fn a_text_at_its_documented_max_length_in_any_script_is_accepted_and_one_more_is_refused() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer", "reader"], &[]);
    let (s, doc) = call(app.client.get(app.url("/openapi.json")));
    assert_eq!(s, 200);
    let cap = |schema: &str, field: &str| -> usize {
        let m = &doc["components"]["schemas"][schema]["properties"][field]["maxLength"];
        m.as_u64()
            .unwrap_or_else(|| panic!("{schema}.{field} has no maxLength"))
            .try_into()
            .unwrap()
    };
    // "记" is three bytes; "ö" written as o + U+0308 is two characters of three bytes.
    let cjk = |n: usize| "记".repeat(n);
    let marks = |n: usize| {
        let mut t = "o\u{308}".repeat(n / 2);
        if n % 2 == 1 {
            t.push('a');
        }
        t
    };
    // Words of a few letters each: many more tokens than the model's window of 256.
    let words = |n: usize| -> String {
        let mut t: String = (0..n).map(|i| format!("w{} ", i % 1000)).collect();
        t.truncate(n);
        t.replace_range(n - 1.., "x");
        t
    };
    type Body = Box<dyn Fn(&str) -> (&'static str, Value)>;
    let doors: Vec<(&str, &str, Body)> = vec![
        (
            "WriteRequest",
            "content",
            Box::new(|t| ("/v1/memories", json!({"class": "semantic", "content": t}))),
        ),
        (
            "KnowledgeSearchRequest",
            "query",
            Box::new(|t| ("/v1/knowledge/search", json!({"query": t}))),
        ),
        (
            "RetrieveBody",
            "query",
            Box::new(|t| ("/v1/retrieve", json!({"query": t}))),
        ),
        (
            "WriteRequest",
            "subject",
            Box::new(|t| {
                let body = json!({"class": "semantic", "content": "The team uses the shared calendar.",
                                  "subject": t, "attribute": "calendar"});
                ("/v1/memories", body)
            }),
        ),
        (
            "MemorySearchRequest",
            "query",
            Box::new(|t| ("/v1/memories/search", json!({"query": t}))),
        ),
        (
            "CreateTask",
            "goal",
            Box::new(|t| ("/v1/tasks", json!({"goal": t}))),
        ),
        (
            "PackRequest",
            "phase",
            Box::new(|t| {
                (
                    "/v1/context",
                    json!({"goal": "Plan the week.", "budget": 500, "phase": t}),
                )
            }),
        ),
    ];
    for (schema, field, body) in &doors {
        let max = cap(schema, field);
        for text in [cjk(max), marks(max), words(max)] {
            assert_eq!(text.chars().count(), max);
            let (path, b) = body(&text);
            let (s, out) = call(app.post(&ann, path, &b));
            assert!(
                (200..300).contains(&s),
                "{path} {field} of {max} characters ({} bytes): {s} {out}",
                text.len()
            );
        }
        let (path, b) = body(&cjk(max + 1));
        let (s, out) = call(app.post(&ann, path, &b));
        assert_eq!(s, 413, "{path} {field} of {} characters: {out}", max + 1);
        assert_eq!(out["error"]["details"]["field"], *field, "{out}");
        assert_eq!(out["error"]["details"]["len"], max + 1, "{out}");
        assert_eq!(out["error"]["details"]["limit"], max, "{out}");
    }
}

/// A batch whose item the document refuses (a text over its cap) is refused whole, naming the
/// item and its field, and writes nothing: the items before it are not committed either.
#[test]
fn a_batch_with_an_item_over_a_documented_cap_is_refused_whole_and_writes_nothing() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer", "reader"], &[]);
    let over = "值".repeat(2049);
    let items = json!({"memories": [
        {"class": "semantic", "content": "The build server restarts at midnight."},
        {"class": "semantic", "content": "The deploy window is Tuesday.",
         "subject": "deploy", "attribute": "window", "value": over},
    ]});
    let (s, out) = call(app.post(&ann, "/v1/memories/batch", &items));
    assert_eq!(s, 413, "{out}");
    assert_eq!(
        out["error"]["details"]["field"], "memories[1].value",
        "{out}"
    );
    assert_eq!(out["error"]["details"]["len"], 2049, "{out}");
    let (s, found) = call(app.post(
        &ann,
        "/v1/memories/search",
        &json!({"query": "build server restarts at midnight"}),
    ));
    assert_eq!(s, 200, "{found}");
    assert_eq!(found["hits"].as_array().map(Vec::len), Some(0), "{found}");
}

#[test]
fn a_min_score_below_zero_by_less_than_a_float_resolves_is_refused() {
    // Found by schemathesis at seed 13092261467: `min_score` was read as a float, so
    // -5.4e-253 became -0.0 and passed the 0..1 check.
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer", "reader"], &[]);
    for min in [-5.441667549947718e-253, -1e-300, -0.5] {
        let (s, out) = call(app.post(
            &ann,
            "/v1/retrieve",
            &json!({"query": "deploy window", "min_score": min}),
        ));
        assert_eq!(s, 422, "{min}: {out}");
        assert_eq!(out["error"]["details"]["field"], "min_score", "{out}");
        let (s, out) = call(app.post(
            &ann,
            &format!("/v1/retrieve/langchain?min_score={min}"),
            &json!({"message": "deploy window"}),
        ));
        assert_eq!(s, 422, "{min}: {out}");
    }
    for min in [0.0, 1e-300, 1.0] {
        let (s, out) = call(app.post(
            &ann,
            "/v1/retrieve",
            &json!({"query": "deploy window", "min_score": min}),
        ));
        assert_eq!(s, 200, "{min}: {out}");
    }
}

#[test]
fn every_bounded_request_number_is_checked_as_the_double_it_arrived_as() {
    // The same class as `min_score` on /v1/retrieve: a context pack's `min_score` (0..1) and
    // knowledge search's `alpha` (0..1, not checked at all before) were read as floats, so a
    // value outside the bound by less than a float resolves narrowed to one inside it.
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer", "reader"], &[]);
    let pack = |min: f64| json!({"goal": "ship the release", "budget": 2000, "min_score": min});
    let search = |alpha: f64| json!({"query": "deploy window", "alpha": alpha});
    for bad in [-5.441667549947718e-253, -1e-300, -0.5, 1.5, 1.0 + 1e-12] {
        let (s, out) = call(app.post(&ann, "/v1/context", &pack(bad)));
        assert_eq!(s, 422, "pack min_score {bad}: {out}");
        assert_eq!(out["error"]["details"]["field"], "min_score", "{out}");
        let (s, out) = call(app.post(&ann, "/v1/knowledge/search", &search(bad)));
        assert_eq!(s, 422, "alpha {bad}: {out}");
        assert_eq!(out["error"]["details"]["field"], "alpha", "{out}");
    }
    for good in [0.0, 1e-300, 0.5, 1.0] {
        let (s, out) = call(app.post(&ann, "/v1/context", &pack(good)));
        assert_eq!(s, 200, "pack min_score {good}: {out}");
        let (s, out) = call(app.post(&ann, "/v1/knowledge/search", &search(good)));
        assert_eq!(s, 200, "alpha {good}: {out}");
    }
    // Knowledge search's own bar has no bound; any finite number is a bar, and the answer
    // echoes it as a number (schemathesis at seed 4849759316: -1.4e244 narrowed to an f32 was
    // -inf, echoed as null).
    for bar in [-1.4297129353947234e244, -1e300, -1e-300, 1e300] {
        let (s, out) = call(app.post(
            &ann,
            "/v1/knowledge/search",
            &json!({"query": "deploy window", "min_score": bar}),
        ));
        assert_eq!(s, 200, "knowledge min_score {bar}: {out}");
        assert_eq!(out["searched"]["min_score"].as_f64(), Some(bar), "{out}");
    }
}
