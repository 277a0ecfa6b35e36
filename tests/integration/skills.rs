//! Skills: publishing the public skill corpus, every lifecycle rule, disclosure, archive attacks
//! and tenant isolation, over real HTTP against real SQLite, blobs, tantivy and the tokenizer.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use skills_sdk::{ArchiveLimits, ValidationMode};

use crate::common::*;

/// The repository's `fixtures/` (every test reads its data from there).
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Writes a skill directory `parent/name` with a `skill.toml`.
pub(crate) fn make_skill(
    parent: &Path,
    name: &str,
    version: &str,
    extra_toml: &str,
    body: &str,
) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!(
            "---\nname: {name}\ndescription: Converts quarterly invoices into ledger entries. Use when the user asks to book invoices.\n---\n# {name}\n\n{body}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("skill.toml"),
        format!("owner = \"finance\"\nversion = \"{version}\"\n{extra_toml}"),
    )
    .unwrap();
    std::fs::write(dir.join("scripts/check.sh"), "#!/bin/sh\necho ok\n").unwrap();
    dir
}

pub(crate) const ONE_TEST: &str =
    "[[tests]]\nname = \"smoke\"\ncommand = [\"sh\", \"scripts/check.sh\"]\ntimeout_secs = 30\n";

pub(crate) fn pack(dir: &Path) -> (Vec<u8>, String) {
    let p = skills_sdk::pack_dir(dir, &ArchiveLimits::default()).unwrap();
    (p.bytes, p.digest.to_string())
}

pub(crate) fn publish(
    app: &TestApp,
    key: &Key,
    bytes: &[u8],
    version: Option<&str>,
) -> (u16, Value) {
    let path = match version {
        Some(v) => format!("/v1/skills?version={v}"),
        None => "/v1/skills".into(),
    };
    call(
        app.client
            .post(app.url(&path))
            .bearer_auth(&key.secret)
            .header("content-type", "application/octet-stream")
            .body(bytes.to_vec()),
    )
}

pub(crate) fn vpath(name: &str, version: &str, tail: &str) -> String {
    format!("/v1/skills/{name}/versions/{version}/{tail}")
}

pub(crate) fn pass_all(view: &Value) -> Value {
    let tests = view["manifest"]["tests"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    json!({
        "digest": view["digest"],
        "results": tests.iter().map(|t| json!({
            "name": t["name"], "passed": true, "duration_ms": 12,
            "log_digest": format!("sha256:{}", "ab".repeat(32)),
        })).collect::<Vec<_>>(),
    })
}

/// Test evidence for `name@ver` (its published view `v`) as the lifecycle demands it: a tester
/// beside `author` records passing results of the declared tests; a version that declares
/// none gets `reviewer`'s waiver. `h` adds headers (a project).
pub(crate) fn record_test_evidence(
    app: &TestApp,
    author: &Key,
    reviewer: &Key,
    v: &Value,
    h: &dyn Fn(reqwest::blocking::RequestBuilder) -> reqwest::blocking::RequestBuilder,
) -> Value {
    let (name, ver) = (v["name"].as_str().unwrap(), v["version"].as_str().unwrap());
    let declares_tests = v["manifest"]["tests"]
        .as_array()
        .is_some_and(|t| !t.is_empty());
    let (s, b) = if declares_tests {
        let tester = app.tester_for(author);
        call(h(app.post(
            &tester,
            &vpath(name, ver, "test-results"),
            &pass_all(v),
        )))
    } else {
        call(h(app.post(
            reviewer,
            &vpath(name, ver, "test-waiver"),
            &json!({"reason": "no executable behaviour to test"}),
        )))
    };
    assert_eq!((s, b["state"].as_str()), (200, Some("tested")), "{b}");
    b
}

/// publish → tests passed → approved by `reviewer` → promoted. Returns the version view.
pub(crate) fn release(
    app: &TestApp,
    author: &Key,
    reviewer: &Key,
    bytes: &[u8],
    version: Option<&str>,
) -> Value {
    release_in(app, author, reviewer, bytes, version, None)
}

/// As [`release`], every step sent with `X-Project: project` (a project skill).
pub(crate) fn release_in(
    app: &TestApp,
    author: &Key,
    reviewer: &Key,
    bytes: &[u8],
    version: Option<&str>,
    project: Option<&str>,
) -> Value {
    let (s, v) = publish(app, author, bytes, version);
    assert!(s == 201 || s == 200, "publish: {s} {v}");
    let (name, ver) = (v["name"].as_str().unwrap(), v["version"].as_str().unwrap());
    let h = |r: reqwest::blocking::RequestBuilder| match project {
        Some(p) => r.header("x-project", p),
        None => r,
    };
    record_test_evidence(app, author, reviewer, &v, &h);
    let (s, b) = call(h(app.post(
        reviewer,
        &vpath(name, ver, "review"),
        &json!({"decision": "approve", "comment": "looks right"}),
    )));
    assert_eq!(s, 200, "{b}");
    let (s, b) = call(h(app.post(
        author,
        &vpath(name, ver, "promote"),
        &json!({}),
    )));
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["state"], "published");
    b
}

