//! Who a request acts as, checked on every door (issue 31, items 10-12): console sessions are
//! capped per key, the console refuses framing, sniffing, caching and sign-in guessing and shows
//! its refusals as pages, a tenant admin sees no registry-wide job runs, a purpose is bound to
//! the key as a project is, and an MCP session answers only the key that opened it. One test per
//! attack, performed through the door it was found on.

use std::net::{IpAddr, Ipv4Addr};

use reqwest::blocking::{Client, Response};
use reqwest::redirect::Policy;
use serde_json::{Value, json};

use crate::common::*;

/// A browser-like client for the console: no redirects followed, so a sign-in's `303` and its
/// cookie are seen as sent; requests leave from `from`.
fn console_client(from: IpAddr) -> Client {
    Client::builder()
        .redirect(Policy::none())
        .local_address(from)
        .build()
        .unwrap()
}

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn sign_in_from(app: &TestApp, client: &Client, secret: &str) -> Response {
    client
        .post(app.url("/ui/sign-in"))
        .form(&[("key", secret)])
        .send()
        .unwrap()
}

/// Signs in and returns the session cookie (`hr_console=…`).
fn sign_in(app: &TestApp, client: &Client, key: &Key) -> String {
    let r = sign_in_from(app, client, &key.secret);
    assert_eq!(r.status().as_u16(), 303, "sign-in refused");
    let set = r.headers()["set-cookie"].to_str().unwrap();
    set.split(';').next().unwrap().to_string()
}

/// `GET path` with a session cookie: (status, body).
fn page(app: &TestApp, client: &Client, cookie: &str, path: &str) -> (u16, String) {
    let r = client
        .get(app.url(path))
        .header("cookie", cookie)
        .send()
        .unwrap();
    (r.status().as_u16(), r.text().unwrap())
}

fn header<'a>(r: &'a Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .map(|v| v.to_str().unwrap())
        .unwrap_or_else(|| panic!("no {name} header on {}", r.url()))
}

#[test]
fn a_keys_sign_ins_never_sign_out_another_keys_session() {
    let app = TestApp::start();
    let boss = app.key("globex", "gail", &["admin"], &[]);
    let rita = app.key("acme", "rita", &["reader"], &[]);
    let client = console_client(LOCAL);
    let boss_cookie = sign_in(&app, &client, &boss);
    let first = sign_in(&app, &client, &rita);
    // The original attack: one more sign-in than the old table held, all with one reader key.
    for _ in 0..10_001 {
        let r = sign_in_from(&app, &client, &rita.secret);
        assert_eq!(r.status().as_u16(), 303);
    }
    assert_eq!(
        page(&app, &client, &boss_cookie, "/ui/").0,
        200,
        "the globex admin is still signed in"
    );
    // The reader's own oldest session is the one that went.
    assert_eq!(page(&app, &client, &first, "/ui/").0, 303);
}

#[test]
fn console_pages_refuse_framing_sniffing_and_caching() {
    let app = TestApp::start();
    let olga = app.key("acme", "olga", &["admin"], &[]);
    let client = console_client(LOCAL);
    let cookie = sign_in(&app, &client, &olga);
    let signed_in = |path: &str| {
        client
            .get(app.url(path))
            .header("cookie", &cookie)
            .send()
            .unwrap()
    };
    let anonymous = client.get(app.url("/ui/sign-in")).send().unwrap();
    for r in [signed_in("/ui/"), signed_in("/ui/audit"), anonymous] {
        assert_eq!(r.status().as_u16(), 200, "{}", r.url());
        assert_eq!(header(&r, "x-frame-options"), "DENY");
        assert!(
            header(&r, "content-security-policy").contains("frame-ancestors 'none'"),
            "{}",
            r.url()
        );
        assert_eq!(header(&r, "x-content-type-options"), "nosniff");
        assert_eq!(header(&r, "cache-control"), "no-store", "{}", r.url());
    }
    // The static assets may be cached, never sniffed.
    let css = signed_in("/ui/assets/console.css");
    assert_eq!(header(&css, "x-content-type-options"), "nosniff");
    assert!(header(&css, "cache-control").starts_with("public"));
}

