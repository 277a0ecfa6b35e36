//! The `registry` command line.

pub mod knowledge;

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use rand::Rng;
use registry_core::hash::sha256_hex;
use registry_core::principal::Role;
use registry_core::store::{ApiKeyRecord, KeyStore};

use crate::config::{CliOverrides, Config};
use registry_core::Sensitivity;
use registry_core::principal::{ALL_PROJECTS, ALL_PURPOSES};

#[derive(Debug, Parser)]
#[command(
    name = "registry",
    version,
    about = "Harness Registry: governed memory, knowledge and skills for AI agents"
)]
pub struct Cli {
    /// Configuration file (default: ./registry.toml if present).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Data directory (overrides the file and REGISTRY_DATA_DIR).
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    /// Directory holding the embedding model and ONNX Runtime.
    #[arg(long, global = true)]
    pub model_dir: Option<PathBuf>,
    /// Embedding model (overrides the file and REGISTRY_EMBED_MODEL): all-MiniLM-L6-v2 or
    /// multilingual-e5-small.
    #[arg(long, global = true)]
    pub embed_model: Option<registry_embed::ModelChoice>,
    /// The store: a postgres:// URL selects PostgreSQL (overrides `store.url`); without it,
    /// the embedded SQLite database in the data directory.
    #[arg(long, global = true)]
    pub database_url: Option<String>,
    /// The vector index: a Qdrant gRPC URL (http://host:6334) selects Qdrant (overrides
    /// `vectors.qdrant_url`); without it, the embedded index in the data directory.
    #[arg(long, global = true)]
    pub qdrant_url: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the HTTP API.
    Serve {
        /// Address to listen on (default 127.0.0.1:7878).
        #[arg(long)]
        bind: Option<std::net::SocketAddr>,
    },
    /// Manage API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Inspect and verify the audit log.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Run maintenance jobs.
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// Ingest knowledge documents.
    #[command(subcommand)]
    Knowledge(knowledge::KnowledgeCommand),
    /// Serve MCP over stdio as the principal behind the key in `REGISTRY_API_KEY`.
    Mcp,
    /// Create or upgrade the data directory and print the schema version.
    Migrate,
    /// Print the effective configuration.
    Config,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key; the secret is printed once and only its sha256 is stored.
    Create(CreateKey),
    /// List keys (never their secrets).
    List {
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Revoke a key by id.
    Revoke { id: String },
}

/// Every role, as `--role` takes it and `--help` lists it.
fn role_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        Role::ALL.map(|r| clap::builder::PossibleValue::new(r.as_str())),
    )
}