fn discover(app: &TestApp, key: &Key, q: &str) -> Vec<Value> {
    let (s, b) = call(app.get(key, &format!("/v1/skills?q={q}&limit=50")));
    assert_eq!(s, 200, "{b}");
    b["skills"].as_array().unwrap().clone()
}

#[test]
fn public_skills_validate_as_expected_publish_and_are_discoverable() {
    let root = fixtures().join("skills-public");
    let tsv = std::fs::read_to_string(root.join("expected-verdicts.tsv")).unwrap();
    let app = TestApp::start();
    // One tenant per collection: both collections ship a `skill-creator`.
    let keys = |tenant: &str| {
        (
            app.key(tenant, "ann", &["writer"], &[]),
            app.key(tenant, "rita", &["reviewer"], &[]),
        )
    };
    let (anthropic, openai) = (keys("anthropic"), keys("openai"));
    let mut per_tenant = [0usize; 2];
    let (mut valid, mut invalid, mut tokens) = (0, 0, vec![]);
    for line in tsv.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let mut cols = line.split('\t');
        let (expected, rel) = (cols.next().unwrap(), cols.next().unwrap());
        let dir = root.join(rel);
        let report = skills_sdk::validate_dir(&dir, ValidationMode::Strict).unwrap();
        assert_eq!(
            report.is_valid(),
            expected == "valid",
            "{rel}: {:?}",
            report.diagnostics
        );
        if !report.is_valid() {
            invalid += 1;
            continue;
        }
        valid += 1;
        let t = usize::from(rel.starts_with("openai"));
        per_tenant[t] += 1;
        let (author, reviewer) = if t == 0 { &anthropic } else { &openai };
        let skill = report.skill.unwrap();
        let (bytes, digest) = pack(&dir);
        let (bytes2, digest2) = pack(&dir);
        assert_eq!(digest, digest2, "{rel}: digest not stable");
        assert_eq!(bytes, bytes2, "{rel}: archive not deterministic");
        let version = skill.version().is_none().then_some("1.0.0");
        let v = release(&app, author, reviewer, &bytes, version);
        assert_eq!(v["digest"], digest.as_str());
        let name = skill.name();
        let hits = discover(&app, author, &name.replace('-', "+"));
        let hit = hits
            .iter()
            .find(|h| h["name"] == name)
            .unwrap_or_else(|| panic!("{name} not discoverable: {hits:?}"));
        assert_eq!(hit["digest"], digest.as_str());
        tokens.push(hit["tokens"].as_u64().unwrap());
    }
    assert!(
        valid >= 20 && invalid >= 2,
        "valid {valid}, invalid {invalid}"
    );
    for (t, (author, _)) in [&anthropic, &openai].into_iter().enumerate() {
        let (_, all) = call(app.get(author, "/v1/skills?limit=200"));
        assert_eq!(all["skills"].as_array().unwrap().len(), per_tenant[t]);
    }
    let mean = tokens.iter().sum::<u64>() as f64 / tokens.len() as f64;
    eprintln!(
        "public skills: {valid} valid, {invalid} invalid; discover entry tokens mean {mean:.1}, max {}",
        tokens.iter().max().unwrap()
    );
}

