//! Context packs and their manifests.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use utoipa::{OpenApi, ToSchema};

use crate::error::{ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiPath as Path, Auth};
use crate::state::AppState;
use registry_context::PackRequest;

#[derive(OpenApi)]
#[openapi(
    paths(create_pack, get_manifest, compare_packs),
    components(schemas(PackBody, PackAnswer, ManifestAnswer, ComparisonAnswer, ErrorBody))
)]
pub struct ContextApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/context", post(create_pack))
        .route("/v1/context/{id}", get(get_manifest))
        .route("/v1/context/{id}/compare/{other}", get(compare_packs))
}

/// `goal`, `phase`, `budget` (tokens), `fixed_rules`, `query` (default: the goal), `draw_on`
/// (`working_memory`, `memory`, `knowledge`, `skills`; default all), `limits` (per layer),
/// `memory_scope` (a level), `min_score`, `allow_stale`, `as_of`.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct PackBody(#[allow(dead_code)] serde_json::Value);

/// `id`, `budget`, `used_tokens`, `text` (the items joined by blank lines), `items` (each with
/// `layer`, `source_type`, `source_id`, `content`, `tokens`, `transform`) and `manifest`.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct PackAnswer(#[allow(dead_code)] serde_json::Value);

/// The Context Manifest: `items` (source, scope, version, trust, permission basis, selected
/// reason, tokens, transform, content hash) and `omitted` (with `reason`: out_of_scope,
/// over_budget, stale, duplicate, low_score), per-layer counts and the budget.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct ManifestAnswer(#[allow(dead_code)] serde_json::Value);

/// `a`, `b`, `differences` (each source whose state differs: `included`, `omitted: <reason>`
/// or `not_a_candidate`) and the number `unchanged`.
#[derive(Debug, ToSchema)]
#[schema(value_type = Object)]
pub struct ComparisonAnswer(#[allow(dead_code)] serde_json::Value);

fn to_json<T: serde::Serialize>(v: &T) -> ApiResult<axum::Json<serde_json::Value>> {
    serde_json::to_value(v)
        .map(axum::Json)
        .map_err(crate::error::ApiError::internal)
}

/// Compiles a context pack in layers within the token budget and stores its manifest. The
/// fixed zone (rules and goal) is never cut: over the budget alone it answers 422
/// `FIXED_ZONE_OVER_BUDGET`.
#[utoipa::path(post, path = "/v1/context", security(("bearer" = [])), request_body = PackBody,
    responses((status = 200, body = PackAnswer), (status = 422, body = ErrorBody)))]
pub async fn create_pack(
    State(state): State<AppState>,
    Auth(p): Auth,
    ApiJson(req): ApiJson<PackRequest>,
) -> ApiResult<axum::Json<serde_json::Value>> {
    state
        .blocking(move |s| to_json(&s.services.context.compile(&p, &req)?))
        .await
}

/// A pack's manifest: the caller's own, or any in the tenant for an admin.
#[utoipa::path(get, path = "/v1/context/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "context pack id")),
    responses((status = 200, body = ManifestAnswer), (status = 404, body = ErrorBody)))]
pub async fn get_manifest(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<serde_json::Value>> {
    state
        .blocking(move |s| to_json(&s.services.context.load(&p, &id)?))
        .await
}

/// Explains the difference between two packs: what one included that the other left out
/// (with the reason) or never saw.
#[utoipa::path(get, path = "/v1/context/{id}/compare/{other}", security(("bearer" = [])),
    params(("id" = String, Path, description = "pack a"), ("other" = String, Path, description = "pack b")),
    responses((status = 200, body = ComparisonAnswer), (status = 404, body = ErrorBody)))]
pub async fn compare_packs(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path((id, other)): Path<(String, String)>,
) -> ApiResult<axum::Json<serde_json::Value>> {
    state
        .blocking(move |s| to_json(&s.services.context.compare(&p, &id, &other)?))
        .await
}
