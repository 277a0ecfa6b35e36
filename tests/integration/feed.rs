//! The change feed: an SSE reader and a webhook receiver (a real HTTP server in the test) see a
//! memory held for review and a skill released, signed and without content; another tenant's
//! subscribers see nothing of it; a private target is refused without the operator's setting;
//! a failing receiver gets retries, then a dead letter, then a redelivery; and on two nodes
//! over PostgreSQL each event is delivered once.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::*;
use crate::skills::{ONE_TEST, make_skill, pack, release};

const WAIT: Duration = Duration::from_secs(60);

fn wait_for(what: &str, done: impl Fn() -> bool) {
    let t = Instant::now();
    while !done() {
        assert!(t.elapsed() < WAIT, "{what}: not within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// HMAC-SHA256 written out from its definition (RFC 2104), so the check does not share code
/// with the server's signer.
fn hmac_sha256(key: &[u8], msg: &[u8]) -> String {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| k.iter().map(|x| x ^ b).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    hex::encode(outer)
}

/// One request a receiver got.
#[derive(Debug, Clone)]
struct Received {
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

impl Received {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    fn signed_by(&self, secret: &str) -> bool {
        self.headers.get("x-registry-signature")
            == Some(&format!(
                "sha256={}",
                hmac_sha256(secret.as_bytes(), &self.body)
            ))
    }
}

/// A webhook receiver on a loopback port that records every request and answers `status`.
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Received>>>,
    status: Arc<AtomicU16>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let got = Arc::new(Mutex::new(vec![]));
        let status = Arc::new(AtomicU16::new(200));
        let (g, s) = (got.clone(), status.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                if let Some(r) = read_request(&mut conn) {
                    g.lock().unwrap().push(r);
                }
                let code = s.load(Ordering::SeqCst);
                let _ = conn.write_all(
                    format!("HTTP/1.1 {code} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .as_bytes(),
                );
            }
        });
        Receiver { url, got, status }
    }

    fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }
}

fn read_request(conn: &mut std::net::TcpStream) -> Option<Received> {
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut headers = HashMap::new();
    loop {
        line.clear();
        r.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    let n: usize = headers.get("content-length")?.parse().ok()?;
    let mut body = vec![0; n];
    r.read_exact(&mut body).ok()?;
    Some(Received { headers, body })
}

/// An SSE reader of `/v1/events` in a thread: every event's `(id, event, data)` and the raw text.
struct SseReader {
    events: Arc<Mutex<Vec<(u64, String, Value)>>>,
    raw: Arc<Mutex<String>>,
}

impl SseReader {
    fn open(app: &TestApp, key: &Key, after: u64) -> SseReader {
        let resp = Client::builder()
            .timeout(None)
            .build()
            .unwrap()
            .get(app.url(&format!("/v1/events?after={after}")))
            .bearer_auth(&key.secret)
            .send()
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        let events = Arc::new(Mutex::new(vec![]));
        let raw = Arc::new(Mutex::new(String::new()));
        let (ev, rw) = (events.clone(), raw.clone());
        std::thread::spawn(move || {
            let (mut id, mut kind, mut data) = (0u64, String::new(), String::new());
            for line in BufReader::new(resp).lines() {
                let Ok(line) = line else { break };
                rw.lock().unwrap().push_str(&line);
                rw.lock().unwrap().push('\n');
                if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().parse().unwrap();
                } else if let Some(v) = line.strip_prefix("event:") {
                    kind = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim());
                } else if line.is_empty() && !data.is_empty() {
                    let v: Value = serde_json::from_str(&data).unwrap();
                    ev.lock().unwrap().push((id, kind.clone(), v));
                    data.clear();
                }
            }
        });
        SseReader { events, raw }
    }

    fn asset_ids(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(_, _, v)| v["asset_id"].as_str().map(String::from))
            .collect()
    }
}

fn register(app: &TestApp, key: &Key, url: &str, events: &[&str]) -> (String, String) {
    let (s, b) = call(app.post(key, "/v1/webhooks", &json!({"url": url, "events": events})));
    assert_eq!(s, 201, "{b}");
    (
        b["id"].as_str().unwrap().to_string(),
        b["secret"].as_str().unwrap().to_string(),
    )
}