#[test]
fn lifecycle_rules_hold() {
    let app = TestApp::start();
    let tmp = tempfile::tempdir().unwrap();
    let ann = app.key("acme", "ann", &["writer", "reviewer"], &[]);
    let rita = app.key("acme", "rita", &["reviewer"], &[]);
    let rob = app.key("acme", "rob", &["reader"], &[]);
    let dir = make_skill(tmp.path(), "book-invoices", "1.0.0", ONE_TEST, "Steps.");
    let (bytes, digest) = pack(&dir);
    let (s, v) = publish(&app, &ann, &bytes, None);
    assert_eq!(s, 201, "{v}");
    assert_eq!(
        (v["state"].as_str(), v["digest"].as_str()),
        (Some("draft"), Some(digest.as_str()))
    );
    let name = "book-invoices";

    // Versions are immutable: the same bytes are idempotent, other content conflicts.
    assert_eq!(publish(&app, &ann, &bytes, None).0, 200);
    std::fs::write(dir.join("scripts/check.sh"), "#!/bin/sh\necho changed\n").unwrap();
    let (other, _) = pack(&dir);
    assert_error(publish(&app, &ann, &other, None), 409, "CONFLICT");

    // Promote a draft: refused (no test run yet) with the state and the allowed transitions.
    let e = assert_error(
        call(app.post(&ann, &vpath(name, "1.0.0", "promote"), &json!({}))),
        409,
        "TEST_EVIDENCE_MISSING",
    );
    assert_eq!(e["error"]["details"]["reason"], "no_test_run");
    assert_eq!(e["error"]["details"]["state"], "draft");
    assert_eq!(
        e["error"]["details"]["allowed_transitions"],
        json!(["test"])
    );
    // Review before tests: illegal too.
    assert_error(
        call(app.post(
            &rita,
            &vpath(name, "1.0.0", "review"),
            &json!({"decision": "approve", "comment": ""}),
        )),
        409,
        "INVALID_TRANSITION",
    );

    // Results for another digest are refused and change nothing.
    let mut wrong = pass_all(&v);
    wrong["digest"] = json!(format!("sha256:{}", "00".repeat(32)));
    assert_error(
        call(app.post(&ann, &vpath(name, "1.0.0", "test-results"), &wrong)),
        409,
        "CONFLICT",
    );
    // Results must cover the declared tests.
    let mut missing = pass_all(&v);
    missing["results"] = json!([]);
    assert_error(
        call(app.post(&ann, &vpath(name, "1.0.0", "test-results"), &missing)),
        422,
        "VALIDATION_FAILED",
    );
    // A tester's failing run keeps the version in draft.
    let tess = app.tester_for(&ann);
    let mut failing = pass_all(&v);
    failing["results"][0]["passed"] = json!(false);
    let (s, b) = call(app.post(&tess, &vpath(name, "1.0.0", "test-results"), &failing));
    assert_eq!((s, b["state"].as_str()), (200, Some("draft")), "{b}");
    assert_eq!(b["tests"]["passed"], false);
    let e = assert_error(
        call(app.post(&ann, &vpath(name, "1.0.0", "promote"), &json!({}))),
        409,
        "TEST_EVIDENCE_MISSING",
    );
    assert_eq!(e["error"]["details"]["reason"], "tests_failed");

    let (s, b) = call(app.post(&tess, &vpath(name, "1.0.0", "test-results"), &pass_all(&v)));
    assert_eq!((s, b["state"].as_str()), (200, Some("tested")), "{b}");
    assert_eq!(b["tests"]["digest"], digest.as_str());
    // Tested but not approved: still no promote.
    let e = assert_error(
        call(app.post(&ann, &vpath(name, "1.0.0", "promote"), &json!({}))),
        409,
        "INVALID_TRANSITION",
    );
    assert_eq!(e["error"]["details"]["state"], "tested");

    // Self-review and review without the role are forbidden.
    let approve = json!({"decision": "approve", "comment": "ok"});
    let e = assert_error(
        call(app.post(&ann, &vpath(name, "1.0.0", "review"), &approve)),
        403,
        "FORBIDDEN",
    );
    assert_eq!(e["error"]["details"]["reason"], "self_review");
    // A reader does not see another's draft at all (#31: drafts to their author, reviewers
    // and admins only), so it cannot review it either.
    assert_error(
        call(app.post(&rob, &vpath(name, "1.0.0", "review"), &approve)),
        404,
        "NOT_FOUND",
    );
    // A rejection blocks promotion; a later approval allows it.
    let (s, b) = call(app.post(
        &rita,
        &vpath(name, "1.0.0", "review"),
        &json!({"decision": "reject", "comment": "typo"}),
    ));
    assert_eq!((s, b["state"].as_str()), (200, Some("rejected")));
    assert_error(
        call(app.post(&ann, &vpath(name, "1.0.0", "promote"), &json!({}))),
        409,
        "INVALID_TRANSITION",
    );
    let (s, b) = call(app.post(&rita, &vpath(name, "1.0.0", "review"), &approve));
    assert_eq!((s, b["state"].as_str()), (200, Some("approved")));
    // A reader cannot promote (nor see the draft).
    assert_error(
        call(app.post(&rob, &vpath(name, "1.0.0", "promote"), &json!({}))),
        404,
        "NOT_FOUND",
    );
    let (s, b) = call(app.post(&ann, &vpath(name, "1.0.0", "promote"), &json!({})));
    assert_eq!((s, b["state"].as_str()), (200, Some("published")), "{b}");
    assert_eq!(b["reviews"].as_array().unwrap().len(), 2);

    // Published: tests can no longer be recorded; unyank is illegal; deprecate and yank work.
    let e = assert_error(
        call(app.post(&ann, &vpath(name, "1.0.0", "test-results"), &pass_all(&v))),
        409,
        "INVALID_TRANSITION",
    );
    assert_eq!(
        e["error"]["details"]["allowed_transitions"],
        json!(["deprecate", "yank"])
    );
    assert_error(
        call(app.post(&ann, &vpath(name, "1.0.0", "unyank"), &json!({}))),
        409,
        "INVALID_TRANSITION",
    );
    let (s, b) = call(app.post(
        &ann,
        &vpath(name, "1.0.0", "deprecate"),
        &json!({"message": "use book-invoices-v2", "replacement": "book-invoices-v2"}),
    ));
    assert_eq!((s, b["state"].as_str()), (200, Some("deprecated")), "{b}");
    let hits = discover(&app, &ann, "invoices");
    assert_eq!(hits[0]["deprecated"], true);
    let (s, b) = call(app.post(
        &ann,
        &vpath(name, "1.0.0", "yank"),
        &json!({"reason": "bad math"}),
    ));
    assert_eq!((s, b["state"].as_str()), (200, Some("yanked")), "{b}");
    assert!(
        discover(&app, &ann, "invoices").is_empty(),
        "a yanked-only skill is not discoverable"
    );
    // Still loadable (lockfiles keep working), flagged as yanked.
    let resp = app
        .get(&ann, &vpath(name, "1.0.0", "archive"))
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["x-skill-state"], "yanked");
    let (s, b) = call(app.post(&ann, &vpath(name, "1.0.0", "unyank"), &json!({})));
    assert_eq!((s, b["state"].as_str()), (200, Some("deprecated")), "{b}");
    assert_eq!(discover(&app, &ann, "invoices").len(), 1);

    // Every step was audited with ids and digests only.
    let admin = app.key("acme", "root", &["admin"], &[]);
    let (_, audit) = call(app.get(&admin, "/v1/audit?limit=1000"));
    let actions: Vec<&str> = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .filter(|a| a.starts_with("skill."))
        .collect();
    for a in [
        "skill.publish",
        "skill.test",
        "skill.review",
        "skill.promote",
        "skill.release",
        "skill.deprecate",
        "skill.yank",
        "skill.unyank",
    ] {
        assert!(actions.contains(&a), "{a} not audited: {actions:?}");
    }
    let (s, v) = call(app.get(&admin, "/v1/audit/verify"));
    assert_eq!((s, v["ok"].as_bool()), (200, Some(true)));
}

