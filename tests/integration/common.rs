//! `TestApp`: a registry served in-process on a free loopback port over a temporary data
//! directory, with keys made through the same code path as `registry keys create`.
//!
//! `REGISTRY_TEST_STORE=postgres` runs every `TestApp` on PostgreSQL instead of SQLite: each one
//! in a schema of the database at `REGISTRY_TEST_PG_URL` named after its data directory, its blobs
//! and indexes still in its temporary data directory.
//!
//! `REGISTRY_TEST_VECTORS=qdrant` puts every `TestApp`'s vectors in the Qdrant at
//! `REGISTRY_TEST_QDRANT_URL` (`scripts/qdrant-test.sh`), under a collection prefix named after
//! its data directory, so tests never share a collection.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use registry_server::cli::{CreateKey, create_key};
use registry_server::config::Config;
use registry_server::state::{AppState, Models};
use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::Value;

pub struct TestApp {
    pub base: String,
    pub state: AppState,
    pub client: Client,
    pub dir: tempfile::TempDir,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Selects the store every `TestApp` runs on: `sqlite` (default) or `postgres`.
pub const STORE_VAR: &str = "REGISTRY_TEST_STORE";

/// Whether this run puts every `TestApp` on PostgreSQL.
pub fn on_postgres() -> bool {
    std::env::var(STORE_VAR).as_deref() == Ok("postgres")
}

/// Under `REGISTRY_TEST_STORE=postgres`, the database URL and the schema that put a registry
/// on PostgreSQL: a schema named after its data directory, so that every process and every
/// `TestApp` of one test that opens that directory (the CLI, a server, the server again after
/// `kill -9` or a restart) shares it. These schemas are left in the test database
/// (`scripts/pg-test.sh` removes the whole cluster).
pub fn postgres_store(data_dir: &Path) -> Option<(String, String)> {
    if !on_postgres() {
        return None;
    }
    let url = std::env::var(registry_store_postgres::test_support::URL_VAR)
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| {
            panic!("{STORE_VAR}=postgres needs REGISTRY_TEST_PG_URL (scripts/pg-test.sh sets it)")
        });
    let abs = std::path::absolute(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
    let name = registry_core::hash::sha256_hex(abs.display().to_string());
    Some((url, format!("proc_{}", &name[..20])))
}

/// Selects the vector index every `TestApp` uses: embedded (default) or `qdrant`.
pub const VECTORS_VAR: &str = "REGISTRY_TEST_VECTORS";

/// Whether this run puts every `TestApp`'s vectors in Qdrant.
pub fn on_qdrant() -> bool {
    std::env::var(VECTORS_VAR).as_deref() == Ok("qdrant")
}

/// Under `REGISTRY_TEST_VECTORS=qdrant`, the Qdrant URL and the collection prefix for a data
/// directory: named after it, as [`postgres_store`]'s schema is, so that every registry of one
/// test that opens that directory shares its collection and no other test does. The
/// collections are left in the test server (`scripts/qdrant-test.sh` removes it).
pub fn qdrant_vectors(data_dir: &Path) -> Option<(String, String)> {
    if !on_qdrant() {
        return None;
    }
    let url = std::env::var(registry_vector_qdrant::test_support::URL_VAR)
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "{VECTORS_VAR}=qdrant needs REGISTRY_TEST_QDRANT_URL (scripts/qdrant-test.sh sets it)"
            )
        });
    let abs = std::path::absolute(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
    let name = registry_core::hash::sha256_hex(abs.display().to_string());
    Some((url, format!("t{}", &name[..20])))
}

/// `config` on the store of this run: unchanged on SQLite; under `REGISTRY_TEST_STORE=postgres`,
/// on [`postgres_store`]'s schema for its data directory (unless it names a store already).
/// Under `REGISTRY_TEST_VECTORS=qdrant`, its vectors in [`qdrant_vectors`]' collection (unless
/// it names a Qdrant already).
pub fn on_test_store(mut config: Config) -> Config {
    if config.store.url.is_none()
        && let Some((url, schema)) = postgres_store(&config.data_dir)
    {
        config.store.url = Some(url);
        config.store.schema = schema;
        config.store.pool_size = 4;
    }
    if config.vectors.qdrant_url.is_none()
        && let Some((url, prefix)) = qdrant_vectors(&config.data_dir)
    {
        config.vectors.qdrant_url = Some(url);
        config.vectors.qdrant_collection_prefix = prefix;
    }
    config
}