#[test]
fn failed_sign_ins_are_throttled_per_client_and_lock_no_key() {
    let app = TestApp::start();
    let olga = app.key("acme", "olga", &["admin"], &[]);
    let guesser = console_client(LOCAL);
    for i in 0..registry_ui::throttle::FAILED_SIGN_INS {
        let r = sign_in_from(&app, &guesser, &format!("hr_{i:048x}"));
        assert_eq!(r.status().as_u16(), 401);
    }
    // Over its budget, the client is refused before any key is looked at, the right one too.
    for secret in ["hr_guess", olga.secret.as_str()] {
        let r = sign_in_from(&app, &guesser, secret);
        assert_eq!(r.status().as_u16(), 429);
        assert!(header(&r, "retry-after").parse::<u64>().unwrap() > 0);
        assert!(r.text().unwrap().contains("TOO_MANY_REQUESTS"));
    }
    // No key is locked: the same key signs in from another client, and works over the API.
    let other = console_client(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
    let cookie = sign_in(&app, &other, &olga);
    assert_eq!(page(&app, &other, &cookie, "/ui/").0, 200);
    assert_eq!(call(app.get(&olga, "/v1/whoami")).0, 200);
}

#[test]
fn plain_text_refusals_are_shown_in_the_console_error_page() {
    let app = TestApp::start();
    let olga = app.key("acme", "olga", &["admin"], &[]);
    let client = console_client(LOCAL);
    let cookie = sign_in(&app, &client, &olga);
    for path in [
        "/ui/memory?k=not-a-number",
        "/ui/audit?after=-1",
        "/ui/deletions?limit=<script>",
    ] {
        let r = client
            .get(app.url(path))
            .header("cookie", &cookie)
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{path}");
        assert!(
            header(&r, "content-type").starts_with("text/html"),
            "{path}"
        );
        assert_eq!(header(&r, "x-frame-options"), "DENY");
        let body = r.text().unwrap();
        assert!(body.contains("role=\"alert\""), "{path}: {body}");
        assert!(body.contains("BAD_REQUEST"), "{path}: {body}");
        assert!(!body.contains("<script>"), "{path}: quoted text is escaped");
    }
    // A method the route does not take: a page too, not an empty body.
    let r = client
        .get(app.url("/ui/sign-out"))
        .header("cookie", &cookie)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 405);
    assert!(header(&r, "content-type").starts_with("text/html"));
    assert!(r.text().unwrap().contains("METHOD_NOT_ALLOWED"));
}

#[test]
fn a_tenant_admins_overview_shows_no_registry_wide_job_runs() {
    let app = TestApp::start();
    app.state.services.run_job("decay").unwrap();
    let gail = app.key("globex", "gail", &["admin"], &[]);
    let root = app.platform_key("root", &["admin"]);
    let client = console_client(LOCAL);
    let tenant = sign_in(&app, &client, &gail);
    let (s, body) = page(&app, &client, &tenant, "/ui/");
    assert_eq!(s, 200);
    assert!(!body.contains("data-testid=\"jobs\""), "{body}");
    let platform = sign_in(&app, &client, &root);
    let (s, body) = page(&app, &client, &platform, "/ui/");
    assert_eq!(s, 200);
    assert!(body.contains("data-testid=\"jobs\""), "{body}");
}

const LEAVE: &str = "# Parental leave\n\nParental leave is sixteen weeks at full pay.";
const LEAVE_Q: &str = "parental leave weeks full pay";

fn leave_found(app: &TestApp, key: &Key, purpose: Option<&str>) -> (u16, bool) {
    let mut req = app.post(
        key,
        "/v1/knowledge/search",
        &json!({"query": LEAVE_Q, "min_score": 0.0}),
    );
    if let Some(p) = purpose {
        req = req.header("X-Purpose", p);
    }
    let (s, b) = call(req);
    (s, b.to_string().contains("leave.md"))
}

#[test]
fn a_purpose_header_cannot_claim_a_purpose_the_key_lacks() {
    let app = TestApp::start();
    let hana = app.key_with("acme", "hana", &["writer", "ingest"], |c| {
        c.purposes = vec!["hr".into()];
    });
    let (s, d) = call(app.post(
        &hana,
        "/v1/knowledge/documents",
        &json!({"source_id": "leave.md", "format": "md", "purposes": ["hr"], "content": LEAVE}),
    ));
    assert_eq!(s, 201, "{d}");
    let rita = app.key("acme", "rita", &["reader"], &[]);
    let sam = app.key_with("acme", "sam", &["reader"], |c| {
        c.purposes = vec!["support".into()];
    });
    // The attack: a reader names the purpose in the header.
    for k in [&rita, &sam] {
        assert_error(
            call(
                app.post(k, "/v1/knowledge/search", &json!({"query": LEAVE_Q}))
                    .header("X-Purpose", "hr"),
            ),
            403,
            "FORBIDDEN",
        );
        assert_eq!(leave_found(&app, k, None), (200, false));
    }
    assert_eq!(leave_found(&app, &sam, Some("support")), (200, false));
    // The key that holds the purpose reads the document when it names it.
    assert_eq!(leave_found(&app, &hana, None), (200, false));
    assert_eq!(leave_found(&app, &hana, Some("hr")), (200, true));
    // Every door reads the header through the same check: MCP too.
    let r = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth(&rita.secret)
        .header("accept", "application/json, text/event-stream")
        .header("host", "localhost")
        .header("X-Purpose", "hr")
        .json(&INIT.with(|v| v.clone()))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    // `*` is an admin's grant only, as for projects.
    let store = app.state.services.backends.store.as_ref();
    let wide = registry_server::cli::CreateKey {
        tenant: Some("acme".into()),
        user: "rita".into(),
        roles: vec!["reader".into()],
        purposes: vec!["*".into()],
        ..Default::default()
    };
    assert!(registry_server::cli::create_key(store, &wide).is_err());
}