#[test]
fn rollback_and_yank_move_the_current_release() {
    let app = TestApp::start();
    let tmp = tempfile::tempdir().unwrap();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let rita = app.key("acme", "rita", &["reviewer"], &[]);
    let name = "book-invoices";
    let mut digests = vec![];
    for (i, ver) in ["1.0.0", "1.1.0"].iter().enumerate() {
        let d = tmp.path().join(format!("v{i}"));
        let dir = make_skill(&d, name, ver, ONE_TEST, &format!("Revision {i}."));
        let (bytes, digest) = pack(&dir);
        release(&app, &ann, &rita, &bytes, None);
        digests.push(digest);
    }
    let current = |app: &TestApp| {
        let (s, b) = call(app.get(&ann, &format!("/v1/skills/{name}")));
        assert_eq!(s, 200, "{b}");
        b["current"].as_str().map(String::from)
    };
    assert_eq!(current(&app).as_deref(), Some("1.1.0"));
    // Rollback by digest to 1.0.0; discovery follows.
    let (s, b) = call(app.post(
        &ann,
        &format!("/v1/skills/{name}/rollback"),
        &json!({"digest": digests[0]}),
    ));
    assert_eq!(s, 200, "{b}");
    assert_eq!(current(&app).as_deref(), Some("1.0.0"));
    assert_eq!(discover(&app, &ann, "invoices")[0]["version"], "1.0.0");
    // Rolling "back" to a later version is not a rollback.
    assert_error(
        call(app.post(
            &ann,
            &format!("/v1/skills/{name}/rollback"),
            &json!({"version": "1.1.0"}),
        )),
        409,
        "INVALID_TRANSITION",
    );
    // A draft is no rollback target.
    let dir = make_skill(
        &tmp.path().join("v2"),
        name,
        "0.9.0",
        ONE_TEST,
        "Old draft.",
    );
    publish(&app, &ann, &pack(&dir).0, None);
    assert_error(
        call(app.post(
            &ann,
            &format!("/v1/skills/{name}/rollback"),
            &json!({"version": "0.9.0"}),
        )),
        409,
        "INVALID_TRANSITION",
    );
    // The next promote moves the release forward again.
    let dir = make_skill(
        &tmp.path().join("v3"),
        name,
        "1.2.0",
        ONE_TEST,
        "Revision 3.",
    );
    release(&app, &ann, &rita, &pack(&dir).0, None);
    assert_eq!(current(&app).as_deref(), Some("1.2.0"));
    // Yanking the current release falls back to the highest released version left.
    call(app.post(&ann, &vpath(name, "1.2.0", "yank"), &json!({})));
    assert_eq!(current(&app).as_deref(), Some("1.1.0"));
    let (_, sel) = call(app.get(&ann, &format!("/v1/skills/{name}")));
    let yanked: Vec<&Value> = sel["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["yanked"] == true)
        .collect();
    assert_eq!(yanked.len(), 1);
    assert_eq!(yanked[0]["version"], "1.2.0");
}

#[test]
fn select_checks_requirements_and_load_serves_instructions_and_files() {
    let app = TestApp::start();
    let tmp = tempfile::tempdir().unwrap();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let rita = app.key("acme", "rita", &["reviewer"], &[]);
    let extra = "[requires]\ntools = [\"bash\"]\npermissions = [\"network\"]\nenvironment = [\"LEDGER_TOKEN\"]\n";
    let dir = make_skill(
        tmp.path(),
        "book-invoices",
        "2.0.0",
        extra,
        "Run scripts/check.sh first.",
    );
    let (bytes, digest) = pack(&dir);
    release(&app, &ann, &rita, &bytes, None);
    let (s, b) = call(app.get(&ann, "/v1/skills/book-invoices"));
    assert_eq!(s, 200);
    assert_eq!(b["executable"], false);
    let reasons = b["reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert_eq!(
        b["selected"]["manifest"]["requires"]["tools"],
        json!(["bash"])
    );
    let (_, b) = call(app.get(
        &ann,
        "/v1/skills/book-invoices?tools=Bash,Read&permissions=network&environment=LEDGER_TOKEN",
    ));
    assert_eq!(b["executable"], true, "{b}");
    assert!(b["reasons"].as_array().unwrap().is_empty());

    let (s, ins) = call(app.get(&ann, &vpath("book-invoices", "2.0.0", "instructions")));
    assert_eq!(s, 200);
    assert!(
        ins["instructions"]
            .as_str()
            .unwrap()
            .contains("Run scripts/check.sh first.")
    );
    assert!(ins["tokens"].as_u64().unwrap() > 5);
    let (_, by_digest) =
        call(app.get(&ann, &format!("/v1/skills/by-digest/{digest}/instructions")));
    assert_eq!(by_digest["instructions"], ins["instructions"]);
    for path in [
        vpath("book-invoices", "2.0.0", "files/scripts/check.sh"),
        format!("/v1/skills/by-digest/{digest}/files/scripts/check.sh"),
    ] {
        let resp = app.get(&ann, &path).send().unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        assert_eq!(resp.headers()["x-skill-digest"], digest.as_str());
        assert_eq!(resp.text().unwrap(), "#!/bin/sh\necho ok\n");
    }
    assert_error(
        call(app.get(&ann, &vpath("book-invoices", "2.0.0", "files/nope.txt"))),
        404,
        "NOT_FOUND",
    );
    // The archive served is the archive published; its digest checks out.
    let resp = app
        .get(&ann, &format!("/v1/skills/by-digest/{digest}/archive"))
        .send()
        .unwrap();
    let served = resp.bytes().unwrap();
    assert_eq!(
        skills_sdk::digest_of_archive(&served, &ArchiveLimits::default())
            .unwrap()
            .to_string(),
        digest
    );
    assert_error(
        call(app.get(&ann, "/v1/skills/by-digest/sha256:zz/archive")),
        422,
        "VALIDATION_FAILED",
    );
}

/// A ustar header for `name` with `typeflag`, followed by `data`.
fn tar_entry(name: &str, typeflag: u8, link: &str, data: &[u8]) -> Vec<u8> {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..107].copy_from_slice(b"0000644");
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    h[124..135].copy_from_slice(format!("{:011o}", data.len()).as_bytes());
    h[136..147].copy_from_slice(b"00000000000");
    h[156] = typeflag;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|b| *b as u32).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