fn write_memory(app: &TestApp, key: &Key, body: Value) -> Value {
    let (s, b) = call(app.post(key, "/v1/memories", &body));
    assert!(s == 200 || s == 201, "{b}");
    b
}

fn feed_config(c: &mut registry_server::config::Config) {
    c.webhooks.allow_private_targets = true;
    c.webhooks.poll_interval_ms = 100;
}

#[test]
fn sse_and_webhook_see_a_held_memory_and_a_released_skill_signed_and_without_content() {
    let app = TestApp::start_with(feed_config);
    let ann = app.key("acme", "ann", &["admin"], &[]);
    let rita = app.key("acme", "rita", &["reviewer"], &[]);
    let bob = app.key("acme", "bob", &["reader"], &[]);
    let gus = app.key("globex", "gus", &["admin"], &[]);
    let (acme_hook, globex_hook) = (Receiver::start(), Receiver::start());
    let (_, secret) = register(
        &app,
        &ann,
        &acme_hook.url,
        &["memory.held", "skill.version.moved"],
    );
    let (_, globex_secret) = register(
        &app,
        &gus,
        &globex_hook.url,
        &["memory.held", "skill.version.moved", "memory.written"],
    );
    let acme_sse = SseReader::open(&app, &ann, 0);
    let globex_sse = SseReader::open(&app, &gus, 0);
    let bob_sse = SseReader::open(&app, &bob, 0);

    let canary = "zqfeedcanary4471";
    let held = write_memory(
        &app,
        &ann,
        json!({"class": "semantic", "content": format!("Ann is probably vegetarian {canary}"),
               "source": "model_inference"}),
    );
    assert_eq!(held["decision"], "candidate", "{held}");
    let held_id = held["id"].as_str().unwrap().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let skill = make_skill(tmp.path(), "book-invoices", "1.0.0", ONE_TEST, canary);
    let version = release(&app, &ann, &rita, &pack(&skill).0, None);
    let skill_id = version["id"].as_str().unwrap().to_string();

    // The webhook: the held memory and the promotion, each signed, none with content.
    wait_for("acme webhook deliveries", || {
        let got = acme_hook.received();
        got.iter()
            .any(|r| r.json()["event"]["kind"] == "memory.held")
            && got
                .iter()
                .any(|r| r.json()["event"]["action"] == "skill.promote")
    });
    for r in acme_hook.received() {
        assert!(r.signed_by(&secret), "bad signature: {:?}", r.headers);
        let body = r.json();
        assert_eq!(
            r.headers["x-registry-delivery"],
            body["delivery"].as_str().unwrap()
        );
        assert_eq!(
            r.headers["x-registry-timestamp"],
            body["sent_at"].as_i64().unwrap().to_string()
        );
        assert!(!String::from_utf8_lossy(&r.body).contains(canary));
        assert_eq!(body["event"]["scope"]["tenant"], "acme");
    }
    let held_event = acme_hook
        .received()
        .into_iter()
        .map(|r| r.json()["event"].clone())
        .find(|e| e["kind"] == "memory.held")
        .unwrap();
    assert_eq!(held_event["asset_id"], held_id.as_str());
    assert_eq!(held_event["asset_kind"], "memory");
    assert!(held_event["after_hash"].is_string());
    let promoted = acme_hook
        .received()
        .into_iter()
        .map(|r| r.json()["event"].clone())
        .find(|e| e["action"] == "skill.promote")
        .unwrap();
    assert_eq!(promoted["kind"], "skill.version.moved");
    assert_eq!(promoted["asset_id"], skill_id.as_str());
    assert_eq!(promoted["asset_kind"], "skill_version");

    // The SSE reader: the same events, with their sequence numbers as ids.
    wait_for("acme SSE events", || {
        let ev = acme_sse.events.lock().unwrap();
        ev.iter()
            .any(|(_, k, v)| k == "memory.held" && v["asset_id"] == held_id.as_str())
            && ev
                .iter()
                .any(|(_, k, v)| k == "skill.version.moved" && v["action"] == "skill.promote")
    });
    for (id, kind, v) in acme_sse.events.lock().unwrap().iter() {
        assert_eq!(*id, v["seq"].as_u64().unwrap());
        assert_eq!(kind, v["kind"].as_str().unwrap());
    }
    assert!(!acme_sse.raw.lock().unwrap().contains(canary));
    assert!(acme_sse.asset_ids().contains(&skill_id));

    // Another user of the tenant, a reader: the released skill, which it may read, and not
    // Ann's held memory, which it may not (the access rule of every read).
    wait_for("bob sees the promotion", || {
        bob_sse
            .events
            .lock()
            .unwrap()
            .iter()
            .any(|(_, _, v)| v["action"] == "skill.promote")
    });
    assert!(!bob_sse.asset_ids().contains(&held_id));
    assert!(!bob_sse.raw.lock().unwrap().contains(canary));

    // Another tenant: a write of its own goes through after all of acme's, and nothing of
    // acme's reached it before.
    let own = write_memory(
        &app,
        &gus,
        json!({"class": "semantic", "content": "Globex ships orders on Fridays"}),
    );
    let own_id = own["id"].as_str().unwrap().to_string();
    wait_for("globex SSE sees its own write", || {
        globex_sse.asset_ids().contains(&own_id)
    });
    wait_for("globex webhook gets its own write", || {
        !globex_hook.received().is_empty()
    });
    assert_eq!(globex_sse.asset_ids(), vec![own_id.clone()]);
    let got = globex_hook.received();
    assert_eq!(
        got.len(),
        1,
        "{:?}",
        got.iter().map(Received::json).collect::<Vec<_>>()
    );
    assert!(got[0].signed_by(&globex_secret));
    assert!(!got[0].signed_by(&secret));
    assert_eq!(got[0].json()["event"]["asset_id"], own_id.as_str());
}

