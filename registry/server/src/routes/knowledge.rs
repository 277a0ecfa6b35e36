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

crate::bodies::wire_bodies! {
    answer use registry_knowledge::service::DocumentSummary;
    /// A document to ingest.
    request IngestBody = registry_knowledge::IngestRequest;
    /// An evidence search.
    request KnowledgeSearchBody = registry_knowledge::SearchRequest;
    /// What an ingest did.
    answer IngestAnswer = registry_knowledge::service::IngestOutcome;
    /// A document with its content and chunks.
    answer DocumentAnswer = registry_knowledge::service::DocumentView;
    /// Evidence, or `INSUFFICIENT_EVIDENCE`.
    answer SearchAnswerDoc = registry_knowledge::SearchAnswer;
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentList {
    #[schema(schema_with = document_summaries)]
    pub documents: Vec<DocumentSummary>,
}

fn document_summaries() -> utoipa::openapi::schema::Array {
    crate::bodies::array_of_schema::<registry_knowledge::service::DocumentSummary>()
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
    responses((status = 200, description = "the deletion receipt", body = crate::bodies::Receipt),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn delete_document(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<registry_core::deletion::Receipt>> {
    state
        .blocking(move |s| {
            let doc = s.services.visible_asset(&p, &id)?;
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
            Ok(axum::Json(s.services.deletions.for_reader(&p, receipt)?))
        })
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
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
