//! Knowledge: documents ingested as governed evidence, and the evidence search.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};

use registry_knowledge::{IngestRequest, SearchRequest};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use registry_knowledge::service::{DocumentSummary, DocumentView, IngestOutcome};

use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiPath as Path, ApiQuery as Query, Auth};
use crate::openapi::wire_body;
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(
    paths(
        ingest_document,
        get_document,
        delete_document,
        list_documents,
        search_knowledge
    ),
    components(schemas(
        IngestBody,
        KnowledgeSearchBody,
        IngestAnswer,
        DocumentAnswer,
        DocumentList,
        SearchAnswerDoc,
        ErrorBody
    ))
)]
pub struct KnowledgeApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/knowledge/documents",
            post(ingest_document).get(list_documents),
        )
        .route(
            "/v1/knowledge/documents/{id}",
            get(get_document).delete(delete_document),
        )
        .route("/v1/knowledge/search", post(search_knowledge))
}

wire_body!(
    /// A document to ingest: `registry_knowledge::IngestRequest`.
    IngestBody
);
wire_body!(
    /// An evidence search: `registry_knowledge::SearchRequest`.
    KnowledgeSearchBody
);
wire_body!(
    /// What an ingest did: `registry_knowledge::service::IngestOutcome`.
    IngestAnswer
);
wire_body!(
    /// A document with its content and chunks: `registry_knowledge::service::DocumentView`.
    DocumentAnswer
);
wire_body!(
    /// Evidence, or `INSUFFICIENT_EVIDENCE`: `registry_knowledge::SearchAnswer`.
    SearchAnswerDoc
);

#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentList {
    #[schema(schema_with = document_summaries)]
    pub documents: Vec<DocumentSummary>,
}

fn document_summaries() -> utoipa::openapi::schema::Array {
    crate::openapi::array_of("DocumentSummary")
}

/// Ingests a document: chunked by structure, embedded, committed atomically, indexed. The same
/// content and metadata again answers `unchanged`; a new version supersedes the previous one.
#[utoipa::path(post, path = "/v1/knowledge/documents", security(("bearer" = [])),
    request_body = IngestBody,
    responses((status = 201, body = IngestAnswer), (status = 200, description = "unchanged", body = IngestAnswer),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn ingest_document(
    State(state): State<AppState>,
    Auth(p): Auth,
    ApiJson(req): ApiJson<IngestRequest>,
) -> ApiResult<(axum::http::StatusCode, axum::Json<IngestOutcome>)> {
    state
        .blocking(move |s| {
            let out = s.services.knowledge.ingest(&p, req)?;
            let code = match out.status {
                registry_knowledge::service::IngestStatus::Unchanged => axum::http::StatusCode::OK,
                _ => axum::http::StatusCode::CREATED,
            };
            Ok((code, axum::Json(out)))
        })
        .await
}

/// A document the caller may see, with its content and chunks.
#[utoipa::path(get, path = "/v1/knowledge/documents/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "document id")),
    responses((status = 200, body = DocumentAnswer), (status = 404, body = ErrorBody)))]
pub async fn get_document(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<DocumentView>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.knowledge.get_document(&p, &id)?)))
        .await
}

/// Deletes a document (every version), its chunks and their index entries, down to the
/// purged level, and returns the deletion receipt. Needs the document's owner (with the writer
/// role in its scope) or an admin of its scope; a document the caller cannot see answers 404.
#[utoipa::path(delete, path = "/v1/knowledge/documents/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "document id")),
    responses((status = 200, description = "the deletion receipt", body = crate::openapi::Receipt),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn delete_document(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<registry_core::deletion::Receipt>> {
    state
        .blocking(move |s| {
            let doc =
                crate::routes::system::visible_record(s.services.backends.store.as_ref(), &p, &id)?;
            if doc.meta.kind != registry_core::asset::AssetKind::Document {
                return Err(ApiError::not_found(format!("no document {id}")));
            }
            registry_core::access::require(&p, registry_core::access::Action::Delete, &doc.meta)?;
            let receipt = s.services.deletions.delete(
                &p,
                std::slice::from_ref(&id),
                registry_core::deletion::DeletionLevel::Purged,
                "document deleted",
            )?;
            Ok(axum::Json(receipt))
        })
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListDocs {
    /// At most this many (default 100, at most 1000).
    #[param(minimum = 0, maximum = 1000)]
    pub limit: Option<u64>,
    /// The id of the last document of the previous page.
    pub after: Option<String>,
}

/// Current versions of the documents the caller may see, oldest first, paged with `after`.
#[utoipa::path(get, path = "/v1/knowledge/documents", security(("bearer" = [])), params(ListDocs),
    responses((status = 200, body = DocumentList),
        (status = 404, description = "`after` names no document the caller can see", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn list_documents(
    State(state): State<AppState>,
    Auth(p): Auth,
    Query(q): Query<ListDocs>,
) -> ApiResult<axum::Json<DocumentList>> {
    let limit = crate::extract::bounded("limit", q.limit, 100, 1000)?;
    state
        .blocking(move |s| {
            let docs = s
                .services
                .knowledge
                .list_documents(&p, limit, q.after.as_deref())?;
            Ok(axum::Json(DocumentList { documents: docs }))
        })
        .await
}

/// Evidence search: both legs restricted to the caller's scopes and ACL keys before ranking;
/// expired, not-yet-effective and superseded chunks dropped; stale ones marked; higher
/// authority first on near ties. `INSUFFICIENT_EVIDENCE` (HTTP 200) when nothing admissible
/// and fresh clears `min_score`.
#[utoipa::path(post, path = "/v1/knowledge/search", security(("bearer" = [])),
    request_body = KnowledgeSearchBody,
    responses((status = 200, body = SearchAnswerDoc), (status = 422, body = ErrorBody)))]
pub async fn search_knowledge(
    State(state): State<AppState>,
    Auth(p): Auth,
    ApiJson(req): ApiJson<SearchRequest>,
) -> ApiResult<axum::Json<registry_knowledge::SearchAnswer>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.knowledge.search(&p, req)?)))
        .await
}

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