#[test]
fn a_private_target_is_refused_without_the_operators_setting() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["admin"], &[]);
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://10.0.0.8/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:9/",
        "http://[::ffff:127.0.0.1]:9/",
        "http://[fd00::1]/",
        "http://0.0.0.0:9/",
        "http://224.0.0.1/",
    ] {
        let b = assert_error(
            call(app.post(
                &ann,
                "/v1/webhooks",
                &json!({"url": url, "events": ["memory.held"]}),
            )),
            422,
            "VALIDATION_FAILED",
        );
        assert_eq!(b["error"]["details"]["field"], "url", "{url}");
        assert_eq!(b["error"]["details"]["reason"], "forbidden_target", "{url}");
    }
    for (body, field) in [
        (
            json!({"url": "ftp://example.com/", "events": ["memory.held"]}),
            "url",
        ),
        (
            json!({"url": "http://u:p@example.com/", "events": ["memory.held"]}),
            "url",
        ),
        (
            json!({"url": "http://example.com/", "events": ["memory.nope"]}),
            "events[0]",
        ),
        (
            json!({"url": "http://example.com/", "events": []}),
            "events",
        ),
    ] {
        let b = assert_error(
            call(app.post(&ann, "/v1/webhooks", &body)),
            422,
            "VALIDATION_FAILED",
        );
        assert_eq!(b["error"]["details"]["field"], field, "{body}");
    }
    let (s, b) = call(app.get(&ann, "/v1/webhooks"));
    assert_eq!(
        (s, b["webhooks"].as_array().unwrap().len()),
        (200, 0),
        "{b}"
    );
}

