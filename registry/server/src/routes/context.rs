//! Context packs and their manifests.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use utoipa::OpenApi;

use crate::error::{ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiPath as Path, Auth};
use crate::state::AppState;
use registry_context::{Comparison, Manifest, Pack, PackRequest, Replay};

#[derive(OpenApi)]
#[openapi(
    paths(create_pack, get_manifest, compare_packs, replay_pack),
    components(schemas(
        PackBody,
        PackAnswer,
        ManifestAnswer,
        ComparisonAnswer,
        ReplayAnswer,
        ErrorBody
    ))
)]
pub struct ContextApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/context", post(create_pack))
        .route("/v1/context/{id}", get(get_manifest))
        .route("/v1/context/{id}/compare/{other}", get(compare_packs))
        .route("/v1/context/{id}/replay", post(replay_pack))
}

crate::bodies::wire_bodies! {
    /// A context pack to compile.
    request PackBody = registry_context::PackRequest;
    /// The pack, its items and its manifest.
    answer PackAnswer = registry_context::Pack;
    /// The Context Manifest.
    answer ManifestAnswer = registry_context::Manifest;
    /// How two packs differ.
    answer ComparisonAnswer = registry_context::Comparison;
    /// A stored pack compiled again now, and the difference item by item.
    answer ReplayAnswer = registry_context::Replay;
}

/// Compiles a context pack in layers within the token budget and stores its manifest. The
/// fixed zone (rules and goal) is never cut: over the budget alone it answers 422
/// `FIXED_ZONE_OVER_BUDGET`.
#[utoipa::path(post, path = "/v1/context", security(("bearer" = [])), request_body = PackBody,
    responses((status = 200, body = PackAnswer),
        (status = 404, description = "`task` names no task the caller may read", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn create_pack(
    State(state): State<AppState>,
    Auth(p): Auth,
    ApiJson(req): ApiJson<PackRequest>,
) -> ApiResult<axum::Json<Pack>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.context.compile(&p, &req)?)))
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
) -> ApiResult<axum::Json<Manifest>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.context.load(&p, &id)?)))
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
) -> ApiResult<axum::Json<Comparison>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.context.compare(&p, &id, &other)?)))
        .await
}

/// Replays a stored pack: its request compiled again, for the caller, against the registry as
/// it is now, and the difference item by item (`added`, `removed`, `changed` version or hash,
/// each with its reasons). Nothing is stored and nothing counts as used. The pack must be the
/// caller's own (any in the tenant for an admin), else 404; a pack stored before requests were
/// kept answers 409 `REPLAY_UNAVAILABLE`.
#[utoipa::path(post, path = "/v1/context/{id}/replay", security(("bearer" = [])),
    params(("id" = String, Path, description = "context pack id")),
    responses((status = 200, body = ReplayAnswer), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub async fn replay_pack(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<Replay>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.context.replay(&p, &id)?)))
        .await
}