thread_local! {
    static INIT: Value = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}});
}

fn mcp(app: &TestApp, key: &Key, session: Option<&str>, body: &Value) -> Response {
    let mut req = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth(&key.secret)
        .header("accept", "application/json, text/event-stream")
        .header("host", "localhost")
        .json(body);
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    req.send().unwrap()
}

#[test]
fn an_mcp_session_answers_only_the_key_that_opened_it() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let gus = app.key("globex", "gus", &["admin"], &[]);
    let r = mcp(&app, &ann, None, &INIT.with(|v| v.clone()));
    assert!(r.status().is_success(), "{}", r.status());
    let session = header(&r, "mcp-session-id").to_string();
    drop(r);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert!(
        mcp(&app, &ann, Some(&session), &initialized)
            .status()
            .is_success()
    );
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "memory_search", "arguments": {"query": "anything"}}});
    // The attack: another tenant's key presents the session id.
    let stolen = mcp(&app, &gus, Some(&session), &call);
    let unknown = mcp(&app, &gus, Some("no-such-session"), &call);
    assert_eq!(stolen.status().as_u16(), 404);
    assert_eq!(stolen.status(), unknown.status());
    assert_eq!(stolen.text().unwrap(), unknown.text().unwrap());
    // Closing it with the other key answers as closing an unknown session, and closes nothing.
    let close = |id: &str| {
        app.client
            .delete(app.url("/mcp"))
            .bearer_auth(&gus.secret)
            .header("host", "localhost")
            .header("mcp-session-id", id)
            .send()
            .unwrap()
            .status()
    };
    assert_eq!(close(&session), close("no-such-session"));
    // The key that opened it still uses it.
    let mine = mcp(&app, &ann, Some(&session), &call);
    assert_eq!(mine.status().as_u16(), 200);
    assert!(
        mine.text().unwrap().contains("hits"),
        "the owner's call ran in its session"
    );
}

/// A key restricts what it writes only to purposes it holds, on every door that takes
/// `purposes` (a memory write, one in a batch, a document): planting a record that is then
/// served only for a purpose the writer cannot name is refused with 403, and nothing is kept.
#[test]
fn a_writer_restricts_a_record_only_to_purposes_its_key_holds() {
    let app = TestApp::start();
    let hana = app.key_with("acme", "hana", &["writer", "ingest"], |c| {
        c.purposes = vec!["hr".into()];
    });
    let fact = |purposes: Value| {
        json!({"class": "semantic", "content": "Parental leave requests go to the people team.",
               "purposes": purposes})
    };
    assert_error(
        call(app.post(&hana, "/v1/memories", &fact(json!(["finance"])))),
        403,
        "FORBIDDEN",
    );
    assert_error(
        call(app.post(&hana, "/v1/memories", &fact(json!(["hr", "finance"])))),
        403,
        "FORBIDDEN",
    );
    let (s, b) = call(app.post(
        &hana,
        "/v1/memories/batch",
        &json!({"memories": [fact(json!(["finance"]))]}),
    ));
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["results"][0]["error"]["code"], "FORBIDDEN", "{b}");
    assert_error(
        call(app.post(
            &hana,
            "/v1/knowledge/documents",
            &json!({"source_id": "pay.md", "format": "md", "purposes": ["finance"],
                    "content": LEAVE}),
        )),
        403,
        "FORBIDDEN",
    );
    // The purpose the key holds is accepted, and read back under it.
    let (s, m) = call(app.post(&hana, "/v1/memories", &fact(json!(["hr"]))));
    assert_eq!(s, 200, "{m}");
    let id = m["id"].as_str().unwrap();
    let (s, _) = call(
        app.get(&hana, &format!("/v1/memories/{id}"))
            .header("X-Purpose", "hr"),
    );
    assert_eq!(s, 200);
    let (s, listed) = call(app.get(&hana, "/v1/knowledge/documents"));
    assert_eq!(s, 200);
    assert!(!listed.to_string().contains("pay.md"), "{listed}");
}