#[test]
fn a_failing_receiver_gets_retries_then_a_dead_letter_that_redelivers() {
    let app = TestApp::start_with(|c| {
        feed_config(c);
        c.webhooks.max_attempts = 3;
        c.webhooks.backoff_ms = 50;
        c.webhooks.max_backoff_secs = 1;
    });
    let ann = app.key("acme", "ann", &["admin"], &[]);
    let gus = app.key("globex", "gus", &["admin"], &[]);
    let hook = Receiver::start();
    hook.status.store(500, Ordering::SeqCst);
    let (id, secret) = register(&app, &ann, &hook.url, &["memory.written"]);
    write_memory(
        &app,
        &ann,
        json!({"class": "semantic", "content": "The build server is in Frankfurt"}),
    );
    let dead_path = format!("/v1/webhooks/{id}/dead-letters");
    wait_for("a dead letter", || {
        let (_, b) = call(app.get(&ann, &dead_path));
        !b["deliveries"].as_array().unwrap().is_empty()
    });
    let (_, b) = call(app.get(&ann, &dead_path));
    let dead = &b["deliveries"][0];
    assert_eq!(
        (dead["attempts"].as_u64(), dead["status"].as_str()),
        (Some(3), Some("dead"))
    );
    assert_eq!(dead["last_error"], "http 500");
    let got = hook.received();
    assert_eq!(got.len(), 3);
    let ids: BTreeSet<String> = got
        .iter()
        .map(|r| r.headers["x-registry-delivery"].clone())
        .collect();
    assert_eq!(ids.len(), 1, "a retry keeps its delivery id");
    assert!(got.iter().all(|r| r.signed_by(&secret)));

    // Another tenant cannot see the webhook nor its dead letters: as missing as a made-up id.
    let missing = assert_error(
        call(app.get(&gus, "/v1/webhooks/wh_nope")),
        404,
        "NOT_FOUND",
    );
    let other = assert_error(
        call(app.get(&gus, &format!("/v1/webhooks/{id}"))),
        404,
        "NOT_FOUND",
    );
    assert_eq!(
        missing["error"]["details"], other["error"]["details"],
        "another tenant's webhook answers as a missing one"
    );
    assert_error(call(app.get(&gus, &dead_path)), 404, "NOT_FOUND");
    let redeliver = format!("{dead_path}/{}/redeliver", dead["id"].as_str().unwrap());
    assert_error(
        call(app.post(&gus, &redeliver, &json!({}))),
        404,
        "NOT_FOUND",
    );

    // The receiver recovers; the owner redelivers.
    hook.status.store(200, Ordering::SeqCst);
    let (s, b) = call(app.post(&ann, &redeliver, &json!({})));
    assert_eq!(s, 202, "{b}");
    wait_for("the redelivery", || hook.received().len() == 4);
    wait_for("the dead-letter list empties", || {
        let (_, b) = call(app.get(&ann, &dead_path));
        b["deliveries"].as_array().unwrap().is_empty()
    });
    assert_error(
        call(app.post(&ann, &redeliver, &json!({}))),
        404,
        "NOT_FOUND",
    );
    let (s, _) = call(app.delete(&ann, &format!("/v1/webhooks/{id}")));
    assert_eq!(s, 204);
    assert_error(
        call(app.get(&ann, &format!("/v1/webhooks/{id}"))),
        404,
        "NOT_FOUND",
    );
}

#[test]
fn on_two_nodes_over_postgres_a_webhook_fires_once() {
    use registry_store_postgres::test_support::{TestSchema, test_database_url};
    let Some(url) = test_database_url("on_two_nodes_over_postgres_a_webhook_fires_once") else {
        return;
    };
    let schema = TestSchema::new(&url);
    let tmp = tempfile::tempdir().unwrap();
    let mut env = crate::cluster::cluster_env(&schema, &url, &tmp.path().join("audit.key"));
    env.push((
        "REGISTRY_WEBHOOKS__ALLOW_PRIVATE_TARGETS".into(),
        "true".into(),
    ));
    env.push(("REGISTRY_WEBHOOKS__POLL_INTERVAL_MS".into(), "50".into()));
    let a = ServerProcess::spawn_with(&tmp.path().join("a"), &env);
    let b = ServerProcess::spawn_with(&tmp.path().join("b"), &env);
    let key = crate::cluster::create_key(&tmp.path().join("a"), &env);
    let c = Client::new();
    let post = |base: &str, path: &str, body: Value| {
        call(
            c.post(format!("{base}{path}"))
                .bearer_auth(&key)
                .json(&body),
        )
    };
    let hook = Receiver::start();
    let (s, w) = post(
        &a.base,
        "/v1/webhooks",
        json!({"url": hook.url, "events": ["memory.written", "memory.held"]}),
    );
    assert_eq!(s, 201, "{w}");
    let secret = w["secret"].as_str().unwrap().to_string();
    let facts = [
        "The build server is in Frankfurt",
        "Invoices are approved by the finance lead",
        "The staging database restarts every Sunday",
        "Support answers tickets in English and German",
        "The office coffee machine takes oat milk",
    ];
    for (fact, base) in facts
        .iter()
        .zip([&a.base, &b.base, &a.base, &b.base, &a.base])
    {
        let (s, m) = post(
            base,
            "/v1/memories",
            json!({"class": "semantic", "content": fact}),
        );
        assert!(s == 200 || s == 201, "{m}");
    }
    wait_for("five deliveries", || hook.received().len() >= 5);
    // One more event: by the time it arrives, both nodes have run many rounds over the
    // first five, so a second sending of any of them would have arrived too.
    let (s, m) = post(
        &b.base,
        "/v1/memories",
        json!({"class": "semantic", "content": "Deploys are frozen during the quarter close"}),
    );
    assert!(s == 200 || s == 201, "{m}");
    wait_for("the sixth delivery", || {
        hook.received()
            .iter()
            .any(|r| r.json()["event"]["asset_id"] == m["id"])
    });
    std::thread::sleep(Duration::from_millis(500));
    let got = hook.received();
    let seqs: BTreeSet<u64> = got
        .iter()
        .map(|r| r.json()["event"]["seq"].as_u64().unwrap())
        .collect();
    assert_eq!((got.len(), seqs.len()), (6, 6), "each event delivered once");
    assert!(
        got.iter().all(|r| r.signed_by(&secret)),
        "both nodes sign with one secret"
    );
}

