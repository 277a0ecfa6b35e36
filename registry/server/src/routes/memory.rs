//! Memory routes: write through the gate, search, read with history, feedback, the review queue
//! and revocation.

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use registry_memory::WriteRequest;
use registry_memory::search::SearchRequest;
use registry_memory::service::FeedbackRequest;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use registry_core::FieldError;
use registry_core::deletion::Receipt;
use registry_core::usage::UsageStats;
use registry_memory::search::SearchResponse;
use registry_memory::service::{MemoryDetail, WriteOutcome};

use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiPath as Path, ApiQuery as Query, Auth};
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(
    paths(
        write_memory,
        write_batch,
        search_memories,
        get_memory,
        feedback,
        review_queue,
        confirm,
        reject,
        revoke
    ),
    components(schemas(
        WriteBody,
        WriteAnswer,
        BatchBody,
        BatchAnswer,
        SearchBody,
        SearchAnswer,
        MemoryDetailView,
        MemoryItem,
        MemoryView,
        FeedbackBody,
        StatsView,
        ReviewList,
        ErrorBody
    ))
)]
pub struct MemoryApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/memories", post(write_memory))
        .route("/v1/memories/search", post(search_memories))
        .route("/v1/memories/batch", post(write_batch))
        .route("/v1/memories/review", get(review_queue))
        .route("/v1/memories/{id}", get(get_memory).delete(revoke))
        .route("/v1/memories/{id}/feedback", post(feedback))
        .route("/v1/memories/{id}/confirm", post(confirm))
        .route("/v1/memories/{id}/reject", post(reject))
}

crate::bodies::wire_bodies! {
    /// A memory to write through the gate.
    request WriteBody = registry_memory::WriteRequest;
    /// The gate's answer.
    answer WriteAnswer = registry_memory::service::WriteOutcome;
    /// A memory search.
    request SearchBody = registry_memory::search::SearchRequest;
    /// Hits labelled as memory (past experience).
    answer SearchAnswer = registry_memory::search::SearchResponse;
    /// A memory with its versions and related records.
    answer MemoryDetailView = registry_memory::service::MemoryDetail;
    /// `outcome` (helpful or harmful) and optional `task`.
    request FeedbackBody = registry_memory::service::FeedbackRequest;
    /// Usage counters.
    answer StatsView = registry_core::usage::UsageStats;
    /// One memory record.
    answer MemoryView = registry_memory::MemoryView;
    answer MemoryItem;
    answer BatchAnswer;
}

/// One memory record with its governance fields and usage counters; after a purge, with the
/// deletion receipt.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct MemoryItem {
    #[serde(flatten)]
    pub memory: registry_memory::MemoryView,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Receipt>,
}