/// The environment that puts a `registry` process on [`postgres_store`]'s schema (and, under
/// `REGISTRY_TEST_VECTORS=qdrant`, its vectors in [`qdrant_vectors`]' collection).
pub fn postgres_env(data_dir: &Path) -> Vec<(String, String)> {
    let mut env = match postgres_store(data_dir) {
        None => vec![],
        Some((url, schema)) => vec![
            ("REGISTRY_STORE__URL".into(), url),
            ("REGISTRY_STORE__SCHEMA".into(), schema),
        ],
    };
    if let Some((url, prefix)) = qdrant_vectors(data_dir) {
        env.push(("REGISTRY_VECTORS__QDRANT_URL".into(), url));
        env.push(("REGISTRY_VECTORS__QDRANT_COLLECTION_PREFIX".into(), prefix));
    }
    env
}

/// Returns from the calling test, saying why, when this run is on PostgreSQL: for tests that
/// look at the SQLite files themselves.
#[macro_export]
macro_rules! sqlite_only {
    ($why:expr) => {
        if $crate::common::on_postgres() {
            eprintln!("skipped on PostgreSQL: {}", $why);
            return;
        }
    };
}

/// The models for `config`'s model settings, loaded once per test process and shared by every
/// `TestApp` with those settings, as one server shares them across its requests: loading the
/// pair took most of a small test's time and a gigabyte of memory per app.
pub fn shared_models(config: &Config) -> Models {
    type Settings = (String, Option<PathBuf>, usize, usize, usize, usize);
    static LOADED: std::sync::Mutex<Vec<(Settings, Models)>> = std::sync::Mutex::new(Vec::new());
    let settings: Settings = (
        config.embed_model.to_string(),
        config.model_dir.clone(),
        config.embed_threads,
        config.embed_sessions,
        config.embed_batch,
        config.embed_query_cache,
    );
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, m)) = loaded.iter().find(|(s, _)| *s == settings) {
        return m.clone();
    }
    let models = Models::load(config).unwrap();
    loaded.push((settings, models.clone()));
    models
}

pub struct Key {
    pub secret: String,
    pub id: String,
    /// What the key was made with, so a helper can make a colleague (a tester) beside it.
    pub tenant: String,
    pub user: String,
    pub projects: Vec<String>,
    pub platform: bool,
}

impl TestApp {
    pub fn start() -> TestApp {
        Self::start_with(|_| {})
    }