#[test]
fn a_task_status_move_reaches_the_feed_of_those_who_may_see_the_task_only() {
    use registry_core::feed::FeedKind;
    use registry_core::principal::{Principal, Role};
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let (s, t) = call(app.post(&ann, "/v1/tasks", &json!({"goal": "ship the export"})));
    assert_eq!(s, 201, "{t}");
    let id = t["id"].as_str().unwrap().to_string();
    let (s, t2) = call(
        app.client
            .patch(app.url(&format!("/v1/tasks/{id}")))
            .bearer_auth(&ann.secret)
            .json(&json!({"version": 1, "status": "done"})),
    );
    assert_eq!(s, 200, "{t2}");
    // The feed as each would read it (the function `/v1/events` and the webhooks read).
    let seen = |tenant: &str, user: &str| -> Vec<registry_core::feed::FeedEvent> {
        let mut p = Principal::new(tenant, user);
        p.roles = vec![Role::Writer];
        app.state
            .services
            .feed()
            .read(&p, 0, Some(&[FeedKind::TaskStatus]))
            .unwrap()
            .events
    };
    let mine = seen("acme", "ann");
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0].kind, FeedKind::TaskStatus);
    assert_eq!(mine[0].asset_id.as_deref(), Some(id.as_str()));
    assert_eq!(mine[0].asset_kind, Some(registry_core::AssetKind::Task));
    assert_eq!(mine[0].after_hash.as_deref(), t2["content_hash"].as_str());
    // Ann's task is hers: a colleague and another tenant see no event of it.
    assert!(seen("acme", "bob").is_empty());
    assert!(seen("globex", "ann").is_empty());
}

#[test]
fn an_event_stream_ends_after_its_lifetime_and_resumes_where_it_left() {
    let app = TestApp::start_with(|c| {
        feed_config(c);
        c.webhooks.max_stream_secs = 1;
    });
    let ann = app.key("acme", "ann", &["writer"], &[]);
    write_memory(
        &app,
        &ann,
        json!({"class": "semantic", "content": "Ann takes the 8:10 train.", "scope": "user"}),
    );
    // The whole answer arrives: the stream ends by itself after a second.
    let t = Instant::now();
    let resp = app.get(&ann, "/v1/events?after=0").send().unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let text = resp.text().unwrap();
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert!(text.contains("event: memory.written"), "{text}");
    let last: u64 = text
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .next_back()
        .unwrap()
        .parse()
        .unwrap();
    // Reconnecting with Last-Event-ID sends only what came after it.
    write_memory(
        &app,
        &ann,
        json!({"class": "semantic", "content": "Ann's badge is number 4711.", "scope": "user"}),
    );
    let text = app
        .get(&ann, "/v1/events")
        .header("Last-Event-ID", last.to_string())
        .send()
        .unwrap()
        .text()
        .unwrap();
    let ids: Vec<u64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|s| s.parse().unwrap())
        .collect();
    assert!(!ids.is_empty() && ids.iter().all(|i| *i > last), "{text}");
}