fn hostile(entries: &[(&str, u8, &str, &[u8])]) -> Vec<u8> {
    let md = b"---\nname: evil\ndescription: Looks harmless.\n---\nbody\n";
    let mut tar = tar_entry("SKILL.md", b'0', "", md);
    for (n, t, l, d) in entries {
        tar.extend(tar_entry(n, *t, l, d));
    }
    tar.extend([0u8; 1024]);
    skills_sdk::archive::gzip(&tar).unwrap()
}

#[test]
fn archive_attacks_are_refused_and_store_nothing() {
    let app = TestApp::start();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            hostile(&[("../../etc/passwd", b'0', "", b"root:x:0:0")]),
            "archive.path_traversal",
        ),
        (
            hostile(&[("/etc/passwd", b'0', "", b"root")]),
            "archive.absolute_path",
        ),
        (
            hostile(&[("link", b'2', "/etc/passwd", b"")]),
            "archive.symlink",
        ),
        (
            hostile(&[("hard", b'1', "SKILL.md", b"")]),
            "archive.hardlink",
        ),
        (hostile(&[("dev", b'3', "", b"")]), "archive.special_file"),
        (b"not a gzip stream at all".to_vec(), "archive.corrupt"),
    ];
    for (bytes, code) in cases {
        let e = assert_error(
            publish(&app, &ann, &bytes, Some("1.0.0")),
            422,
            "VALIDATION_FAILED",
        );
        assert_eq!(e["error"]["details"]["code"], code, "{e}");
    }
    // An invalid skill answers with its diagnostics.
    let md = b"---\nname: Bad--Name\ndescription: x\n---\n";
    let mut tar = tar_entry("SKILL.md", b'0', "", md);
    tar.extend([0u8; 1024]);
    let e = assert_error(
        publish(
            &app,
            &ann,
            &skills_sdk::archive::gzip(&tar).unwrap(),
            Some("1.0.0"),
        ),
        422,
        "VALIDATION_FAILED",
    );
    assert!(
        !e["error"]["details"]["diagnostics"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    // Wrong media type.
    let r = call(app.post(&ann, "/v1/skills", &json!({"archive": "…"})));
    assert_error(r, 415, "UNSUPPORTED_MEDIA_TYPE");
    // Nothing was stored: no skill assets, no blobs.
    let (_, list) = call(app.get(&ann, "/v1/assets?kind=skill_version"));
    assert!(list["assets"].as_array().unwrap().is_empty());
    let blobs = app.dir.path().join("data/blobs");
    let count = walk_files(&blobs);
    assert_eq!(count, 0, "blobs were written for refused archives");
}

fn walk_files(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .map(|e| {
            let p = e.path();
            if p.is_dir() { walk_files(&p) } else { 1 }
        })
        .sum()
}

#[test]
fn skills_are_tenant_isolated_and_global_skills_need_a_platform_admin() {
    let app = TestApp::start();
    let tmp = tempfile::tempdir().unwrap();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let rita = app.key("acme", "rita", &["reviewer"], &[]);
    let bob = app.key("globex", "bob", &["writer", "reviewer", "admin"], &[]);
    let dir = make_skill(tmp.path(), "book-invoices", "1.0.0", ONE_TEST, "Acme only.");
    let (bytes, digest) = pack(&dir);
    release(&app, &ann, &rita, &bytes, None);

    assert!(discover(&app, &bob, "invoices").is_empty());
    let (_, all) = call(app.get(&bob, "/v1/skills"));
    assert!(all["skills"].as_array().unwrap().is_empty());
    for path in [
        "/v1/skills/book-invoices".to_string(),
        vpath("book-invoices", "1.0.0", ""),
        vpath("book-invoices", "1.0.0", "instructions"),
        vpath("book-invoices", "1.0.0", "archive"),
        format!("/v1/skills/by-digest/{digest}"),
        format!("/v1/skills/by-digest/{digest}/archive"),
    ] {
        let path = path.trim_end_matches('/');
        assert_error(call(app.get(&bob, path)), 404, "NOT_FOUND");
    }
    // Lifecycle steps on another tenant's skill read as missing too.
    assert_error(
        call(app.post(&bob, &vpath("book-invoices", "1.0.0", "yank"), &json!({}))),
        404,
        "NOT_FOUND",
    );
    // Globex may publish the same name: its own skill, not a conflict.
    let (s, _) = publish(&app, &bob, &bytes, None);
    assert_eq!(s, 201);

    // Global skills: admins only; then everyone sees them.
    let gdir = make_skill(
        &tmp.path().join("g"),
        "house-style",
        "1.0.0",
        "scope = \"global\"\n",
        "Global.",
    );
    let (gbytes, _) = pack(&gdir);
    assert_error(publish(&app, &ann, &gbytes, None), 403, "FORBIDDEN");
    // Not even a tenant's admin: the global scope is the platform's.
    assert_error(publish(&app, &bob, &gbytes, None), 403, "FORBIDDEN");
    let root = app.platform_key("root", &["admin"]);
    let root2 = app.platform_key("rev", &["reviewer", "admin"]);
    let v = release(&app, &root, &root2, &gbytes, None);
    assert_eq!(v["scope"], "global");
    let names: Vec<Value> = discover(&app, &ann, "invoices")
        .iter()
        .map(|h| h["name"].clone())
        .collect();
    assert_eq!(
        names.iter().filter(|n| **n == "book-invoices").count(),
        1,
        "{names:?}"
    );
    assert!(
        discover(&app, &ann, "invoices+house")
            .iter()
            .any(|h| h["name"] == "house-style")
    );
    assert!(
        discover(&app, &bob, "house")
            .iter()
            .any(|h| h["name"] == "house-style")
    );
    // A tenant writer cannot move a global skill.
    assert_error(
        call(app.post(&ann, &vpath("house-style", "1.0.0", "yank"), &json!({}))),
        403,
        "FORBIDDEN",
    );
}

#[test]
fn deleting_a_draft_purges_it_and_keeps_a_shared_archive() {
    let app = TestApp::start();
    let tmp = tempfile::tempdir().unwrap();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let bob = app.key("globex", "bob", &["writer"], &[]);
    // A plain Agent Skills directory (no skill.toml): two versions share one archive.
    let dir = tmp.path().join("tide-tables");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: tide-tables\ndescription: Reads zqxtide7731 tide tables. Use for harbour planning.\n---\nSteps.\n",
    )
    .unwrap();
    let (bytes, _) = pack(&dir);
    assert_eq!(publish(&app, &ann, &bytes, Some("1.0.0")).0, 201);
    assert_eq!(publish(&app, &ann, &bytes, Some("1.1.0")).0, 201);
    let (s, _) = call(app.get(&ann, &vpath("tide-tables", "1.0.0", "instructions")));
    assert_eq!(s, 200);
    assert_error(
        call(app.delete(&bob, "/v1/skills/tide-tables/versions/1.0.0")),
        404,
        "NOT_FOUND",
    );
    let (s, r) = call(app.delete(&ann, "/v1/skills/tide-tables/versions/1.0.0"));
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["level_reached"], "purged");
    assert_error(
        call(app.get(&ann, &vpath("tide-tables", "1.0.0", "instructions"))),
        404,
        "NOT_FOUND",
    );
    // The other version still loads: its archive was shared and is kept.
    let (s, body) = call(app.get(&ann, &vpath("tide-tables", "1.1.0", "instructions")));
    assert_eq!(s, 200, "{body}");
    assert_eq!(r["counts"]["blobs"], 0, "{r}");
    // Deleting the last one removes the archive and every stored byte of the description.
    let (s, r) = call(app.delete(&ann, "/v1/skills/tide-tables/versions/1.1.0"));
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["counts"]["blobs"], 1, "{r}");
    let blobs = walk_files(&app.state.config.data_dir.join("blobs"));
    assert_eq!(blobs, 0, "archive blob left behind");
}

