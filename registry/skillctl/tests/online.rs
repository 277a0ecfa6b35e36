//! The server commands, run as the real `skillctl` binary against a registry served in-process
//! (real SQLite, blobs, tantivy and tokenizer).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use registry_server::cli::{CreateKey, create_key};
use registry_server::config::Config;
use registry_server::state::{AppState, Models};

struct Server {
    base: String,
    state: AppState,
    _dir: tempfile::TempDir,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config {
            data_dir: dir.path().join("data"),
            ..Config::default()
        };
        config.jobs.enabled = false;
        // The models, loaded once for every server of this process (most of a start's cost).
        static MODELS: std::sync::OnceLock<Models> = std::sync::OnceLock::new();
        let models = MODELS
            .get_or_init(|| Models::load(&config).unwrap())
            .clone();
        let state = AppState::open_with_models(config, models).unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(l).unwrap();
                registry_server::serve_until(st, listener, async {
                    let _ = rx.await;
                })
                .await
                .unwrap();
            });
        });
        Server {
            base,
            state,
            _dir: dir,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    fn key(&self, tenant: &str, user: &str, roles: &[&str]) -> String {
        create_key(
            self.state.services.backends.store.as_ref(),
            &CreateKey {
                tenant: Some(tenant.into()),
                user: user.into(),
                roles: roles.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            },
        )
        .unwrap()
        .1
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn skillctl(server: &Server, key: &str, cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skillctl"))
        .current_dir(cwd)
        .args(args)
        .env("REGISTRY_URL", &server.base)
        .env("REGISTRY_API_KEY", key)
        .output()
        .unwrap()
}

#[track_caller]
fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn write_skill(parent: &Path, name: &str, version: &str, tests: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: Books supplier invoices into the ledger. Use when invoices arrive.\n---\nVersion {version} steps.\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("skill.toml"),
        format!("owner = \"finance\"\nversion = \"{version}\"\n{tests}"),
    )
    .unwrap();
    let script = dir.join("scripts/check.sh");
    // The test sees a cleared environment and no network.
    std::fs::write(
        &script,
        "#!/bin/sh\ntest -z \"$SECRET_TOKEN\" || exit 9\ntest -f SKILL.md || exit 8\necho checked\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

const TESTS: &str =
    "[[tests]]\nname = \"smoke\"\ncommand = [\"sh\", \"scripts/check.sh\"]\ntimeout_secs = 30\n";

/// publish (binary) → test by a tester (binary) → review (binary) → promote (binary).
fn release_dir(srv: &Server, [ann, tess, rita]: [&str; 3], cwd: &Path, dir: &Path, version: &str) {
    let out = ok(&skillctl(
        srv,
        ann,
        cwd,
        &["publish", dir.to_str().unwrap()],
    ));
    assert!(out.contains("(draft)"), "{out}");
    let out = ok(&skillctl(
        srv,
        tess,
        cwd,
        &["test", "book-invoices", version],
    ));
    assert!(out.contains("PASS smoke"), "{out}");
    assert!(out.contains("-> tested"), "{out}");
    assert!(!out.contains("self-reported"), "{out}");
    let out = ok(&skillctl(
        srv,
        rita,
        cwd,
        &[
            "review",
            "book-invoices",
            version,
            "--approve",
            "--comment",
            "ok",
        ],
    ));
    assert!(out.contains("approved"), "{out}");
    let out = ok(&skillctl(
        srv,
        ann,
        cwd,
        &["promote", "book-invoices", version, "--yes"],
    ));
    assert!(out.contains("published"), "{out}");
}

#[test]
fn publish_test_review_promote_lock_and_install_with_the_binary() {
    let srv = Server::start();
    let ann = srv.key("acme", "ann", &["writer"]);
    let rita = srv.key("acme", "rita", &["reviewer"]);
    let tess = srv.key("acme", "tess", &["tester"]);
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    for v in ["1.0.0", "1.1.0"] {
        let dir = write_skill(&cwd.join(v), "book-invoices", v, TESTS);
        release_dir(&srv, [&ann, &tess, &rita], cwd, &dir, v);
    }
    // Self-review is refused by the server; the CLI reports the code and fails.
    let dir = write_skill(&cwd.join("1.2.0"), "book-invoices", "1.2.0", TESTS);
    ok(&skillctl(
        &srv,
        &ann,
        cwd,
        &["publish", dir.to_str().unwrap()],
    ));
    // The author's own run is kept, labelled, and moves nothing.
    let out = ok(&skillctl(
        &srv,
        &ann,
        cwd,
        &["test", "book-invoices", "1.2.0"],
    ));
    assert!(out.contains("-> draft (self-reported"), "{out}");
    let o = skillctl(
        &srv,
        &ann,
        cwd,
        &["review", "book-invoices", "1.2.0", "--approve"],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("FORBIDDEN"));

    let out = ok(&skillctl(&srv, &ann, cwd, &["search", "ledger invoices"]));
    assert!(out.contains("book-invoices 1.1.0"), "{out}");
    let o = skillctl(
        &srv,
        &ann,
        cwd,
        &["show", "book-invoices", "--tools", "bash"],
    );
    let shown: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(shown["current"], "1.1.0");

    // Lock: the draft 1.2.0 is never resolved.
    std::fs::write(cwd.join("skills.toml"), "book-invoices = \"^1\"\n").unwrap();
    let out = ok(&skillctl(&srv, &ann, cwd, &["lock"]));
    assert!(out.starts_with("book-invoices 1.1.0 sha256:"), "{out}");
    let first_lock = std::fs::read_to_string(cwd.join("skills.lock")).unwrap();

    // Yank 1.1.0: new resolution skips it...
    ok(&skillctl(
        &srv,
        &ann,
        cwd,
        &["yank", "book-invoices", "1.1.0", "--reason", "bad"],
    ));
    let out = ok(&skillctl(
        &srv,
        &ann,
        cwd,
        &["lock", "--output", "relock.lock"],
    ));
    assert!(out.starts_with("book-invoices 1.0.0 "), "{out}");
    // ...but the existing lockfile still installs it, with a warning, digest verified.
    let o = skillctl(&srv, &ann, cwd, &["install", "--locked", "--dir", "vendor"]);
    let out = ok(&o);
    assert!(out.contains("installed"), "{out}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("yanked"));
    let locked = skillctl::Lockfile::parse(&first_lock).unwrap();
    let installed = skills_sdk::digest_dir(&cwd.join("vendor/book-invoices")).unwrap();
    assert_eq!(installed.to_string(), locked.skills[0].digest);
    // Installing again is a no-op; a tampered install is refused.
    assert!(
        ok(&skillctl(
            &srv,
            &ann,
            cwd,
            &["install", "--locked", "--dir", "vendor"]
        ))
        .contains("unchanged")
    );
    std::fs::write(cwd.join("vendor/book-invoices/SKILL.md"), "tampered").unwrap();
    assert!(
        !skillctl(&srv, &ann, cwd, &["install", "--locked", "--dir", "vendor"])
            .status
            .success()
    );

    // Rollback from the CLI.
    ok(&skillctl(
        &srv,
        &ann,
        cwd,
        &["yank", "book-invoices", "1.1.0", "--undo"],
    ));
    let out = ok(&skillctl(
        &srv,
        &ann,
        cwd,
        &["rollback", "book-invoices", "--to", "1.0.0"],
    ));
    assert!(out.contains("1.0.0"), "{out}");
}

/// publish → test (by the tester `tess`) → review, without promoting.
fn approve_dir(srv: &Server, [ann, tess, rita]: [&str; 3], cwd: &Path, dir: &Path, version: &str) {
    ok(&skillctl(
        srv,
        ann,
        cwd,
        &["publish", dir.to_str().unwrap()],
    ));
    ok(&skillctl(
        srv,
        tess,
        cwd,
        &["test", "book-invoices", version],
    ));
    ok(&skillctl(
        srv,
        rita,
        cwd,
        &["review", "book-invoices", version, "--approve"],
    ));
}

#[test]
fn promote_prints_the_impact_and_asks_before_replacing_a_release() {
    let srv = Server::start();
    let ann = srv.key("acme", "ann", &["writer"]);
    let rita = srv.key("acme", "rita", &["reviewer"]);
    let tess = srv.key("acme", "tess", &["tester"]);
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let dir = write_skill(&cwd.join("1.0.0"), "book-invoices", "1.0.0", TESTS);
    release_dir(&srv, [&ann, &tess, &rita], cwd, &dir, "1.0.0");
    // A harness compiled a pack that offered the release.
    let client = skillctl::Client::new(&srv.base, &ann).unwrap();
    let pack = client
        .post_json(
            "/v1/context",
            &serde_json::json!({"goal": "Book the supplier invoices that arrived today.",
                "budget": 1000, "draw_on": ["skills"], "query": "book supplier invoices ledger"}),
        )
        .unwrap();
    let pack_id = pack["id"].as_str().unwrap().to_string();
    assert!(
        pack["manifest"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["source_id"] == "book-invoices@1.0.0"),
        "{pack}"
    );

    let dir = write_skill(&cwd.join("1.1.0"), "book-invoices", "1.1.0", TESTS);
    approve_dir(&srv, [&ann, &tess, &rita], cwd, &dir, "1.1.0");
    // No terminal and no --yes: the impact is printed, then a refusal with its code; nothing
    // is promoted and nothing waits for input.
    let o = skillctl(&srv, &ann, cwd, &["promote", "book-invoices", "1.1.0"]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("promote.confirmation_required"), "{err}");
    assert!(out.contains("replaces the current release 1.0.0"), "{out}");
    assert!(
        out.contains("impact: 1 context manifest(s) included 1.0.0"),
        "{out}"
    );
    assert!(out.contains(&format!("manifest {pack_id} by ann")), "{out}");
    assert!(
        out.contains(&format!("replay {pack_id}: 0 change(s)")),
        "{out}"
    );
    let shown = client.get_json("/v1/skills/book-invoices").unwrap();
    assert_eq!(shown["current"], "1.0.0");
    // --yes promotes after printing the same impact.
    let out = ok(&skillctl(
        &srv,
        &ann,
        cwd,
        &["promote", "book-invoices", "1.1.0", "--yes"],
    ));
    assert!(out.contains(&format!("replay {pack_id}")), "{out}");
    assert!(out.contains("book-invoices@1.1.0: published"), "{out}");
    // The stored pack replayed now names the new release as a changed item.
    let replay = client
        .post_json(
            &format!("/v1/context/{pack_id}/replay"),
            &serde_json::json!({}),
        )
        .unwrap();
    let changes = replay["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{replay}");
    assert_eq!(changes[0]["change"], "changed");
    assert_eq!(changes[0]["after"]["source_id"], "book-invoices@1.1.0");
}

#[test]
fn draft_from_memory_with_the_binary() {
    let srv = Server::start();
    let ann = srv.key("acme", "ann", &["writer"]);
    let rita = srv.key("acme", "rita", &["reviewer"]);
    let tmp = tempfile::tempdir().unwrap();
    let client = skillctl::Client::new(&srv.base, &ann).unwrap();
    let w = client
        .post_json(
            "/v1/memories",
            &serde_json::json!({"class": "procedural", "scope": "tenant",
                "source": "user_statement",
                "content": "To close the month: export the ledger, reconcile the bank account, \
                            then lock the period in the accounting system."}),
        )
        .unwrap();
    let mem = w["id"].as_str().unwrap().to_string();
    // Not reviewed yet: refused with the server's code.
    let o = skillctl(
        &srv,
        &ann,
        tmp.path(),
        &["draft", "--from-memory", &mem, "--name", "close-the-month"],
    );
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("MEMORY_NOT_ELIGIBLE"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    skillctl::Client::new(&srv.base, &rita)
        .unwrap()
        .post_json(
            &format!("/v1/memories/{mem}/confirm"),
            &serde_json::json!({}),
        )
        .unwrap();
    let out = ok(&skillctl(
        &srv,
        &ann,
        tmp.path(),
        &["draft", "--from-memory", &mem, "--name", "close-the-month"],
    ));
    assert!(out.starts_with("close-the-month@0.1.0 sha256:"), "{out}");
    assert!(out.contains("(draft)"), "{out}");
    assert!(out.contains("scan: pass"), "{out}");
    assert!(
        out.contains(&format!("from memory {mem} version 1 ")),
        "{out}"
    );
}

#[test]
fn a_failing_or_hanging_test_is_recorded_as_failed() {
    let srv = Server::start();
    let ann = srv.key("acme", "ann", &["writer"]);
    let tmp = tempfile::tempdir().unwrap();
    let tests = "[[tests]]\nname = \"hangs\"\ncommand = [\"sleep\", \"30\"]\ntimeout_secs = 1\n\
                 [[tests]]\nname = \"smoke\"\ncommand = [\"sh\", \"scripts/check.sh\"]\ntimeout_secs = 30\n";
    let dir = write_skill(tmp.path(), "book-invoices", "1.0.0", tests);
    ok(&skillctl(
        &srv,
        &ann,
        tmp.path(),
        &["publish", dir.to_str().unwrap()],
    ));
    let o = skillctl(&srv, &ann, tmp.path(), &["test", "book-invoices", "1.0.0"]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("FAIL hangs") && out.contains("timed out"),
        "{out}"
    );
    assert!(out.contains("PASS smoke"), "{out}");
    assert!(out.contains("-> draft"), "{out}");
}

#[test]
fn a_reviewer_waives_test_for_a_skill_that_declares_none() {
    let srv = Server::start();
    let ann = srv.key("acme", "ann", &["writer"]);
    let rita = srv.key("acme", "rita", &["reviewer"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_skill(tmp.path(), "book-invoices", "1.0.0", "");
    ok(&skillctl(
        &srv,
        &ann,
        tmp.path(),
        &["publish", dir.to_str().unwrap()],
    ));
    let refused = |key: &str, args: &[&str], code: &str| {
        let o = skillctl(&srv, key, tmp.path(), args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!o.status.success() && err.contains(code), "{err}");
    };
    refused(
        &ann,
        &["promote", "book-invoices", "1.0.0"],
        "TEST_EVIDENCE_MISSING",
    );
    refused(
        &ann,
        &["waive", "book-invoices", "1.0.0", "--reason", "mine"],
        "FORBIDDEN",
    );
    let out = ok(&skillctl(
        &srv,
        &rita,
        tmp.path(),
        &[
            "waive",
            "book-invoices",
            "1.0.0",
            "--reason",
            "instructions only",
        ],
    ));
    assert!(out.contains("tested"), "{out}");
    ok(&skillctl(
        &srv,
        &rita,
        tmp.path(),
        &["review", "book-invoices", "1.0.0", "--approve"],
    ));
    let out = ok(&skillctl(
        &srv,
        &ann,
        tmp.path(),
        &["promote", "book-invoices", "1.0.0"],
    ));
    assert!(out.contains("published"), "{out}");
}

#[test]
fn publish_from_a_git_commit_reads_the_commit_not_the_worktree() {
    let srv = Server::start();
    let ann = srv.key("acme", "ann", &["writer"]);
    let tmp = tempfile::tempdir().unwrap();
    let repo_dir = tmp.path().join("repo");
    let repo = git2::Repository::init(&repo_dir).unwrap();
    let skill = write_skill(&repo_dir.join("skills"), "book-invoices", "3.0.0", TESTS);
    let expected = skills_sdk::pack_dir(&skill, &skills_sdk::ArchiveLimits::default())
        .unwrap()
        .digest
        .to_string();
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("Ann", "ann@example.com").unwrap();
    let commit = repo
        .commit(Some("HEAD"), &sig, &sig, "add skill", &tree, &[])
        .unwrap();
    repo.tag_lightweight("v3.0.0", &repo.find_object(commit, None).unwrap(), false)
        .unwrap();
    // An uncommitted edit must not leak into the published content.
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: book-invoices\ndescription: dirty\n---\n",
    )
    .unwrap();

    let commit_s = commit.to_string();
    let out = ok(&skillctl(
        &srv,
        &ann,
        tmp.path(),
        &[
            "publish",
            "--git",
            repo_dir.to_str().unwrap(),
            "--rev",
            &commit_s,
            "--subdir",
            "skills/book-invoices",
        ],
    ));
    assert!(out.contains(&expected), "{out} vs {expected}");
    assert!(out.contains(&commit_s), "{out}");
    // By tag, the same content: the idempotent answer.
    let out = ok(&skillctl(
        &srv,
        &ann,
        tmp.path(),
        &[
            "publish",
            "--git",
            repo_dir.to_str().unwrap(),
            "--rev",
            "v3.0.0",
            "--subdir",
            "skills/book-invoices",
        ],
    ));
    assert!(out.contains(&expected), "{out}");
    // The executable bit survived Git and the tests run from the published content.
    let out = ok(&skillctl(
        &srv,
        &ann,
        tmp.path(),
        &["test", "book-invoices", "3.0.0"],
    ));
    assert!(out.contains("PASS smoke"), "{out}");
    // A bare clone works too (no network: a local path).
    let bare = tmp.path().join("bare.git");
    git2::build::RepoBuilder::new()
        .bare(true)
        .clone(repo_dir.to_str().unwrap(), &bare)
        .unwrap();
    let (packed, _) = skillctl::pack_from_git(
        bare.to_str().unwrap(),
        "v3.0.0",
        Some(Path::new("skills/book-invoices")),
    )
    .unwrap();
    assert_eq!(packed.digest.to_string(), expected);
}
