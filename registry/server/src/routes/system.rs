//! Health, identity, generic asset reads and the audit log.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use registry_core::access;
use registry_core::asset::{AssetKind, AssetMeta, AssetRecord};
use registry_core::principal::Principal;
use registry_core::{FieldError, FieldReason};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiPath as Path, ApiQuery as Query, Auth};
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(
    paths(
        healthz,
        whoami,
        get_asset,
        asset_impact,
        list_assets,
        list_audit,
        verify_audit
    ),
    components(schemas(
        Health,
        ImpactAnswer,
        WhoAmI,
        AssetView,
        AssetList,
        AuditList,
        AuditVerify,
        ErrorBody
    ))
)]
pub struct SystemApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/v1/whoami", get(whoami))
        .route("/v1/assets", get(list_assets))
        .route("/v1/assets/{id}", get(get_asset))
        .route("/v1/assets/{id}/impact", get(asset_impact))
        .route("/v1/audit", get(list_audit))
        .route("/v1/audit/verify", get(verify_audit))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    pub status: String,
    pub schema_version: i64,
}

/// Liveness and readiness: answers once the store is open.
#[utoipa::path(get, path = "/healthz", responses((status = 200, body = Health)))]
pub async fn healthz(State(state): State<AppState>) -> ApiResult<axum::Json<Health>> {
    let v = state
        .blocking(|s| s.services.schema_version().map_err(ApiError::from))
        .await?;
    Ok(axum::Json(Health {
        status: "ok".into(),
        schema_version: v,
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WhoAmI {
    pub tenant: String,
    pub user: String,
    pub groups: Vec<String>,
    pub roles: Vec<String>,
    /// A platform principal (governs the global scope).
    pub platform: bool,
    /// Projects of the tenant the key belongs to (`*`: all).
    pub projects: Vec<String>,
    /// Most sensitive data the key reads.
    pub clearance: String,
    pub purpose: Option<String>,
    /// Scope keys this principal can see, from global down.
    pub visible_scopes: Vec<String>,
}

/// The principal behind the key.
#[utoipa::path(get, path = "/v1/whoami", security(("bearer" = [])),
    responses((status = 200, body = WhoAmI), (status = 401, body = ErrorBody)))]
pub async fn whoami(Auth(p): Auth) -> axum::Json<WhoAmI> {
    axum::Json(WhoAmI {
        visible_scopes: p.visible_scope_keys(),
        roles: p.roles.iter().map(|r| r.as_str().to_string()).collect(),
        platform: p.platform,
        projects: p.projects.clone(),
        clearance: p.clearance.as_str().to_string(),
        purpose: p.purpose.clone(),
        tenant: p.tenant,
        user: p.user,
        groups: p.groups,
    })
}

/// Governance metadata of an asset (never its body).
#[derive(Debug, Serialize, ToSchema)]
pub struct AssetView {
    #[schema(schema_with = asset_meta)]
    pub meta: AssetMeta,
    pub lookup_key: Option<String>,
}

impl AssetView {
    /// The view `p` may have of `r`: a memory it sees without content (a governor's view of a
    /// revoked record) keeps its lookup key back, which names the fact's subject.
    fn of(p: &Principal, r: &AssetRecord) -> Self {
        let full = access::sight(p, &r.meta) == access::Sight::Full;
        AssetView {
            meta: r.meta.clone(),
            lookup_key: r.lookup_key.clone().filter(|_| full),
        }
    }
}

/// Reads an asset the principal may see ([`access::Action::See`]: a memory held for review or
/// revoked only by those who judge or govern it). Another tenant's asset answers exactly like
/// an id that does not exist, so existence never leaks.
#[utoipa::path(get, path = "/v1/assets/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "asset id")),
    responses((status = 200, body = AssetView), (status = 404, body = ErrorBody)))]