/// A skill directory whose SKILL.md carries `description`.
fn skill_described(parent: &Path, name: &str, description: &str) -> PathBuf {
    let dir = make_skill(parent, name, "1.0.0", ONE_TEST, "Steps.");
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nSteps.\n"),
    )
    .unwrap();
    dir
}

#[test]
fn discovery_finds_a_skill_by_meaning_in_chinese_and_in_english() {
    let app =
        TestApp::start_with(|c| c.embed_model = registry_embed::ModelChoice::MultilingualE5Small);
    let tmp = tempfile::tempdir().unwrap();
    let ann = app.key("acme", "ann", &["writer"], &[]);
    let rita = app.key("acme", "rita", &["reviewer"], &[]);
    for (name, description) in [
        (
            "weekly-project-report",
            "项目周报：汇总本周项目进展、风险和下周计划，发给项目干系人。",
        ),
        (
            "book-invoices",
            "Books supplier invoices into the ledger and flags duplicates.",
        ),
        (
            "rotate-credentials",
            "Rotates database passwords and API tokens before they expire.",
        ),
        ("translate-docs", "把英文技术文档翻译成中文，保留术语表。"),
    ] {
        let (bytes, _) = pack(&skill_described(tmp.path(), name, description));
        release(&app, &ann, &rita, &bytes, None);
    }
    let first = |q: &str| {
        let hits = discover(&app, &ann, q);
        assert!(!hits.is_empty(), "{q}: nothing discovered");
        hits[0]["name"].as_str().unwrap().to_string()
    };
    // No word in common with the description: only the vector leg can find it.
    assert_eq!(first("进度报告"), "weekly-project-report");
    assert_eq!(
        first("record a bill from a vendor in accounting"),
        "book-invoices"
    );
    assert_eq!(first("renew expiring secrets"), "rotate-credentials");
    // Visibility is applied inside both legs: another tenant finds nothing by meaning either.
    let bob = app.key("globex", "bob", &["writer"], &[]);
    assert!(discover(&app, &bob, "进度报告").is_empty());
}
