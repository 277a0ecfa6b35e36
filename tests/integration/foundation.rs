//! Foundation: authentication, tenant isolation of reads, the error shape, the audit chain,
//! durability across kill -9, migrations and configuration errors.

use serde_json::json;

use crate::common::*;
use registry_core::Scope;
use registry_core::asset::{AssetKind, AssetMeta, AssetRecord, SourceKind};
use registry_core::audit::{AuditAction, AuditDraft};
use registry_core::hash::sha256_hex;
use registry_core::store::WriteOp;

fn seed_asset(app: &TestApp, tenant: &str) -> String {
    let mut meta = AssetMeta::new(
        AssetKind::Memory,
        Scope::tenant(tenant),
        "ann",
        SourceKind::System,
    );
    meta.content_hash = sha256_hex("seed");
    let id = meta.id.clone();
    app.state
        .services
        .backends
        .store
        .commit(vec![
            WriteOp::PutVersion(Box::new(AssetRecord {
                meta,
                lookup_key: None,
                body: json!({"text": "seed"}),
            })),
            WriteOp::Audit(
                AuditDraft::new("ann", AuditAction::MemoryWrite)
                    .tenant(tenant)
                    .asset(id.clone()),
            ),
        ])
        .unwrap();
    id
}

#[test]
fn healthz_and_openapi_answer_without_a_key() {
    let app = TestApp::start();
    let (s, body) = call(app.client.get(app.url("/healthz")));
    assert_eq!(s, 200);
    assert_eq!(body["status"], "ok");
    let (s, doc) = call(app.client.get(app.url("/openapi.json")));
    assert_eq!(s, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    assert!(doc["paths"]["/v1/whoami"].is_object());
}

#[test]
fn requests_without_a_valid_key_get_401() {
    let app = TestApp::start();
    let r = call(app.client.get(app.url("/v1/whoami")));
    assert_error(r, 401, "UNAUTHENTICATED");
    let r = call(
        app.client
            .get(app.url("/v1/whoami"))
            .bearer_auth("hr_wrong"),
    );
    assert_error(r, 401, "UNAUTHENTICATED");
    let k = app.key("acme", "ann", &[], &[]);
    let (s, me) = call(app.get(&k, "/v1/whoami"));
    assert_eq!(s, 200);
    assert_eq!(
        (me["tenant"].as_str(), me["user"].as_str()),
        (Some("acme"), Some("ann"))
    );
    // A revoked key stops working at once.
    assert!(
        registry_core::store::KeyStore::revoke_key(
            app.state.services.backends.store.as_ref(),
            &k.id,
            "test"
        )
        .unwrap()
    );
    assert_error(call(app.get(&k, "/v1/whoami")), 401, "UNAUTHENTICATED");
}

#[test]
fn another_tenants_asset_reads_exactly_like_a_missing_one() {
    let app = TestApp::start();
    let a = app.key("acme", "ann", &[], &[]);
    let b = app.key("globex", "bob", &[], &[]);
    let id = seed_asset(&app, "acme");
    let (s, own) = call(app.get(&a, &format!("/v1/assets/{id}")));
    assert_eq!(s, 200, "{own}");
    let theirs = assert_error(
        call(app.get(&b, &format!("/v1/assets/{id}"))),
        404,
        "NOT_FOUND",
    );
    let missing = assert_error(
        call(app.get(&b, "/v1/assets/0190aaaa-0000-7000-8000-000000000000")),
        404,
        "NOT_FOUND",
    );
    // Same shape, same code: nothing tells B that the id exists.
    assert_eq!(
        theirs["error"]["details"], missing["error"]["details"],
        "details differ"
    );
    let (_, list) = call(app.get(&b, "/v1/assets"));
    assert_eq!(list["assets"].as_array().unwrap().len(), 0);
    let (_, list) = call(app.get(&a, "/v1/assets?kind=memory"));
    assert_eq!(list["assets"].as_array().unwrap().len(), 1);
    assert_error(
        call(app.get(&a, "/v1/assets?kind=nonsense")),
        422,
        "VALIDATION_FAILED",
    );
}

#[test]
fn errors_have_one_shape_and_request_ids_come_back() {
    let app = TestApp::start();
    let resp = app.client.get(app.url("/no/such/route")).send().unwrap();
    assert!(resp.headers().get("x-request-id").is_some());
    let body: serde_json::Value = resp.json().unwrap();
    assert_eq!(body["error"]["code"], "NOT_FOUND");
    let k = app.key("acme", "ann", &[], &[]);
    assert_error(call(app.get(&k, "/v1/audit")), 403, "FORBIDDEN");
    let bad_ctx = app.get(&k, "/v1/whoami").header("x-project", "../etc");
    assert_error(call(bad_ctx), 422, "VALIDATION_FAILED");
}

#[test]
fn audit_endpoints_are_tenant_bound_and_verify_the_chain() {
    let app = TestApp::start();
    let admin = app.key("acme", "root", &["admin"], &[]);
    seed_asset(&app, "acme");
    seed_asset(&app, "globex");
    let (s, list) = call(app.get(&admin, "/v1/audit"));
    assert_eq!(s, 200);
    let events = list["events"].as_array().unwrap();
    assert!(!events.is_empty());
    assert!(events.iter().all(|e| e["tenant"] == "acme"));
    let (s, v) = call(app.get(&admin, "/v1/audit/verify"));
    assert_eq!((s, v["ok"].as_bool()), (200, Some(true)));
}

#[test]
fn editing_an_audit_row_makes_verify_fail_and_name_it() {
    crate::sqlite_only!("it reads or edits registry.db (the SQLite file) directly");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for u in ["a", "b", "c"] {
        let (code, out, err) = run_cli(&data, &["keys", "create", "--tenant", "acme", "--user", u]);
        assert_eq!(code, 0, "{out}{err}");
    }
    let (code, out, _) = run_cli(&data, &["audit", "verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("3 events"), "{out}");
    let conn = rusqlite::Connection::open(data.join("registry.db")).unwrap();
    conn.execute_batch(
        "DROP TRIGGER audit_no_update; UPDATE audit SET actor = 'mallory' WHERE seq = 2;",
    )
    .unwrap();
    drop(conn);
    let (code, out, _) = run_cli(&data, &["audit", "verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("BROKEN at event 2"), "{out}");
}

#[test]
fn an_acknowledged_write_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = ServerProcess::spawn(&data);
    // Written by a second process while the server runs (single writer per process; SQLite
    // serialises them), then the server dies without any chance to flush.
    let key = cli_key(&data, "acme", "ann");
    let client = reqwest::blocking::Client::new();
    let ok = client
        .get(format!("{}/v1/whoami", server.base))
        .bearer_auth(&key)
        .send()
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    server.kill9();
    let server = ServerProcess::spawn(&data);
    let again = client
        .get(format!("{}/v1/whoami", server.base))
        .bearer_auth(&key)
        .send()
        .unwrap();
    assert_eq!(again.status().as_u16(), 200);
}

#[test]
fn a_qdrant_that_does_not_answer_stops_the_start_and_names_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // A port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let (code, _, err) = run_cli(
        &data,
        &["--qdrant-url", &url, "serve", "--bind", "127.0.0.1:0"],
    );
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("vectors.qdrant_url"), "{err}");
    assert!(err.contains(&url), "{err}");
    let (code, _, err) = run_cli(&data, &["--qdrant-url", "qdrant:6334", "serve"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("vectors.qdrant_url"), "{err}");
}

#[test]
fn migrations_run_on_an_empty_directory_and_on_an_existing_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fresh");
    let (code, out, err) = run_cli(&data, &["migrate"]);
    assert_eq!(code, 0, "{err}");
    let first = out.clone();
    let (code, out, _) = run_cli(&data, &["migrate"]);
    assert_eq!(code, 0);
    assert_eq!(out, first);
    assert!(out.starts_with("schema version"));
}

#[test]
fn bad_configuration_stops_the_start_and_names_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("registry.toml");
    std::fs::write(&cfg, "bind = \"not an address\"\n").unwrap();
    let (code, _, err) = run_cli(
        &dir.path().join("d"),
        &["--config", cfg.to_str().unwrap(), "migrate"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("`bind`"), "{err}");
    std::fs::write(&cfg, "max_body_bytes = \"lots\"\n").unwrap();
    let (code, _, err) = run_cli(
        &dir.path().join("d"),
        &["--config", cfg.to_str().unwrap(), "migrate"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("max_body_bytes"), "{err}");
    let (code, _, err) = run_cli(
        &dir.path().join("d"),
        &["--config", "/nonexistent/registry.toml", "migrate"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("does not exist"), "{err}");
}

#[test]
fn openapi_document_matches_its_snapshot() {
    let doc = registry_server::openapi::document();
    insta::assert_json_snapshot!("openapi", doc);
}