pub async fn get_asset(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<AssetView>> {
    state
        .blocking(move |s| {
            Ok(axum::Json(AssetView::of(
                &p,
                &s.services.visible_asset(&p, &id)?,
            )))
        })
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Asset kind: memory, document, chunk, skill_version, summary.
    #[param(pattern = "^(memory|document|chunk|skill_version|summary)$")]
    pub kind: Option<String>,
    /// At most this many (default 100, at most 1000).
    #[param(minimum = 0, maximum = 1000)]
    pub limit: Option<u64>,
    /// The id of the last asset of the previous page.
    pub after: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AssetList {
    pub assets: Vec<AssetView>,
    /// Pass as `after` for the next page; absent on the last one.
    pub next: Option<String>,
}

/// Lists current versions the principal may see (scope filter in the query, ACL after).
#[utoipa::path(get, path = "/v1/assets", security(("bearer" = [])), params(ListParams),
    responses((status = 200, body = AssetList),
        (status = 404, description = "`after` names no asset the caller can see", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn list_assets(
    State(state): State<AppState>,
    Auth(p): Auth,
    Query(q): Query<ListParams>,
) -> ApiResult<axum::Json<AssetList>> {
    let kind = match q.kind.as_deref() {
        None => None,
        Some(k) => Some(AssetKind::parse(k).ok_or_else(|| {
            ApiError::validation(format!("unknown kind {k:?}"))
                .with_details(FieldError::new("kind"))
        })?),
    };
    let limit = crate::extract::bounded("limit", q.limit, 100, 1000)?;
    state
        .blocking(move |s| {
            let (page, next) = s
                .services
                .list_assets(&p, kind, q.after.as_deref(), limit)?;
            let assets = page.iter().map(|r| AssetView::of(&p, r)).collect();
            Ok(axum::Json(AssetList { assets, next }))
        })
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AuditParams {
    /// Events after this sequence number (0 ..= 2^63 - 1).
    pub after: Option<u64>,
    /// At most this many (default 100, at most 1000).
    #[param(minimum = 0, maximum = 1000)]
    pub limit: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditList {
    #[schema(schema_with = audit_events)]
    pub events: Vec<registry_core::audit::AuditEvent>,
    /// Pass as `after` for the next page; `null` once the end of the log was read. A page
    /// examines at most 20,000 events of the log (every tenant's), so a short or empty page
    /// with a `next` is not the end.
    pub next: Option<u64>,
}

fn asset_meta() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    crate::bodies::schema_ref::<registry_core::asset::AssetMeta>()
}

fn audit_events() -> utoipa::openapi::schema::Array {
    crate::bodies::array_of_schema::<registry_core::audit::AuditEvent>()
}

/// Audit events the caller may read, oldest first (admin role; the visibility rule is the
/// services' `audit_events`, which the console's audit page calls too): a tenant's admins see
/// their tenant's events and the global scope's, within their projects; a platform admin sees
/// every event.
#[utoipa::path(get, path = "/v1/audit", security(("bearer" = [])), params(AuditParams),
    responses((status = 200, body = AuditList), (status = 403, body = ErrorBody)))]
pub async fn list_audit(
    State(state): State<AppState>,
    Auth(p): Auth,
    Query(q): Query<AuditParams>,
) -> ApiResult<axum::Json<AuditList>> {
    let limit = crate::extract::bounded("limit", q.limit, 100, 1000)?;
    let after = q.after.unwrap_or(0);
    if after > i64::MAX as u64 {
        return Err(
            ApiError::validation("after is beyond the largest sequence number")
                .with_details(FieldError::new("after").reason(FieldReason::OutOfRange)),
        );
    }
    state
        .blocking(move |s| {
            let page = s.services.audit_events(&p, after, limit)?;
            Ok(axum::Json(AuditList {
                events: page.events,
                next: page.next,
            }))
        })
        .await
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditVerify {
    pub ok: bool,
    /// Events verified: the caller's tenant's and the global scope's (a platform admin: all).
    pub events: u64,
    /// The first broken event, if any (a tenant admin: only when it is one of its own).
    pub broken_at: Option<u64>,
    pub reason: Option<String>,
    /// Signed checkpoints checked, the one kept outside the database included.
    pub checkpoints: u64,
}

impl From<registry_core::audit::Verification> for AuditVerify {
    fn from(v: registry_core::audit::Verification) -> Self {
        AuditVerify {
            ok: v.ok,
            events: v.events,
            broken_at: v.broken_at,
            reason: v.reason,
            checkpoints: v.checkpoints,
        }
    }
}

/// Walks the whole keyed hash chain and its signed checkpoints (admin role).
#[utoipa::path(get, path = "/v1/audit/verify", security(("bearer" = [])),
    responses((status = 200, body = AuditVerify), (status = 403, body = ErrorBody)))]
pub async fn verify_audit(
    State(state): State<AppState>,
    Auth(p): Auth,
) -> ApiResult<axum::Json<AuditVerify>> {
    state
        .blocking(move |s| {
            let v = s.services.verify_audit(&p)?;
            Ok(axum::Json(AuditVerify::from(v)))
        })
        .await
}

crate::bodies::wire_bodies! {
    answer use registry_core::asset::AssetMeta;
    answer use registry_core::audit::AuditEvent;
    /// What a change to an asset reaches.
    answer ImpactAnswer = registry_services::Impact;
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ImpactParams {
    /// Most manifests listed, newest first (default 20, at most 100); `manifests.total`
    /// counts them all.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u64>,
}

/// The impact of changing an asset: the caller's stored context manifests that included it
/// (any of the tenant's for an admin), the skills and evaluation cases that cite it, the assets
/// derived from it, and the runs that loaded it. Ids, versions and hashes only. An asset the
/// caller may not see (another tenant's) answers 404 like a missing one, and a linked asset it
/// may not see is left out.
#[utoipa::path(get, path = "/v1/assets/{id}/impact", security(("bearer" = [])),
    params(("id" = String, Path, description = "asset id"), ImpactParams),
    responses((status = 200, body = ImpactAnswer), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn asset_impact(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    Query(q): Query<ImpactParams>,
) -> ApiResult<axum::Json<registry_services::Impact>> {
    let limit = crate::extract::positive(
        "limit",
        q.limit,
        registry_services::impact::DEFAULT_IMPACT_MANIFESTS,
        registry_services::impact::MAX_IMPACT_MANIFESTS,
    )?;
    state
        .blocking(move |s| Ok(axum::Json(s.services.impact(&p, &id, Some(limit))?)))
        .await
}
