//! Configuration: built-in defaults < `registry.toml` < environment (`REGISTRY_…`) < command-line
//! flags. Read once at start and validated; a bad setting stops the start with its name.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use registry_embed::ModelChoice;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where the database, indexes, vectors and blobs live.
    pub data_dir: PathBuf,
    /// Address `serve` listens on, parsed when the configuration loads. Loopback by default.
    #[serde(deserialize_with = "socket_addr")]
    pub bind: SocketAddr,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Where the embedding model and ONNX Runtime were unpacked (default: the user cache).
    pub model_dir: Option<PathBuf>,
    /// ONNX Runtime intra-op threads per embedding session.
    pub embed_threads: usize,
    /// Embedding sessions of the search model, so that this many requests embed at once
    /// (default 1). The gate's second-opinion model keeps one session.
    pub embed_sessions: usize,
    /// Texts per embedding batch.
    pub embed_batch: usize,
    /// Vectors of recent distinct search queries kept in memory, so that a repeated query skips
    /// the model; 0 keeps none.
    pub embed_query_cache: usize,
    /// Which pinned embedding model embeds memories, chunks and skill descriptions (env
    /// `REGISTRY_EMBED_MODEL`, flag `--embed-model`). The vector index takes the model's
    /// dimension. Changing it on a data directory re-embeds, at the next start and before
    /// serving, every vector another model made (the work of `registry jobs run reindex`).
    pub embed_model: ModelChoice,
    /// Per-request time limit, in seconds.
    pub request_timeout_secs: u64,
    /// `Host` values `/mcp` accepts (DNS-rebinding protection); `"*"` accepts any. Add the
    /// names the server is reached by when it listens beyond loopback.
    pub mcp_allowed_hosts: Vec<String>,
    /// Open MCP sessions one API key may hold at once (the oldest beyond it is refused).
    pub mcp_max_sessions_per_key: usize,
    /// The secret that keys the audit chain (HMAC) and signs its checkpoints; created on first
    /// start (mode 0600). Default `<data_dir>/audit.key`: keep it outside the data directory
    /// (and its backups) in production, so a copy of the database cannot re-seal a chain.
    pub audit_key_file: Option<PathBuf>,
    pub jobs: JobsConfig,
    pub retention: RetentionConfig,
    pub store: StoreConfig,
    pub vectors: VectorsConfig,
    pub skills: SkillsConfig,
    /// Which procedural memories may become skill drafts: `drafts.min_helpful`, the distinct
    /// helpful votes that qualify a procedure no reviewer confirmed (default 3, 1..=1000).
    pub drafts: registry_services::DraftPolicy,
    pub webhooks: WebhooksConfig,
}

/// Skills after Publish: when observed runs put a release back in the review queue.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SkillsConfig {
    /// A released version whose failure rate (failures and errors over completed runs) is
    /// above this, once it has `min_runs` completed runs, is flagged for review (0..1).
    pub max_failure_rate: f64,
    /// Completed runs a version (and its predecessor, for the comparison) needs before its
    /// runs may flag it (at least 1).
    pub min_runs: u64,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        let p = registry_skills::ObservePolicy::default();
        SkillsConfig {
            max_failure_rate: p.max_failure_rate,
            min_runs: p.min_runs,
        }
    }
}

impl SkillsConfig {
    pub fn policy(&self) -> registry_skills::ObservePolicy {
        registry_skills::ObservePolicy {
            max_failure_rate: self.max_failure_rate,
            min_runs: self.min_runs,
        }
    }
}

