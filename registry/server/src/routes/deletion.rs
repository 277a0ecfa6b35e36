//! Deletion receipts and subject erasure. The deletion engine itself lives in
//! `registry_core::deletion`; this module binds it to the embedded backends and the API.

use axum::Router;
use axum::extract::State;
use axum::routing::{delete, get};
use registry_core::asset::AssetId;
use registry_core::deletion::{DeletionEngine, DeletionLevel, Receipt, ReceiptStore, Regenerator};
use registry_core::principal::{Principal, Role};
use registry_core::store::{AssetQuery, AssetStore};
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
    // The tenant the deletion belongs to is the roots' (the global scope's: none), so that its
    // receipt and events sit in the audit of whoever governs them.
    let tenant = match roots.first() {
        Some(id) => state
            .store
            .get(id)?
            .map_or(Some(p.tenant.clone()), |r| r.meta.scope.tenant),
        None => Some(p.tenant.clone()),
    };
    let r = engine(state, regen).delete(tenant.as_deref(), &p.user, reason, roots, level)?;
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

/// Whether `p` may read receipt `r`: whoever asked for the deletion, or whoever governs the
/// tenant (or, for the global scope, the platform). Any other receipt answers 404.
fn may_read_receipt(p: &Principal, r: &Receipt) -> bool {
    match r.tenant.as_deref() {
        None => p.platform,
        Some(t) => t == p.tenant && (r.actor == p.user || p.is_admin()),
    }
}

/// A deletion receipt the caller asked for, or one of the tenant it governs.
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
            Some(r) if may_read_receipt(&p, &r) => Ok(axum::Json(r)),
            _ => Err(ApiError::not_found(format!("no receipt {id}"))),
        })
        .await
}

/// Longest `reason` a deletion request gives (kept in the receipt; the audit log keeps its
/// hash only).
pub const MAX_REASON_CHARS: usize = 200;

