//! Deletion receipts and subject erasure. The deletion engine itself lives in
//! `registry_core::deletion`; this module binds it to the embedded backends and the API.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::routing::{delete, get};
use registry_core::asset::AssetId;
use registry_core::deletion::{DeletionEngine, DeletionLevel, Receipt, ReceiptStore, Regenerator};
use registry_core::principal::{Principal, Role};
use registry_core::store::{AssetQuery, AssetStore};
use serde::Deserialize;
use utoipa::{IntoParams, OpenApi};

use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::Auth;
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(paths(get_receipt, erase_subject), components(schemas(ErrorBody)))]
pub struct DeletionApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/receipts/{id}", get(get_receipt))
        .route("/v1/subjects/{user}", delete(erase_subject))
}

/// The deletion engine over this server's stores and indexes.
pub fn engine<'a>(
    state: &'a AppState,
    regenerator: Option<&'a dyn Regenerator>,
) -> DeletionEngine<'a> {
    DeletionEngine {
        store: state.store.as_ref(),
        receipts: state.store.as_ref(),
        text: state.text.as_ref(),
        vectors: state.vectors.as_ref(),
        blobs: state.blobs.as_ref(),
        regenerator,
    }
}

/// Deletes `roots` and everything derived from them, up to `level`; returns the receipt.
pub fn delete_assets(
    state: &AppState,
    p: &Principal,
    roots: &[AssetId],
    level: DeletionLevel,
    reason: &str,
) -> ApiResult<Receipt> {
    let regen = state.regenerator();
    let r = engine(state, regen).delete(Some(&p.tenant), &p.user, reason, roots, level)?;
    checkpoint_after(state, &r)?;
    Ok(r)
}

/// After a purge, the WAL still holds the pages the purge overwrote: checkpoint and truncate
/// it so the bytes are gone from every file of the store.
fn checkpoint_after(state: &AppState, r: &Receipt) -> ApiResult<()> {
    if r.level_reached == DeletionLevel::Purged {
        state.store.checkpoint()?;
    }
    Ok(())
}

/// Finishes every deletion that a crash interrupted. Idempotent.
pub fn resume_unfinished(state: &AppState) -> ApiResult<Vec<Receipt>> {
    let regen = state.regenerator();
    let eng = engine(state, regen);
    let mut done = vec![];
    for r in state.store.unfinished_receipts()? {
        let r = eng.advance(r)?;
        checkpoint_after(state, &r)?;
        done.push(r);
    }
    Ok(done)
}

/// A receipt of the caller's tenant.
#[utoipa::path(get, path = "/v1/receipts/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "receipt id")),
    responses((status = 200, description = "the deletion receipt", body = Object), (status = 404, body = ErrorBody)))]
pub async fn get_receipt(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<Receipt>> {
    state
        .blocking(move |s| match s.store.get_receipt(&id)? {
            Some(r) if r.tenant.as_deref() == Some(p.tenant.as_str()) => Ok(axum::Json(r)),
            _ => Err(ApiError::not_found(format!("no receipt {id}"))),
        })
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EraseParams {
    /// Why (recorded in the receipt and the audit log).
    pub reason: Option<String>,
}

/// Erases every asset of a user in the caller's tenant, and everything derived from them, to
/// the purged level (admin role, or the user themself).
#[utoipa::path(delete, path = "/v1/subjects/{user}", security(("bearer" = [])),
    params(("user" = String, Path, description = "the subject's user id"), EraseParams),
    responses((status = 200, description = "the deletion receipt", body = Object),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn erase_subject(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(user): Path<String>,
    Query(q): Query<EraseParams>,
) -> ApiResult<axum::Json<Receipt>> {
    if !(p.has_role(Role::Admin) || p.user == user) {
        return Err(ApiError::forbidden(
            "erasing another subject needs the admin role",
        ));
    }
    state
        .blocking(move |s| Ok(axum::Json(erase_subject_now(s, &p, &user, q.reason)?)))
        .await
}

/// Erases every asset `user` owns in `p`'s tenant, and everything derived from them, to the
/// purged level (the caller checks the right to). Blocking.
pub fn erase_subject_now(
    s: &AppState,
    p: &Principal,
    user: &str,
    reason: Option<String>,
) -> ApiResult<Receipt> {
    let ids: Vec<AssetId> = s
        .store
        .find(&AssetQuery {
            tenant: Some(p.tenant.clone()),
            owner: Some(user.to_string()),
            heads_only: true,
            ..Default::default()
        })?
        .into_iter()
        .map(|r| r.meta.id)
        .collect();
    // The subject's context manifests hold their queries: erased first, so that the purge's
    // checkpoint takes their pages out of the WAL too.
    let manifests = crate::context::erase_for(s, &p.tenant, user)?;
    if ids.is_empty() {
        if manifests > 0 {
            // Nothing for the engine to walk; take the manifests' pages out of the WAL here.
            s.store.checkpoint()?;
        }
        return Err(ApiError::not_found(format!("no assets of subject {user}"))
            .with_details(serde_json::json!({ "context_manifests_erased": manifests })));
    }
    let reason = reason.unwrap_or_else(|| format!("subject erasure of {user}"));
    delete_assets(s, p, &ids, DeletionLevel::Purged, &reason)
}