/// The change feed's webhooks (`/v1/webhooks`) and its SSE readers (`/v1/events`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WebhooksConfig {
    /// Whether `serve` delivers to webhooks (registration works either way).
    pub enabled: bool,
    /// Accept targets on loopback, private, link-local, unspecified or multicast addresses
    /// (off: such a URL is refused at registration and at every delivery, after DNS).
    pub allow_private_targets: bool,
    /// How often new events are looked for, in milliseconds.
    pub poll_interval_ms: u64,
    /// Per delivery attempt (connect and answer), in seconds.
    pub timeout_secs: u64,
    /// Attempts before a delivery goes to the dead-letter list.
    pub max_attempts: u32,
    /// The first retry's delay, in milliseconds; each later one doubles, up to `max_backoff_secs`.
    pub backoff_ms: u64,
    pub max_backoff_secs: u64,
    /// Deliveries in flight at once on this node.
    pub concurrency: usize,
    /// Open `/v1/events` streams one API key may hold at once.
    pub max_streams_per_key: usize,
    /// How long one `/v1/events` stream stays open, in seconds (1..=86,400): it then ends and
    /// the client reconnects with `Last-Event-ID`, so no stream holds a node for ever and a
    /// reconnect may land on another node.
    pub max_stream_secs: u64,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        WebhooksConfig {
            enabled: true,
            allow_private_targets: false,
            poll_interval_ms: 500,
            timeout_secs: 10,
            max_attempts: 8,
            backoff_ms: 2000,
            max_backoff_secs: 3600,
            concurrency: 4,
            max_streams_per_key: 4,
            max_stream_secs: 300,
        }
    }
}

/// Where the vectors live.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct VectorsConfig {
    /// `None` (the default): the embedded index in `data_dir/vectors`, one per node.
    /// `http://host:6334` (Qdrant's gRPC port; `https://` for TLS): a Qdrant server, which every
    /// node of a shared store then uses as one index (`registry serve --qdrant-url`,
    /// `REGISTRY_VECTORS__QDRANT_URL`).
    pub qdrant_url: Option<String>,
    /// A file holding the Qdrant API key (sent as `api-key`), so that the key stays out of the
    /// configuration and the environment.
    pub qdrant_api_key_file: Option<PathBuf>,
    /// First part of the collection names (`{prefix}_{model}_{dimension}`): lets several
    /// registries share one Qdrant. A start drops the collections other models made under it.
    pub qdrant_collection_prefix: String,
    /// Per request to Qdrant, and for connecting, in seconds.
    pub qdrant_timeout_secs: u64,
}

impl Default for VectorsConfig {
    fn default() -> Self {
        VectorsConfig {
            qdrant_url: None,
            qdrant_api_key_file: None,
            qdrant_collection_prefix: "registry".into(),
            qdrant_timeout_secs: 30,
        }
    }
}

impl VectorsConfig {
    /// The Qdrant URL, when Qdrant holds the vectors.
    pub fn qdrant(&self) -> Option<&str> {
        self.qdrant_url.as_deref().filter(|u| !u.is_empty())
    }

    /// The API key from `qdrant_api_key_file` (surrounding white space dropped).
    pub fn qdrant_api_key(&self) -> Result<Option<String>, ConfigError> {
        let Some(path) = &self.qdrant_api_key_file else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Invalid {
            setting: "vectors.qdrant_api_key_file",
            message: format!("cannot read {}: {e}", path.display()),
        })?;
        let key = text.trim();
        if key.is_empty() {
            return Err(ConfigError::Invalid {
                setting: "vectors.qdrant_api_key_file",
                message: format!("{} is empty", path.display()),
            });
        }
        Ok(Some(key.to_string()))
    }
}