impl From<registry_memory::MemoryView> for MemoryItem {
    fn from(memory: registry_memory::MemoryView) -> Self {
        MemoryItem {
            memory,
            receipt: None,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReviewList {
    #[schema(schema_with = memory_views)]
    pub memories: Vec<registry_memory::MemoryView>,
}

fn memory_views() -> utoipa::openapi::schema::Array {
    crate::bodies::array_of::<MemoryView>()
}

fn idempotency_key(headers: &HeaderMap) -> ApiResult<Option<String>> {
    match headers.get("idempotency-key").map(|v| v.to_str()) {
        None => Ok(None),
        Some(Ok(k)) if crate::extract::idempotency_key_ok(k) => Ok(Some(k.to_string())),
        Some(_) => Err(ApiError::validation(
            "Idempotency-Key must be 1-200 visible ASCII characters",
        )
        .with_details(serde_json::json!({ "header": "Idempotency-Key" }))),
    }
}

/// Writes a memory through the gate. Rejections answer 422 `WRITE_GATE_REJECTED` with the
/// reasons; with `Idempotency-Key`, a retry returns the first answer.
#[utoipa::path(post, path = "/v1/memories", security(("bearer" = [])), request_body = WriteBody,
    params(("Idempotency-Key" = Option<String>, Header, description = "makes retries safe",
        min_length = 1, max_length = 200, pattern = "^[!-~]+$")),
    responses((status = 200, body = WriteAnswer), (status = 403, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn write_memory(
    State(state): State<AppState>,
    Auth(p): Auth,
    headers: HeaderMap,
    ApiJson(req): ApiJson<WriteRequest>,
) -> ApiResult<axum::Json<WriteOutcome>> {
    let key = idempotency_key(&headers)?;
    state
        .blocking(move |s| {
            Ok(axum::Json(s.services.memory.write(
                &p,
                &req,
                key.as_deref(),
            )?))
        })
        .await
}

/// Largest batch `POST /v1/memories/batch` takes.
pub const MAX_BATCH: usize = 100;

/// `{memories: [<write body>, ...]}`, at most 100.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchBody {
    #[schema(schema_with = write_bodies)]
    #[serde(deserialize_with = "registry_core::wire::objects")]
    pub memories: Vec<WriteRequest>,
}

/// 1 to [`MAX_BATCH`] write bodies (`schema_with` replaces the whole schema, so the bounds
/// are set here, not beside it).
fn write_bodies() -> utoipa::openapi::schema::Array {
    let mut items = crate::bodies::array_of::<WriteBody>();
    items.min_items = Some(1);
    items.max_items = Some(MAX_BATCH);
    items
}

/// One answer per item, in order.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct BatchAnswer {
    pub results: Vec<BatchItem>,
}

/// The gate's answer for item `index`, or the error that stopped it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum BatchItem {
    Written {
        index: usize,
        #[serde(flatten)]
        outcome: WriteOutcome,
    },
    Failed {
        index: usize,
        error: ItemError,
    },
}

/// The error body of one batch item (as `error` in the error envelope).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ItemError {
    pub code: String,
    pub message: String,
    pub details: serde_json::Value,
}

/// Writes up to 100 memories, in order, each through the whole gate, with one embedding call.
/// Every item gets its own answer (a rejected item does not stop the others). With
/// `Idempotency-Key: K`, item `i` is retried safely under `K:i`.
#[utoipa::path(post, path = "/v1/memories/batch", security(("bearer" = [])), request_body = BatchBody,
    params(("Idempotency-Key" = Option<String>, Header, description = "makes retries safe",
        min_length = 1, max_length = 200, pattern = "^[!-~]+$")),
    responses((status = 200, body = BatchAnswer), (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn write_batch(
    State(state): State<AppState>,
    Auth(p): Auth,
    headers: HeaderMap,
    ApiJson(req): ApiJson<BatchBody>,
) -> ApiResult<axum::Json<BatchAnswer>> {
    let key = idempotency_key(&headers)?;
    if req.memories.is_empty() || req.memories.len() > MAX_BATCH {
        return Err(
            ApiError::validation(format!("a batch holds 1 to {MAX_BATCH} memories"))
                .with_details(FieldError::new("memories")),
        );
    }
    // What the document says of every item (its caps, a content that is not blank) is
    // checked before any is written: an item the schema refuses refuses the whole batch, as
    // an unknown field does, naming the item. The gate's decisions and conflicts stay per item.
    for (i, m) in req.memories.iter().enumerate() {
        if let Err(e) = m.check_contract() {
            let mut e = ApiError::from(e);
            if let Some(field) = e.details.get("field").and_then(|f| f.as_str()) {
                e.details["field"] = format!("memories[{i}].{field}").into();
            }
            return Err(e);
        }
    }
    state
        .blocking(move |s| {
            let results = s
                .services
                .memory
                .write_batch(&p, &req.memories, key.as_deref())
                .into_iter()
                .enumerate()
                .map(|(index, r)| match r {
                    Ok(outcome) => BatchItem::Written { index, outcome },
                    Err(e) => {
                        let e = ApiError::from(e);
                        BatchItem::Failed {
                            index,
                            error: ItemError {
                                code: e.code.as_str().to_string(),
                                message: e.message,
                                details: e.details,
                            },
                        }
                    }
                })
                .collect();
            Ok(axum::Json(BatchAnswer { results }))
        })
        .await
}

/// Searches the caller's visible memories with a mixed-signal ranking; every hit is labelled
/// as memory (past experience) and carries its score breakdown.
#[utoipa::path(post, path = "/v1/memories/search", security(("bearer" = [])), request_body = SearchBody,
    responses((status = 200, body = SearchAnswer), (status = 422, body = ErrorBody)))]
pub async fn search_memories(
    State(state): State<AppState>,
    Auth(p): Auth,
    ApiJson(req): ApiJson<SearchRequest>,
) -> ApiResult<axum::Json<SearchResponse>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.memory.search(&p, &req)?)))
        .await
}

