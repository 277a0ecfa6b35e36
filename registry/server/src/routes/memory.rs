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

/// A memory to write. Fields: `class` (working, episodic, semantic, procedural), `content`,
/// `scope` (a level: tenant, project, user, session, task; or a scope object), `source`
/// (user_statement, tool_result, document, model_inference, system, import, web), `subject`,
/// `attribute`, `value`, `entities`, `applicability`, `evidence`, `speaker`, `session_date`,
/// `session_label`, `valid_from`, `valid_to`, `ttl_secs`, `sensitivity`.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct WriteBody(#[allow(dead_code)] serde_json::Value);

/// The gate's answer: `decision` (accepted, merged, superseded, candidate, conflict_pending),
/// `id`, `version`, `status`, `reasons` (each with `code`, `rule`, `detail`), `replaced`,
/// `conflicts_with`.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct WriteAnswer(#[allow(dead_code)] serde_json::Value);

/// `query`, `classes`, `scope`, `k`, `as_of`, `filters` (`entities`, `speaker`, `subject`,
/// `min_trust`, `session_label`).
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct SearchBody(#[allow(dead_code)] serde_json::Value);

/// `label` (`memory`: past experience), `as_of`, `hits` (each with `score`, `breakdown`,
/// `note`, `memory`).
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct SearchAnswer(#[allow(dead_code)] serde_json::Value);

/// `memory`, its `versions` and `related` records on the same subject and attribute.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct MemoryDetailView(#[allow(dead_code)] serde_json::Value);

/// One memory record with its governance fields and usage counters.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct MemoryItem(#[allow(dead_code)] serde_json::Value);

/// `outcome` (helpful or harmful) and optional `task`.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct FeedbackBody(#[allow(dead_code)] serde_json::Value);

/// Usage counters: `usage_count`, `last_retrieved`, `last_verified`, `helpful`, `harmful`,
/// `decay_weight`.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct StatsView(#[allow(dead_code)] serde_json::Value);

#[derive(Debug, Serialize, ToSchema)]
pub struct ReviewList {
    #[schema(value_type = Vec<Object>)]
    pub memories: Vec<serde_json::Value>,
}

fn json<T: Serialize>(v: T) -> ApiResult<axum::Json<serde_json::Value>> {
    serde_json::to_value(v)
        .map(axum::Json)
        .map_err(ApiError::internal)
}

fn idempotency_key(headers: &HeaderMap) -> ApiResult<Option<String>> {
    match headers.get("idempotency-key").map(|v| v.to_str()) {
        None => Ok(None),
        Some(Ok(k)) if !k.is_empty() && k.len() <= 200 && k.is_ascii() => Ok(Some(k.to_string())),
        Some(_) => Err(
            ApiError::validation("Idempotency-Key must be 1-200 ASCII characters")
                .with_details(serde_json::json!({ "header": "Idempotency-Key" })),
        ),
    }
}

/// Writes a memory through the gate. Rejections answer 422 `WRITE_GATE_REJECTED` with the
/// reasons; with `Idempotency-Key`, a retry returns the first answer.
#[utoipa::path(post, path = "/v1/memories", security(("bearer" = [])), request_body = WriteBody,
    params(("Idempotency-Key" = Option<String>, Header, description = "makes retries safe")),
    responses((status = 200, body = WriteAnswer), (status = 403, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn write_memory(
    State(state): State<AppState>,
    Auth(p): Auth,
    headers: HeaderMap,
    ApiJson(req): ApiJson<WriteRequest>,
) -> ApiResult<axum::Json<serde_json::Value>> {
    let key = idempotency_key(&headers)?;
    state
        .blocking(move |s| json(s.services.memory.write(&p, &req, key.as_deref())?))
        .await
}

/// Largest batch `POST /v1/memories/batch` takes.
pub const MAX_BATCH: usize = 100;

/// `{memories: [<write body>, ...]}`, at most 100.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchBody {
    #[schema(value_type = Vec<Object>)]
    pub memories: Vec<WriteRequest>,
}

/// `{results: [{index, decision, id, ...} | {index, error: {code, message, details}}]}`, one per
/// item, in order.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct BatchAnswer(#[allow(dead_code)] serde_json::Value);

/// Writes up to 100 memories, in order, each through the whole gate, with one embedding call.
/// Every item gets its own answer (a rejected item does not stop the others). With
/// `Idempotency-Key: K`, item `i` is retried safely under `K:i`.
#[utoipa::path(post, path = "/v1/memories/batch", security(("bearer" = [])), request_body = BatchBody,
    params(("Idempotency-Key" = Option<String>, Header, description = "makes retries safe")),
    responses((status = 200, body = BatchAnswer), (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn write_batch(
    State(state): State<AppState>,
    Auth(p): Auth,
    headers: HeaderMap,
    ApiJson(req): ApiJson<BatchBody>,
) -> ApiResult<axum::Json<serde_json::Value>> {
    let key = idempotency_key(&headers)?;
    if req.memories.is_empty() || req.memories.len() > MAX_BATCH {
        return Err(
            ApiError::validation(format!("a batch holds 1 to {MAX_BATCH} memories"))
                .with_details(serde_json::json!({ "field": "memories" })),
        );
    }
    state
        .blocking(move |s| {
            let results: Vec<serde_json::Value> = s
                .services
                .memory
                .write_batch(&p, &req.memories, key.as_deref())
                .into_iter()
                .enumerate()
                .map(|(i, r)| match r {
                    Ok(out) => {
                        let mut v = serde_json::to_value(out).unwrap_or_default();
                        v["index"] = serde_json::json!(i);
                        v
                    }
                    Err(e) => {
                        let e = ApiError::from(e);
                        serde_json::json!({"index": i, "error": {
                            "code": e.code.as_str(), "message": e.message, "details": e.details}})
                    }
                })
                .collect();
            Ok(axum::Json(serde_json::json!({ "results": results })))
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
) -> ApiResult<axum::Json<serde_json::Value>> {
    let res = state
        .blocking(move |s| Ok(s.services.memory.search(&p, &req)?))
        .await?;
    json(res)
}

/// A memory the caller may see, with its versions and related records.
#[utoipa::path(get, path = "/v1/memories/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "memory id")),
    responses((status = 200, body = MemoryDetailView), (status = 404, body = ErrorBody)))]
pub async fn get_memory(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<serde_json::Value>> {
    state
        .blocking(move |s| json(s.services.memory.get(&p, &id)?))
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
) -> ApiResult<axum::Json<serde_json::Value>> {
    state
        .blocking(move |s| json(s.services.memory.feedback(&p, &id, &req)?))
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReviewParams {
    /// At most this many (default 100, at most 1000).
    pub limit: Option<u32>,
}

/// Pending memories (candidate, quarantined, conflict_pending) in the caller's scopes.
#[utoipa::path(get, path = "/v1/memories/review", security(("bearer" = [])), params(ReviewParams),
    responses((status = 200, body = ReviewList)))]
pub async fn review_queue(
    State(state): State<AppState>,
    Auth(p): Auth,
    Query(q): Query<ReviewParams>,
) -> ApiResult<axum::Json<ReviewList>> {
    let limit = q.limit.unwrap_or(100).min(1000) as usize;
    state
        .blocking(move |s| {
            let list = s.services.memory.review_queue(&p, limit)?;
            Ok(axum::Json(ReviewList {
                memories: list
                    .into_iter()
                    .map(|v| serde_json::to_value(v).unwrap_or_default())
                    .collect(),
            }))
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
) -> ApiResult<axum::Json<serde_json::Value>> {
    state
        .blocking(move |s| json(s.services.memory.confirm(&p, &id)?))
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
) -> ApiResult<axum::Json<serde_json::Value>> {
    state
        .blocking(move |s| json(s.services.memory.reject(&p, &id)?))
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeleteParams {
    /// How far: `revoked` (default: no further read, removed from both indexes) or `purged`
    /// (also every version, edge and derived record gone from disk, with a receipt).
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
) -> ApiResult<axum::Json<serde_json::Value>> {
    let purge = match q.level.as_deref() {
        None | Some("revoked") => false,
        Some("purged") => true,
        Some(other) => {
            return Err(
                ApiError::validation(format!("unknown level {other:?} (revoked, purged)"))
                    .with_details(serde_json::json!({"field": "level"})),
            );
        }
    };
    state
        .blocking(move |s| {
            // The service checks visibility and the right to delete, then revokes.
            let axum::Json(mut answer) = json(s.services.memory.revoke(&p, &id)?)?;
            if purge {
                let receipt = s.services.deletions.delete(
                    &p,
                    std::slice::from_ref(&id),
                    registry_core::deletion::DeletionLevel::Purged,
                    "memory deleted",
                )?;
                answer["receipt"] = serde_json::to_value(receipt).map_err(ApiError::internal)?;
            }
            Ok(axum::Json(answer))
        })
        .await
}