/// Where the store lives. Blobs and the text and vector indexes stay in `data_dir` whatever the
/// store (each node keeps its own indexes, derived from the store).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `None` (the default): the embedded SQLite database in `data_dir`.
    /// `postgres://user:password@host:port/database`: PostgreSQL, which several nodes may
    /// share (`registry serve --database-url`, `REGISTRY_STORE__URL`).
    pub url: Option<String>,
    /// The PostgreSQL schema holding the tables (created if missing).
    pub schema: String,
    /// PostgreSQL connections a node keeps open at most.
    pub pool_size: usize,
    /// How often a node applies the change log of the shared database to its own indexes, in
    /// milliseconds (PostgreSQL only).
    pub follow_interval_ms: u64,
    /// A node that has not reported within this many seconds is no longer live: a purge does
    /// not wait for it (PostgreSQL only).
    pub node_timeout_secs: u64,
    /// How long a purge waits for every live node to apply it before its receipt says which
    /// have not, in seconds (PostgreSQL only).
    pub purge_propagation_secs: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: None,
            schema: "public".into(),
            pool_size: 16,
            follow_interval_ms: 200,
            node_timeout_secs: 15,
            purge_propagation_secs: 30,
        }
    }
}

impl StoreConfig {
    /// Whether the store is PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.url.as_deref().is_some_and(|u| !u.is_empty())
    }
}

/// What the retention job purges (see `registry_services::RetentionPolicy`).
pub use registry_services::RetentionPolicy as RetentionConfig;

/// Intervals of the jobs scheduled inside `serve`; 0 disables a job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct JobsConfig {
    pub enabled: bool,
    pub decay_interval_secs: u64,
    pub consolidate_interval_secs: u64,
    pub retention_interval_secs: u64,
    pub purge_interval_secs: u64,
    /// How often a signed checkpoint of the audit chain's head is written.
    pub audit_checkpoint_interval_secs: u64,
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            enabled: true,
            decay_interval_secs: 3600,
            consolidate_interval_secs: 600,
            retention_interval_secs: 600,
            purge_interval_secs: 3600,
            audit_checkpoint_interval_secs: 60,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from("./registry-data"),
            bind: SocketAddr::from(([127, 0, 0, 1], 7878)),
            max_body_bytes: 8 * 1024 * 1024,
            model_dir: None,
            embed_threads: 2,
            embed_sessions: 1,
            embed_batch: 32,
            embed_query_cache: registry_embed::QUERY_CACHE_ENTRIES,
            embed_model: ModelChoice::default(),
            request_timeout_secs: 60,
            mcp_allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            mcp_max_sessions_per_key: 16,
            audit_key_file: None,
            jobs: JobsConfig::default(),
            retention: RetentionConfig::default(),
            store: StoreConfig::default(),
            vectors: VectorsConfig::default(),
            skills: SkillsConfig::default(),
            drafts: registry_services::DraftPolicy::default(),
            webhooks: WebhooksConfig::default(),
        }
    }
}

/// Settings given on the command line; `None` leaves the lower layers in force.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CliOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind: Option<SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embed_model: Option<ModelChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreOverrides>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vectors: Option<VectorsOverrides>,
}

/// Vector index settings given on the command line.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VectorsOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qdrant_url: Option<String>,
}

/// Store settings given on the command line.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StoreOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// `bind` as an address, refused at load with the form it must take.
fn socket_addr<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(|_| {
        serde::de::Error::custom(format!(
            "setting `bind`: {s:?} is not an address like 127.0.0.1:7878"
        ))
    })
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid configuration: {0}")]
    Parse(#[from] Box<figment::Error>),
    #[error("invalid configuration: setting `{setting}`: {message}")]
    Invalid {
        setting: &'static str,
        message: String,
    },
}

/// Environment keys this program reads as configuration (others under `REGISTRY_` belong to
/// other tools, such as the MCP client's key, and are left alone).
const ENV_KEYS: &[&str] = &[
    "data_dir",
    "bind",
    "max_body_bytes",
    "model_dir",
    "embed_threads",
    "embed_sessions",
    "embed_batch",
    "embed_query_cache",
    "embed_model",
    "request_timeout_secs",
    "mcp_allowed_hosts",
    "mcp_max_sessions_per_key",
    "audit_key_file",
    "jobs",
    "retention",
    "store",
    "vectors",
    "drafts",
    "skills",
    "webhooks",
];