/// Checks a caller-given reason: short, one line.
pub fn checked_reason(reason: Option<String>) -> ApiResult<Option<String>> {
    match reason {
        Some(r) if r.chars().count() > MAX_REASON_CHARS || r.chars().any(char::is_control) => {
            Err(ApiError::validation(format!(
                "reason must be at most {MAX_REASON_CHARS} characters on one line"
            ))
            .with_details(serde_json::json!({"field": "reason", "reason": "invalid"})))
        }
        other => Ok(other),
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EraseParams {
    /// Why (kept in the receipt; the audit log keeps its hash).
    pub reason: Option<String>,
    /// Answer the plan (what would be purged, what re-owned) and change nothing.
    pub dry_run: Option<bool>,
}

/// What erasing a subject does.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ErasurePlan {
    pub subject: String,
    /// Purged with everything derived from them: every asset in the subject's user, session
    /// and task scopes, and every memory about the subject anywhere in the tenant.
    pub purge: Vec<AssetId>,
    /// Shared assets the subject owned or authored (tenant and project documents, skills,
    /// team memories): kept, and re-owned to the tenant.
    pub reown: Vec<AssetId>,
    /// Context manifests of the subject's requests (they hold query hashes), erased.
    pub context_manifests: usize,
}

/// Erases a user of the caller's tenant (`DELETE /v1/subjects/{user}`): an admin, or the user
/// themself with the writer role. What is the subject's is purged, down to the bytes; shared
/// assets the subject owned are re-owned to the tenant and listed in the receipt.
#[utoipa::path(delete, path = "/v1/subjects/{user}", security(("bearer" = [])),
    params(("user" = String, Path, description = "the subject's user id"), EraseParams),
    responses((status = 200, description = "the deletion receipt, or the plan with dry_run", body = Object),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn erase_subject(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(user): Path<String>,
    Query(q): Query<EraseParams>,
) -> ApiResult<axum::Json<serde_json::Value>> {
    let own = p.user == user && p.has_role(Role::Writer);
    if !(p.is_admin() || own) {
        return Err(ApiError::forbidden(
            "erasing a subject needs the admin role, or the subject themself with the writer role",
        ));
    }
    let reason = checked_reason(q.reason)?;
    state
        .blocking(move |s| {
            let plan = plan_erasure(s, &p.tenant, &user)?;
            if q.dry_run.unwrap_or(false) {
                return serde_json::to_value(&plan)
                    .map(axum::Json)
                    .map_err(ApiError::internal);
            }
            let r = erase_subject_now(s, &p, plan, reason)?;
            serde_json::to_value(&r)
                .map(axum::Json)
                .map_err(ApiError::internal)
        })
        .await
}

/// Owner of assets the tenant keeps after their owner was erased.
pub fn tenant_owner(tenant: &str) -> String {
    format!("tenant:{tenant}")
}

/// What erasing `user` in `tenant` would purge and re-own. Reads the tenant's heads page by
/// page.
pub fn plan_erasure(s: &AppState, tenant: &str, user: &str) -> ApiResult<ErasurePlan> {
    use registry_core::asset::AssetKind;
    let subject = user.trim().to_lowercase();
    let mut purge = vec![];
    let mut reown = vec![];
    let mut cursor = None;
    loop {
        let page = s.store.find(&AssetQuery {
            tenant: Some(tenant.to_string()),
            heads_only: true,
            after: cursor.clone(),
            limit: Some(1000),
            ..Default::default()
        })?;
        let Some(last) = page.last() else { break };
        cursor = Some((
            last.meta.created_at,
            last.meta.id.clone(),
            last.meta.version,
        ));
        for r in page {
            let in_user_scope = r.meta.scope.user.as_deref() == Some(user);
            let about_subject = r.meta.kind == AssetKind::Memory
                && r.body
                    .get("subject")
                    .and_then(|v| v.as_str())
                    .is_some_and(|x| x.trim().to_lowercase() == subject);
            if in_user_scope || about_subject {
                purge.push(r.meta.id);
            } else if r.meta.owner == user && r.meta.kind != AssetKind::Chunk {
                // Chunks follow their document: re-owning it re-owns them.
                reown.push(r.meta.id);
            }
        }
    }
    let context_manifests = crate::context::count_for(s, tenant, user)?;
    Ok(ErasurePlan {
        subject: user.to_string(),
        purge,
        reown,
        context_manifests,
    })
}

/// Carries out an erasure plan (the caller checked the right to). Blocking.
pub fn erase_subject_now(
    s: &AppState,
    p: &Principal,
    plan: ErasurePlan,
    reason: Option<String>,
) -> ApiResult<Receipt> {
    // The subject's context manifests hold their queries' hashes: erased first, so that the
    // purge's checkpoint takes their pages out of the WAL too.
    let manifests = crate::context::erase_for(s, &p.tenant, &plan.subject)?;
    let reowned = reown(s, p, &plan)?;
    if plan.purge.is_empty() {
        if manifests > 0 || !reowned.is_empty() {
            s.store.checkpoint()?;
        }
        return Err(
            ApiError::not_found(format!("no assets of subject {}", plan.subject)).with_details(
                serde_json::json!({ "context_manifests_erased": manifests, "reowned": reowned }),
            ),
        );
    }
    let reason = reason.unwrap_or_else(|| "subject erasure".to_string());
    let mut r = delete_assets(s, p, &plan.purge, DeletionLevel::Purged, &reason)?;
    r.reowned = reowned;
    s.store.put_receipt(&r)?;
    Ok(r)
}

/// Gives the tenant what the subject owned but others share: each asset's next version names
/// the tenant as owner (chunks of a document with it), with an audit event.
fn reown(s: &AppState, p: &Principal, plan: &ErasurePlan) -> ApiResult<Vec<AssetId>> {
    use registry_core::asset::AssetKind;
    use registry_core::audit::AuditDraft;
    use registry_core::store::WriteOp;
    let owner = tenant_owner(&p.tenant);
    let mut done = vec![];
    for id in &plan.reown {
        let Some(head) = s.store.get(id)? else {
            continue;
        };
        let mut ids = vec![head];
        if ids[0].meta.kind == AssetKind::Document {
            let chunks: Vec<String> = s
                .store
                .edges_from(id)?
                .into_iter()
                .filter(|e| e.relation == registry_core::Relation::ChunkOf)
                .map(|e| e.child)
                .collect();
            if !chunks.is_empty() {
                ids.extend(s.store.find(&AssetQuery {
                    ids: Some(chunks),
                    heads_only: true,
                    ..Default::default()
                })?);
            }
        }
        let mut ops = vec![];
        for mut rec in ids {
            let before = rec.meta.content_hash.clone();
            rec.meta.version += 1;
            rec.meta.owner = owner.clone();
            rec.meta.updated_at = chrono::Utc::now();
            ops.push(WriteOp::Audit(
                AuditDraft::new(&p.user, "asset.reown")
                    .in_scope(&rec.meta.scope)
                    .asset(&rec.meta.id)
                    .hashes(Some(before.clone()), Some(before))
                    .reason("owner erased; re-owned to the tenant"),
            ));
            ops.push(WriteOp::PutVersion(Box::new(rec)));
        }
        s.store.commit(ops)?;
        done.push(id.clone());
    }
    Ok(done)
}