/// A memory the caller may see, with its versions and related records.
///
/// A deleted (revoked) memory answers 404; its governors find its metadata at
/// `GET /v1/assets/{id}`.
#[utoipa::path(get, path = "/v1/memories/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "memory id")),
    responses((status = 200, body = MemoryDetailView), (status = 404, body = ErrorBody)))]
pub async fn get_memory(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<MemoryDetail>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.memory.get_undeleted(&p, &id)?)))
        .await
}

/// Records that a memory helped or harmed a task.
#[utoipa::path(post, path = "/v1/memories/{id}/feedback", security(("bearer" = [])),
    params(("id" = String, Path, description = "memory id")), request_body = FeedbackBody,
    responses((status = 200, body = StatsView), (status = 404, body = ErrorBody)))]
pub async fn feedback(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<FeedbackRequest>,
) -> ApiResult<axum::Json<UsageStats>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.memory.feedback(&p, &id, &req)?)))
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ReviewParams {
    /// At most this many (default 100, at most 1000).
    #[param(minimum = 0, maximum = 1000)]
    pub limit: Option<u64>,
}

/// Pending memories (candidate, quarantined, conflict_pending) in the caller's scopes.
#[utoipa::path(get, path = "/v1/memories/review", security(("bearer" = [])), params(ReviewParams),
    responses((status = 200, body = ReviewList)))]
pub async fn review_queue(
    State(state): State<AppState>,
    Auth(p): Auth,
    Query(q): Query<ReviewParams>,
) -> ApiResult<axum::Json<ReviewList>> {
    let limit = crate::extract::bounded("limit", q.limit, 100, 1000)?;
    state
        .blocking(move |s| {
            let list = s.services.memory.review_queue(&p, limit)?;
            Ok(axum::Json(ReviewList { memories: list }))
        })
        .await
}

/// Confirms a pending memory (reviewer role); it supersedes the record it conflicted with.
#[utoipa::path(post, path = "/v1/memories/{id}/confirm", security(("bearer" = [])),
    params(("id" = String, Path, description = "memory id")),
    responses((status = 200, body = MemoryItem), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn confirm(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<MemoryItem>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.memory.confirm(&p, &id)?.into())))
        .await
}

/// Rejects a pending memory (reviewer role); it is revoked.
#[utoipa::path(post, path = "/v1/memories/{id}/reject", security(("bearer" = [])),
    params(("id" = String, Path, description = "memory id")),
    responses((status = 200, body = MemoryItem), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn reject(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<MemoryItem>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.memory.reject(&p, &id)?.into())))
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeleteParams {
    /// How far: `revoked` (default: no further read, removed from both indexes) or `purged`
    /// (also every version, edge and derived record gone from disk, with a receipt).
    #[param(pattern = "^(revoked|purged)$")]
    pub level: Option<String>,
}

/// Revokes a memory now: no further read in search or context, removed from both indexes.
/// With `?level=purged` the deletion also follows every derivation edge and purges, and the
/// answer carries the deletion receipt.
#[utoipa::path(delete, path = "/v1/memories/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "memory id"), DeleteParams),
    responses((status = 200, body = MemoryItem), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn revoke(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    Query(q): Query<DeleteParams>,
) -> ApiResult<axum::Json<MemoryItem>> {
    let purge = match q.level.as_deref() {
        None | Some("revoked") => false,
        Some("purged") => true,
        Some(other) => {
            return Err(
                ApiError::validation(format!("unknown level {other:?} (revoked, purged)"))
                    .with_details(FieldError::new("level")),
            );
        }
    };
    state
        .blocking(move |s| {
            // The service checks visibility and the right to delete, then revokes.
            let mut answer = MemoryItem::from(s.services.memory.revoke(&p, &id)?);
            if purge {
                let receipt = s.services.deletions.delete(
                    &p,
                    std::slice::from_ref(&id),
                    registry_core::deletion::DeletionLevel::Purged,
                    "memory deleted",
                )?;
                answer.receipt = Some(s.services.deletions.for_reader(&p, receipt)?);
            }
            Ok(axum::Json(answer))
        })
        .await
}