impl Config {
    /// Loads the layers. `file`: an explicit path (must exist) or `registry.toml` in the
    /// working directory if present.
    pub fn load(file: Option<&Path>, cli: &CliOverrides) -> Result<Config, ConfigError> {
        let mut fig = Figment::from(Serialized::defaults(Config::default()));
        match file {
            Some(p) => {
                if !p.exists() {
                    return Err(ConfigError::Invalid {
                        setting: "config",
                        message: format!("file {} does not exist", p.display()),
                    });
                }
                fig = fig.merge(Toml::file_exact(p));
            }
            None if Path::new("registry.toml").exists() => {
                fig = fig.merge(Toml::file_exact("registry.toml"))
            }
            None => {}
        }
        fig = fig
            .merge(Env::prefixed("REGISTRY_").split("__").filter(|k| {
                let k = k.as_str().to_ascii_lowercase();
                ENV_KEYS.iter().any(|known| k.starts_with(known))
            }))
            .merge(Serialized::globals(cli));
        let cfg: Config = fig.extract().map_err(Box::new)?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |setting, message: String| Err(ConfigError::Invalid { setting, message });
        if self.data_dir.as_os_str().is_empty() {
            return bad("data_dir", "must not be empty".into());
        }
        if !(0.0..=1.0).contains(&self.skills.max_failure_rate) {
            return bad(
                "skills.max_failure_rate",
                format!("{} is outside 0..1", self.skills.max_failure_rate),
            );
        }
        if self.skills.min_runs == 0 {
            return bad("skills.min_runs", "must be at least 1".into());
        }
        if !(1024..=1 << 30).contains(&self.max_body_bytes) {
            return bad(
                "max_body_bytes",
                format!("{} is outside 1 KiB..1 GiB", self.max_body_bytes),
            );
        }
        let w = &self.webhooks;
        if !(1..=64).contains(&w.concurrency) || !(1..=20).contains(&w.max_attempts) {
            return bad(
                "webhooks",
                "concurrency must be 1..64 and max_attempts 1..20".into(),
            );
        }
        if !(1..=86_400).contains(&w.max_stream_secs) {
            return bad("webhooks", "max_stream_secs must be 1..86400".into());
        }
        if !(1..=300).contains(&w.timeout_secs) || w.poll_interval_ms == 0 {
            return bad(
                "webhooks",
                "timeout_secs must be 1..300 and poll_interval_ms above 0".into(),
            );
        }
        if !(1..=64).contains(&self.embed_threads) {
            return bad(
                "embed_threads",
                format!("{} is outside 1..64", self.embed_threads),
            );
        }
        if !(1..=16).contains(&self.embed_sessions) {
            return bad(
                "embed_sessions",
                format!("{} is outside 1..16", self.embed_sessions),
            );
        }
        if !(1..=1024).contains(&self.embed_batch) {
            return bad(
                "embed_batch",
                format!("{} is outside 1..1024", self.embed_batch),
            );
        }
        if self.embed_query_cache > 1_000_000 {
            return bad(
                "embed_query_cache",
                format!("{} is above 1000000", self.embed_query_cache),
            );
        }
        if self.request_timeout_secs == 0 {
            return bad("request_timeout_secs", "must be at least 1".into());
        }
        if let Some(url) = self.store.url.as_deref().filter(|u| !u.is_empty())
            && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            return bad(
                "store.url",
                "must be a postgres:// URL (leave it unset for the embedded SQLite store)".into(),
            );
        }
        if !(1..=256).contains(&self.store.pool_size) {
            return bad(
                "store.pool_size",
                format!("{} is outside 1..256", self.store.pool_size),
            );
        }
        if self.store.follow_interval_ms == 0 || self.store.node_timeout_secs == 0 {
            return bad(
                "store.follow_interval_ms",
                "the follow interval and the node timeout must be at least 1".into(),
            );
        }
        if let Some(url) = self.vectors.qdrant()
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return bad(
                "vectors.qdrant_url",
                "must be an http:// or https:// URL of Qdrant's gRPC port (leave it unset for \
                 the embedded vector index)"
                    .into(),
            );
        }
        let prefix = &self.vectors.qdrant_collection_prefix;
        if prefix.is_empty()
            || prefix.len() > 64
            || !prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return bad(
                "vectors.qdrant_collection_prefix",
                format!("{prefix:?}: 1 to 64 ASCII letters, digits, '_' or '-'"),
            );
        }
        if !(1..=600).contains(&self.vectors.qdrant_timeout_secs) {
            return bad(
                "vectors.qdrant_timeout_secs",
                format!("{} is outside 1..600", self.vectors.qdrant_timeout_secs),
            );
        }
        if !(1..=1024).contains(&self.mcp_max_sessions_per_key) {
            return bad(
                "mcp_max_sessions_per_key",
                format!("{} is outside 1..1024", self.mcp_max_sessions_per_key),
            );
        }
        if !(1..=1000).contains(&self.drafts.min_helpful) {
            return bad(
                "drafts.min_helpful",
                format!("{} is outside 1..1000", self.drafts.min_helpful),
            );
        }
        Ok(())
    }

    pub fn socket_addr(&self) -> SocketAddr {
        self.bind
    }

    /// Where the newest signed audit checkpoint is kept, beside the key, outside the database.
    pub fn audit_anchor_path(&self) -> PathBuf {
        let mut p = self.audit_key_path().into_os_string();
        p.push(".checkpoint");
        PathBuf::from(p)
    }

    /// Where the audit key lives.
    pub fn audit_key_path(&self) -> PathBuf {
        self.audit_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("audit.key"))
    }

    /// The audit key: read from [`Self::audit_key_path`], or created there (0600) when the file
    /// does not exist yet. A file that exists but does not hold a key stops the start.
    pub fn load_audit_key(&self) -> Result<registry_core::audit::AuditKey, ConfigError> {
        let path = self.audit_key_path();
        let bad = |message: String| ConfigError::Invalid {
            setting: "audit_key_file",
            message,
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => registry_core::audit::AuditKey::from_hex(&text).ok_or_else(|| {
                bad(format!(
                    "{} does not hold 64 hex characters",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                use rand::Rng;
                let key = registry_core::audit::AuditKey::from_bytes(rand::rng().random());
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| bad(format!("cannot create {}: {e}", dir.display())))?;
                }
                write_private(&path, &key.to_hex())
                    .map_err(|e| bad(format!("cannot write {}: {e}", path.display())))?;
                Ok(key)
            }
            Err(e) => Err(bad(format!("cannot read {}: {e}", path.display()))),
        }
    }
}