#[derive(Debug, Args, Default)]
pub struct CreateKey {
    /// The tenant (default `platform` for a platform key).
    #[arg(long, required_unless_present = "platform")]
    pub tenant: Option<String>,
    #[arg(long)]
    pub user: String,
    #[arg(long = "group")]
    pub groups: Vec<String>,
    /// A role of the key (repeatable; default writer).
    #[arg(long = "role", value_parser = role_names())]
    pub roles: Vec<String>,
    /// A project of the tenant the key belongs to (repeatable); `*` for every project, admins
    /// only (an admin key without `--project` gets `*`). Without projects: tenant level only.
    #[arg(long = "project")]
    pub projects: Vec<String>,
    /// A purpose the key may name in `X-Purpose` (repeatable); `*` for every purpose, admins
    /// only (an admin key without `--purpose` gets `*`). Without purposes: no access to assets
    /// restricted to a purpose.
    #[arg(long = "purpose")]
    pub purposes: Vec<String>,
    /// The most sensitive data the key reads: public, internal, confidential, secret (default
    /// internal; secret for admins). A user always reads their own user-scope memories.
    #[arg(long)]
    pub clearance: Option<String>,
    /// A platform key: the only kind that writes, reviews, moves and deletes what is in the
    /// global scope every tenant reads. Issued here only, never through the API.
    #[arg(long)]
    pub platform: bool,
    /// Print JSON {id, key, tenant, user} instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Run one job now (consolidate, decay) and print its report as JSON; exits 1 if it failed.
    Run { name: String },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Walk the keyed hash chain and check every signed checkpoint (and the one kept beside
    /// the audit key); exits 1 and names the first broken event.
    Verify,
    /// Sign a checkpoint of the chain's head now (the server does so every minute and at
    /// shutdown) and move the anchor beside the audit key to it.
    Checkpoint,
    /// Print events as JSON lines.
    List {
        #[arg(long, default_value_t = 0)]
        after: u64,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
}

impl Cli {
    pub fn load_config(&self) -> anyhow::Result<Config> {
        let bind = match &self.command {
            Command::Serve { bind } => *bind,
            _ => None,
        };
        let cli = CliOverrides {
            data_dir: self.data_dir.clone(),
            bind,
            model_dir: self.model_dir.clone(),
            embed_model: self.embed_model,
            store: self
                .database_url
                .clone()
                .map(|url| crate::config::StoreOverrides { url: Some(url) }),
            vectors: self
                .qdrant_url
                .clone()
                .map(|url| crate::config::VectorsOverrides {
                    qdrant_url: Some(url),
                }),
        };
        Ok(Config::load(self.config.as_deref(), &cli)?)
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
}

/// A fresh secret: `hr_` and 48 hex chars (192 bits).
pub fn new_key_secret() -> String {
    let bytes: [u8; 24] = rand::rng().random();
    format!("hr_{}", hex::encode(bytes))
}

pub fn create_key(store: &dyn KeyStore, c: &CreateKey) -> anyhow::Result<(ApiKeyRecord, String)> {
    let tenant = match (&c.tenant, c.platform) {
        (Some(t), _) => t.clone(),
        (None, true) => "platform".to_string(),
        (None, false) => bail!("--tenant is required"),
    };
    for (what, v) in [("tenant", &tenant), ("user", &c.user)] {
        if !valid_name(v) {
            bail!("--{what} {v:?} must be 1-128 chars of [A-Za-z0-9._@-]");
        }
    }
    for g in &c.groups {
        if !valid_name(g) {
            bail!("--group {g:?} must be 1-128 chars of [A-Za-z0-9._@-]");
        }
    }
    let mut roles = c
        .roles
        .iter()
        .map(|r| {
            Role::parse(r).with_context(|| {
                let all: Vec<&str> = Role::ALL.iter().map(|r| r.as_str()).collect();
                format!("unknown role {r:?} ({})", all.join(", "))
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if roles.is_empty() {
        roles.push(Role::Writer);
    }
    roles.sort();
    roles.dedup();
    let admin = roles.contains(&Role::Admin);
    let mut projects = c.projects.clone();
    for p in &projects {
        if p == ALL_PROJECTS {
            if !admin {
                bail!("--project '*' (every project) is for admin keys");
            }
        } else if !valid_name(p) {
            bail!("--project {p:?} must be 1-128 chars of [A-Za-z0-9._@-] or '*'");
        }
    }
    if projects.is_empty() && admin {
        projects.push(ALL_PROJECTS.to_string());
    }
    projects.sort();
    projects.dedup();
    let purposes = key_purposes(&c.purposes, admin)?;
    let clearance = match &c.clearance {
        Some(s) => Sensitivity::parse(s).with_context(|| {
            format!("unknown clearance {s:?} (public, internal, confidential, secret)")
        })?,
        None if admin => Sensitivity::Secret,
        None => Sensitivity::Internal,
    };
    let secret = new_key_secret();
    let rec = ApiKeyRecord {
        id: format!("key_{}", uuid::Uuid::now_v7().simple()),
        key_hash: sha256_hex(&secret),
        tenant,
        user: c.user.clone(),
        groups: c.groups.clone(),
        roles,
        platform: c.platform,
        projects,
        purposes,
        clearance,
        created_at: chrono::Utc::now(),
        revoked_at: None,
    };
    store.create_key(&rec)?;
    Ok((rec, secret))
}

/// The purposes a new key holds: names as assets spell them, `*` for admin keys only, and `*`
/// for an admin key that names none (as with projects).
fn key_purposes(given: &[String], admin: bool) -> anyhow::Result<Vec<String>> {
    let mut purposes = given.to_vec();
    for p in &purposes {
        if p == ALL_PURPOSES {
            if !admin {
                bail!("--purpose '*' (every purpose) is for admin keys");
            }
        } else if registry_core::asset::validate_purposes(std::slice::from_ref(p)).is_err() {
            bail!("--purpose {p:?} must be 1-64 chars of [a-z0-9_.-] or '*'");
        }
    }
    if purposes.is_empty() && admin {
        purposes.push(ALL_PURPOSES.to_string());
    }
    purposes.sort();
    purposes.dedup();
    Ok(purposes)
}

/// Runs an administrative command on the store alone (no model, no indexes, so it can run
/// beside a serving process); returns the process exit code.
pub fn run_admin(
    store: std::sync::Arc<dyn registry_core::store::Store>,
    command: &Command,
    config: &Config,
) -> anyhow::Result<i32> {
    let audit = || -> anyhow::Result<registry_services::audit::AuditService> {
        Ok(registry_services::audit::AuditService::new(
            store.clone(),
            config.load_audit_key()?,
            config.audit_anchor_path(),
        ))
    };
    let store = store.as_ref();
    match command {
        Command::Keys(KeysCommand::Create(c)) => {
            let (rec, secret) = create_key(store, c)?;
            if c.json {
                println!(
                    "{}",
                    serde_json::json!({"id": rec.id, "key": secret, "tenant": rec.tenant, "user": rec.user})
                );
            } else {
                println!("{secret}");
                eprintln!(
                    "created {} for {}/{} (the key is shown once; only its sha256 is stored)",
                    rec.id, rec.tenant, rec.user
                );
            }
        }
        Command::Keys(KeysCommand::List { tenant }) => {
            for k in store.list_keys(tenant.as_deref())? {
                let roles: Vec<_> = k.roles.iter().map(|r| r.as_str()).collect();
                println!(
                    "{}\t{}\t{}\t{}\t{}\tpurposes={}\t{}\t{}{}",
                    k.id,
                    k.tenant,
                    k.user,
                    roles.join(","),
                    k.projects.join(","),
                    k.purposes.join(","),
                    k.clearance.as_str(),
                    if k.platform { "platform\t" } else { "" },
                    if k.revoked_at.is_some() {
                        "revoked"
                    } else {
                        "active"
                    }
                );
            }
        }
        Command::Keys(KeysCommand::Revoke { id }) => {
            if !store.revoke_key(id, "cli")? {
                bail!("no active key {id}");
            }
            println!("revoked {id}");
        }
        Command::Audit(AuditCommand::Verify) => {
            let v = audit()?.verify(None)?;
            if v.ok {
                println!(
                    "audit chain intact: {} events, {} signed checkpoints",
                    v.events, v.checkpoints
                );
            } else {
                println!(
                    "audit chain BROKEN at event {}: {} ({} events verified before it)",
                    v.broken_at.unwrap_or(0),
                    v.reason.unwrap_or_default(),
                    v.events
                );
                return Ok(1);
            }
        }
        Command::Audit(AuditCommand::Checkpoint) => match audit()?.checkpoint()? {
            Some(cp) => println!("checkpoint at event {} ({})", cp.seq, cp.hash),
            None => println!("no events yet"),
        },
        Command::Audit(AuditCommand::List { after, limit }) => {
            for e in store.audit_events(*after, *limit)? {
                println!("{}", serde_json::to_string(&e)?);
            }
        }
        Command::Migrate => {
            println!("schema version {}", store.schema_version()?);
        }
        Command::Config => {
            println!("{}", toml_like(config)?);
        }
        Command::Serve { .. } | Command::Jobs(_) | Command::Knowledge(_) | Command::Mcp => {
            unreachable!("serve and jobs need the full state and are run by main")
        }
    }
    Ok(0)
}

fn toml_like(c: &Config) -> anyhow::Result<String> {
    let mut c = c.clone();
    c.store.url = c.store.url.as_deref().map(redact_password);
    Ok(serde_json::to_string_pretty(&c)?)
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`: `registry config` prints
/// the effective settings, not the database password.
fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.rsplit_once('@') {
        Some((auth, host)) => match auth.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::Cli;
    use registry_core::principal::Role;

    #[test]
    fn keys_create_help_names_every_role() {
        let mut cmd = Cli::command();
        let create = cmd
            .find_subcommand_mut("keys")
            .and_then(|k| k.find_subcommand_mut("create"))
            .expect("registry keys create");
        let help = create.render_help().to_string();
        let all: Vec<&str> = Role::ALL.iter().map(|r| r.as_str()).collect();
        let listed = format!("[possible values: {}]", all.join(", "));
        assert!(help.contains(&listed), "{listed} missing from:\n{help}");
        // Every listed role is taken, and nothing else is.
        let create = |role: &str| {
            Cli::try_parse_from([
                "registry", "keys", "create", "--tenant", "t", "--user", "u", "--role", role,
            ])
        };
        for r in all {
            assert!(create(r).is_ok(), "{r} refused");
        }
        assert!(create("superuser").is_err());
    }
}
