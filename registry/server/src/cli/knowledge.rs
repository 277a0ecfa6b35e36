//! `registry knowledge …`: ingest files and reindex, on the full state (no HTTP).

use registry_knowledge::IngestRequest;

use crate::state::AppState;

/// `registry knowledge …`
#[derive(Debug, clap::Subcommand)]
pub enum KnowledgeCommand {
    /// Ingest files or directories (format from the extension: .md, .markdown, .txt, .json,
    /// .jsonl); prints one JSON line per file and exits 1 if any file failed.
    Ingest(Box<IngestArgs>),
    /// Re-embed and re-index every servable chunk (after a crash between commit and indexing,
    /// or a model change).
    Reindex,
}

#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    /// Files or directories (walked recursively; files with other extensions are skipped).
    #[arg(required = true)]
    pub paths: Vec<std::path::PathBuf>,
    #[arg(long)]
    pub tenant: String,
    /// Prepended to each file's path (relative to the directory given) to make its source_id.
    #[arg(long, default_value = "")]
    pub source_prefix: String,
    /// policy, system_of_record, reference (default) or informal.
    #[arg(long)]
    pub authority: Option<String>,
    /// ACL entries (repeatable): public, user:NAME, group:NAME, role:NAME. Default public.
    #[arg(long = "acl")]
    pub acl: Vec<String>,
    /// Place the documents in this project of the tenant.
    #[arg(long)]
    pub project: Option<String>,
    #[arg(long)]
    pub owner: Option<String>,
    /// Version label for every file (default: sha256 prefix of each file's content).
    #[arg(long)]
    pub version: Option<String>,
    #[arg(long)]
    pub effective_at: Option<chrono::DateTime<chrono::Utc>>,
    #[arg(long)]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

fn collect_files(
    path: &std::path::Path,
    base: &std::path::Path,
    out: &mut Vec<(std::path::PathBuf, String)>,
) -> std::io::Result<()> {
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?;
        entries.sort();
        for e in entries {
            let known = e
                .extension()
                .and_then(|x| x.to_str())
                .and_then(registry_knowledge::Format::parse)
                .is_some();
            if e.is_dir() || known {
                collect_files(&e, base, out)?;
            }
        }
    } else {
        let rel = path.strip_prefix(base).unwrap_or(path);
        let rel = if rel.as_os_str().is_empty() {
            path.file_name()
                .map(std::path::PathBuf::from)
                .unwrap_or_default()
        } else {
            rel.to_path_buf()
        };
        let name = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        out.push((path.to_path_buf(), name));
    }
    Ok(())
}

/// Runs `registry knowledge …` on the full state; returns the exit code.
pub fn run_cli(state: &AppState, cmd: &KnowledgeCommand) -> anyhow::Result<i32> {
    let svc = &state.services.knowledge;
    let a = match cmd {
        KnowledgeCommand::Reindex => {
            let n = svc.reindex()?;
            println!("{}", serde_json::json!({ "reindexed_chunks": n }));
            return Ok(0);
        }
        KnowledgeCommand::Ingest(a) => a,
    };
    let mut p = registry_core::Principal::new(a.tenant.clone(), "cli");
    p.roles = vec![registry_core::Role::Admin];
    p.projects = vec![registry_core::principal::ALL_PROJECTS.to_string()];
    let mut files = Vec::new();
    for path in &a.paths {
        let base = if path.is_dir() {
            path.as_path()
        } else {
            path.parent().unwrap_or(path)
        };
        collect_files(path, base, &mut files)?;
    }
    let mut failed = 0;
    for (path, rel) in files {
        let source_id = format!("{}{rel}", a.source_prefix);
        let result = std::fs::read(&path)
            .map_err(|e| registry_knowledge::Error::validation("path", e.to_string()))
            .and_then(registry_knowledge::decode_utf8)
            .and_then(|content| {
                let format = path
                    .extension()
                    .and_then(|x| x.to_str())
                    .unwrap_or("")
                    .to_string();
                svc.ingest(
                    &p,
                    IngestRequest {
                        source_id: source_id.clone(),
                        version: a.version.clone(),
                        format,
                        content,
                        effective_at: a.effective_at,
                        expires_at: a.expires_at,
                        owner: a.owner.clone(),
                        authority: a.authority.clone(),
                        scope: Some(registry_core::Scope {
                            project: a.project.clone(),
                            ..registry_core::Scope::tenant(a.tenant.clone())
                        }),
                        acl: (!a.acl.is_empty()).then(|| a.acl.clone()),
                        sensitivity: None,
                        purposes: None,
                        retain_until: None,
                    },
                )
            });
        let line = match result {
            Ok(out) => {
                let mut v = serde_json::to_value(&out)?;
                v["path"] = serde_json::json!(path.display().to_string());
                v
            }
            Err(e) => {
                failed += 1;
                serde_json::json!({
                    "path": path.display().to_string(),
                    "source_id": source_id,
                    "error": { "code": e.code().as_str(), "message": e.to_string() }
                })
            }
        };
        println!("{line}");
    }
    Ok(if failed > 0 { 1 } else { 0 })
}