/// Creates `path` with `text`, readable by its owner only, failing if it exists.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    // figment's Jail returns its own large error type; boxing it is not ours to change.
    #[allow(clippy::result_large_err)]
    #[test]
    fn layers_apply_in_order_and_bad_values_are_named() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "registry.toml",
                "bind = \"127.0.0.1:9000\"\nembed_batch = 8\n",
            )?;
            let c = Config::load(None, &CliOverrides::default()).unwrap();
            assert_eq!(
                (c.bind.to_string().as_str(), c.embed_batch),
                ("127.0.0.1:9000", 8)
            );
            jail.set_env("REGISTRY_BIND", "127.0.0.1:9001");
            jail.set_env("REGISTRY_API_KEY", "not-config");
            let c = Config::load(None, &CliOverrides::default()).unwrap();
            assert_eq!(c.bind.to_string(), "127.0.0.1:9001");
            let cli = CliOverrides {
                bind: Some("127.0.0.1:9002".parse().unwrap()),
                ..Default::default()
            };
            assert_eq!(
                Config::load(None, &cli).unwrap().bind.to_string(),
                "127.0.0.1:9002"
            );
            assert_eq!(c.embed_model, ModelChoice::default());
            jail.set_env("REGISTRY_EMBED_MODEL", "multilingual-e5-small");
            let c = Config::load(None, &CliOverrides::default()).unwrap();
            assert_eq!(c.embed_model, ModelChoice::MultilingualE5Small);
            let cli = CliOverrides {
                embed_model: Some(ModelChoice::AllMiniLmL6V2),
                ..Default::default()
            };
            let c = Config::load(None, &cli).unwrap();
            assert_eq!(c.embed_model, ModelChoice::AllMiniLmL6V2);
            jail.set_env("REGISTRY_EMBED_MODEL", "bge-m3");
            let e = Config::load(None, &CliOverrides::default()).unwrap_err();
            assert!(e.to_string().contains("bge-m3"), "{e}");
            jail.set_env("REGISTRY_EMBED_MODEL", "multilingual-e5-small");
            jail.set_env("REGISTRY_BIND", "nowhere");
            let e = Config::load(None, &CliOverrides::default()).unwrap_err();
            let e = e.to_string();
            assert!(
                e.to_lowercase().contains("bind") && e.contains("not an address like"),
                "{e}"
            );
            jail.set_env("REGISTRY_BIND", "127.0.0.1:7878");
            jail.create_file("registry.toml", "bnd = 1\n")?;
            let e = Config::load(None, &CliOverrides::default()).unwrap_err();
            assert!(e.to_string().contains("bnd"), "{e}");
            Ok(())
        });
    }

    #[allow(clippy::result_large_err)]
    #[test]
    fn qdrant_is_chosen_by_file_environment_or_flag_and_checked() {
        figment::Jail::expect_with(|jail| {
            let c = Config::load(None, &CliOverrides::default()).unwrap();
            assert_eq!(
                c.vectors.qdrant(),
                None,
                "the embedded index is the default"
            );
            jail.create_file(
                "registry.toml",
                "[vectors]\nqdrant_url = \"http://qdrant:6334\"\nqdrant_api_key_file = \"qk\"\n",
            )?;
            let c = Config::load(None, &CliOverrides::default()).unwrap();
            assert_eq!(c.vectors.qdrant(), Some("http://qdrant:6334"));
            let e = c.vectors.qdrant_api_key().unwrap_err();
            assert!(e.to_string().contains("qdrant_api_key_file"), "{e}");
            jail.create_file("qk", "  s3cret\n")?;
            assert_eq!(
                c.vectors.qdrant_api_key().unwrap().as_deref(),
                Some("s3cret")
            );
            jail.set_env("REGISTRY_VECTORS__QDRANT_URL", "https://q.example:6334");
            let c = Config::load(None, &CliOverrides::default()).unwrap();
            assert_eq!(c.vectors.qdrant(), Some("https://q.example:6334"));
            let cli = CliOverrides {
                vectors: Some(VectorsOverrides {
                    qdrant_url: Some("http://127.0.0.1:6334".into()),
                }),
                ..Default::default()
            };
            let c = Config::load(None, &cli).unwrap();
            assert_eq!(c.vectors.qdrant(), Some("http://127.0.0.1:6334"));
            for (key, value, setting) in [
                (
                    "REGISTRY_VECTORS__QDRANT_URL",
                    "qdrant:6334",
                    "vectors.qdrant_url",
                ),
                (
                    "REGISTRY_VECTORS__QDRANT_COLLECTION_PREFIX",
                    "a b",
                    "vectors.qdrant_collection_prefix",
                ),
                (
                    "REGISTRY_VECTORS__QDRANT_TIMEOUT_SECS",
                    "0",
                    "vectors.qdrant_timeout_secs",
                ),
            ] {
                jail.set_env(key, value);
                let e = Config::load(None, &CliOverrides::default()).unwrap_err();
                assert!(e.to_string().contains(setting), "{setting}: {e}");
                jail.clear_env();
            }
            Ok(())
        });
    }
}