    pub fn start_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config {
            data_dir: dir.path().join("data"),
            bind: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            ..Config::default()
        };
        config.jobs.enabled = false;
        tweak(&mut config);
        // After `tweak`: a test that reopens an earlier app's data directory reopens its schema.
        let config = on_test_store(config);
        let state = AppState::open_with_models(config.clone(), shared_models(&config)).unwrap();
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let addr = std_listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let st = state.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
                registry_server::serve_until(st, listener, async {
                    let _ = rx.await;
                })
                .await
                .unwrap();
            });
        });
        TestApp {
            base: format!("http://{addr}"),
            state,
            client: Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .unwrap(),
            dir,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// A key as `registry keys create` makes it. Tests run with full clearance unless they ask
    /// for less ([`Self::key_with`]), so that what they check is the rule under test.
    pub fn key(&self, tenant: &str, user: &str, roles: &[&str], groups: &[&str]) -> Key {
        self.key_with(tenant, user, roles, |c| {
            c.groups = groups.iter().map(|s| s.to_string()).collect();
            c.clearance = Some("secret".into());
        })
    }

    /// A key with the options `tweak` sets (projects, clearance, platform, …).
    pub fn key_with(
        &self,
        tenant: &str,
        user: &str,
        roles: &[&str],
        tweak: impl FnOnce(&mut CreateKey),
    ) -> Key {
        let mut c = CreateKey {
            tenant: Some(tenant.into()),
            user: user.into(),
            roles: roles.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        tweak(&mut c);
        let (rec, secret) = create_key(self.state.services.backends.store.as_ref(), &c).unwrap();
        Key {
            secret,
            id: rec.id,
            tenant: c.tenant.clone().unwrap_or_default(),
            user: c.user.clone(),
            projects: c.projects.clone(),
            platform: c.platform,
        }
    }

    /// A key that belongs to `projects` of its tenant (full clearance).
    pub fn project_key(&self, tenant: &str, user: &str, roles: &[&str], projects: &[&str]) -> Key {
        self.key_with(tenant, user, roles, |c| {
            c.projects = projects.iter().map(|s| s.to_string()).collect();
            c.clearance = Some("secret".into());
        })
    }

    /// A platform key (governs the global scope), tenant `platform`.
    pub fn platform_key(&self, user: &str, roles: &[&str]) -> Key {
        self.key_with("platform", user, roles, |c| {
            c.platform = true;
            c.clearance = Some("secret".into());
        })
    }

    /// A key with the `tester` role beside `author` (same tenant, projects and platform flag),
    /// under a user name neither the author nor a reviewer uses.
    pub fn tester_for(&self, author: &Key) -> Key {
        let projects = author.projects.clone();
        let platform = author.platform;
        self.key_with(&author.tenant, "tess-the-tester", &["tester"], |c| {
            c.projects = projects;
            c.platform = platform;
            c.clearance = Some("secret".into());
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn get(&self, key: &Key, path: &str) -> RequestBuilder {
        self.client.get(self.url(path)).bearer_auth(&key.secret)
    }

    pub fn post(&self, key: &Key, path: &str, body: &Value) -> RequestBuilder {
        self.client
            .post(self.url(path))
            .bearer_auth(&key.secret)
            .json(body)
    }

    pub fn delete(&self, key: &Key, path: &str) -> RequestBuilder {
        self.client.delete(self.url(path)).bearer_auth(&key.secret)
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sends a request and returns `(status, json body)`.
pub fn call(req: RequestBuilder) -> (u16, Value) {
    let resp: Response = req.send().expect("request failed");
    let status = resp.status().as_u16();
    let text = resp.text().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// Asserts an error answer with `code`, and that the body has the standard shape.
#[track_caller]
pub fn assert_error(resp: (u16, Value), status: u16, code: &str) -> Value {
    assert_eq!(resp.0, status, "unexpected status; body: {}", resp.1);
    assert_eq!(resp.1["error"]["code"], code, "body: {}", resp.1);
    assert!(resp.1["error"]["message"].is_string());
    resp.1
}

/// The real `registry` binary.
pub fn registry_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_registry"))
}

/// Runs the binary to completion: `(exit code, stdout, stderr)`.
pub fn run_cli(data_dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(registry_bin())
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .env_remove("REGISTRY_BIND")
        .envs(postgres_env(data_dir))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A key for `user` of `tenant` made by `registry keys create` on `data_dir`: its secret.
pub fn cli_key(data_dir: &Path, tenant: &str, user: &str) -> String {
    let (code, out, err) = run_cli(
        data_dir,
        &[
            "keys", "create", "--tenant", tenant, "--user", user, "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    serde_json::from_str::<serde_json::Value>(&out).unwrap()["key"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A `registry serve` child process on a free port.
pub struct ServerProcess {
    pub child: Child,
    pub base: String,
}

impl ServerProcess {
    pub fn spawn(data_dir: &Path) -> ServerProcess {
        Self::spawn_with(data_dir, &postgres_env(data_dir))
    }

    /// As [`Self::spawn`], with these environment variables set (e.g. `REGISTRY_STORE__URL`).
    pub fn spawn_with(data_dir: &Path, env: &[(String, String)]) -> ServerProcess {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(registry_bin())
            .arg("--data-dir")
            .arg(data_dir)
            .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
            .env("REGISTRY_JOBS__ENABLED", "false")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(120);
        let client = Client::new();
        loop {
            if let Ok(r) = client.get(format!("{base}/healthz")).send()
                && r.status().is_success()
            {
                break;
            }
            assert!(Instant::now() < deadline, "server did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        ServerProcess { child, base }
    }

    /// SIGKILL: no chance to flush or clean up.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
