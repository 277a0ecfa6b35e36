//! Deletion receipts and subject erasure: the HTTP door to the services' deletion and erasure.

use axum::Router;
use axum::extract::State;
use axum::routing::{delete, get};
use registry_core::deletion::Receipt;
use registry_core::principal::Role;
use serde::Deserialize;
use utoipa::{IntoParams, OpenApi};

use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiPath as Path, ApiQuery as Query, Auth};
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(paths(get_receipt, erase_subject), components(schemas(ErrorBody)))]
pub struct DeletionApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/receipts/{id}", get(get_receipt))
        .route("/v1/subjects/{user}", delete(erase_subject))
}

/// A deletion receipt the caller asked for, or one of the tenant it governs.
#[utoipa::path(get, path = "/v1/receipts/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "receipt id")),
    responses((status = 200, description = "the deletion receipt", body = crate::bodies::Receipt), (status = 404, body = ErrorBody)))]
pub async fn get_receipt(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<Receipt>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.deletions.receipt(&p, &id)?)))
        .await
}

/// The receipt of an erasure, or with `dry_run` its plan.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ErasureAnswer {
    Receipt(Box<Receipt>),
    Plan(registry_services::erasure::ErasurePlan),
}
crate::bodies::wire_bodies! {
    answer ErasureAnswer;
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EraseParams {
    /// Why (kept in the receipt; the audit log keeps its hash): one line, at most 200 characters.
    #[param(pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$", max_length = 200)]
    pub reason: Option<String>,
    /// Answer the plan (what would be purged, what re-owned) and change nothing.
    pub dry_run: Option<bool>,
}

/// Erases a user of the caller's tenant (`DELETE /v1/subjects/{user}`): an admin, or the user
/// themself with the writer role. What is the subject's is purged, down to the bytes; shared
/// assets the subject owned are re-owned to the tenant and listed in the receipt. The erasure
/// reaches only the caller's projects and what it may read; other people's memories about the
/// subject are kept and listed to an admin (`about_subject_for_review` of the dry run).
#[utoipa::path(delete, path = "/v1/subjects/{user}", security(("bearer" = [])),
    params(("user" = String, Path, description = "the subject's user id"), EraseParams),
    responses((status = 200, description = "the deletion receipt, or the plan with dry_run", body = ErasureAnswer),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn erase_subject(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(user): Path<String>,
    Query(q): Query<EraseParams>,
) -> ApiResult<axum::Json<ErasureAnswer>> {
    let own = p.user == user && p.has_role(Role::Writer);
    if !(p.is_admin() || own) {
        return Err(ApiError::forbidden(
            "erasing a subject needs the admin role, or the subject themself with the writer role",
        ));
    }
    let reason = registry_core::deletion::check_reason(q.reason)?;
    state
        .blocking(move |s| {
            let plan = s.services.plan_erasure(&p, &user)?;
            if q.dry_run.unwrap_or(false) {
                return Ok(axum::Json(ErasureAnswer::Plan(plan)));
            }
            let receipt = s.services.erase(&p, plan, reason)?;
            Ok(axum::Json(ErasureAnswer::Receipt(Box::new(
                s.services.deletions.for_reader(&p, receipt)?,
            ))))
        })
        .await
}
