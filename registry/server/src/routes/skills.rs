//! Skills: publish (`.skill` archive as `application/octet-stream`), the lifecycle steps, and
//! the three disclosure levels (discover, select, load). Service logic lives in
//! `registry_skills`.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use registry_core::ErrorCode;
use registry_core::principal::Principal;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiPath as Path, ApiQuery as Query, Auth};
use crate::state::AppState;
use registry_skills::{
    Decision, DeprecateRequest, Deprecation, DiscoverList, DiscoverView, DraftEvidence,
    DraftFromMemoryRequest, InstructionsView, LifecycleState, Loaded, ReviewRecord, ReviewRequest,
    RollbackRequest, ScanOverride, ScanOverrideRequest, SelectView, TestResult, TestResultsRequest,
    TestRun, VersionSummary, VersionView, YankRequest,
};

#[derive(OpenApi)]
#[openapi(
    paths(
        discover,
        publish,
        draft_from_memory,
        select,
        get_version,
        delete_version,
        record_tests,
        review,
        promote,
        scan_override,
        deprecate,
        yank,
        unyank,
        rollback,
        instructions,
        file,
        archive,
        by_digest,
        by_digest_instructions,
        by_digest_file,
        by_digest_archive
    ),
    components(schemas(
        DiscoverList,
        DiscoverView,
        VersionView,
        VersionSummary,
        SelectView,
        InstructionsView,
        TestResultsRequest,
        TestResult,
        TestRun,
        ReviewRequest,
        ReviewRecord,
        ScanOverride,
        ScanOverrideRequest,
        Decision,
        DeprecateRequest,
        Deprecation,
        YankRequest,
        RollbackRequest,
        LifecycleState,
        DraftFromMemoryRequest,
        DraftEvidence,
        DraftAnswer,
        ErrorBody
    ))
)]
pub struct SkillsApi;

pub fn router() -> Router<AppState> {
    let v = "/v1/skills/{name}/versions/{version}";
    Router::new()
        .route("/v1/skills", get(discover).post(publish))
        .route("/v1/skills/drafts/from-memory", post(draft_from_memory))
        .route("/v1/skills/by-digest/{digest}", get(by_digest))
        .route(
            "/v1/skills/by-digest/{digest}/instructions",
            get(by_digest_instructions),
        )
        .route(
            "/v1/skills/by-digest/{digest}/files/{*path}",
            get(by_digest_file),
        )
        .route(
            "/v1/skills/by-digest/{digest}/archive",
            get(by_digest_archive),
        )
        .route("/v1/skills/{name}", get(select))
        .route("/v1/skills/{name}/rollback", post(rollback))
        .route(v, get(get_version).delete(delete_version))
        .route(&format!("{v}/test-results"), post(record_tests))
        .route(&format!("{v}/review"), post(review))
        .route(&format!("{v}/promote"), post(promote))
        .route(&format!("{v}/scan-override"), post(scan_override))
        .route(&format!("{v}/deprecate"), post(deprecate))
        .route(&format!("{v}/yank"), post(yank))
        .route(&format!("{v}/unyank"), post(unyank))
        .route(&format!("{v}/instructions"), get(instructions))
        .route(&format!("{v}/files/{{*path}}"), get(file))
        .route(&format!("{v}/archive"), get(archive))
}

crate::bodies::wire_bodies! {
    answer use skills_sdk::ScanReport;
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DiscoverParams {
    /// Words to match against names, descriptions and applicability (BM25). Absent: all, by name.
    pub q: Option<String>,
    /// At most this many entries (default 20, at most 200).
    #[param(minimum = 0, maximum = 200)]
    pub limit: Option<u64>,
}

/// Discover: the current releases the caller may see (own tenant and global), about 100 tokens
/// each.
#[utoipa::path(get, path = "/v1/skills", security(("bearer" = [])), params(DiscoverParams),
    responses((status = 200, body = DiscoverList)))]
pub async fn discover(
    State(state): State<AppState>,
    Auth(p): Auth,
    Query(q): Query<DiscoverParams>,
) -> ApiResult<axum::Json<DiscoverList>> {
    let limit = crate::extract::bounded("limit", q.limit, 20, 200)?;
    state
        .blocking(move |s| {
            Ok(axum::Json(s.services.skills.discover_list(
                &p,
                q.q.as_deref(),
                Some(limit),
            )?))
        })
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PublishParams {
    /// Version for a plain Agent Skill that declares none (no `skill.toml`); must agree with a
    /// declared version.
    pub version: Option<String>,
}

pub(crate) fn body_bytes(b: Result<Bytes, BytesRejection>) -> ApiResult<Bytes> {
    b.map_err(|rej| {
        if rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(ErrorCode::PayloadTooLarge, "request body is too large")
        } else {
            ApiError::new(ErrorCode::BadRequest, rej.body_text())
        }
    })
}

/// Publish: upload a `.skill` archive (`Content-Type: application/octet-stream`). Creates a
/// draft (201), or answers 200 with the existing version when the same name, version and
/// digest were published before; other content under an existing version is 409.
#[utoipa::path(post, path = "/v1/skills", security(("bearer" = [])), params(PublishParams),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 201, body = VersionView), (status = 200, body = VersionView),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 415, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn publish(
    State(state): State<AppState>,
    Auth(p): Auth,
    Query(q): Query<PublishParams>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ct.starts_with("application/octet-stream") {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "expected Content-Type: application/octet-stream (a .skill archive)",
        ));
    }
    let bytes = body_bytes(body)?;
    state
        .blocking(move |s| {
            let out = s
                .services
                .skills
                .publish(&p, &bytes, q.version.as_deref())?;
            let status = if out.created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok((status, axum::Json(VersionView::of(&out.version))).into_response())
        })
        .await
}

/// A draft made from procedural memories, and the evidence it names.
#[derive(Debug, Serialize, ToSchema)]
pub struct DraftAnswer {
    pub draft: VersionView,
    /// Each memory the draft was made from, by id, version and content hash (its SKILL.md
    /// names the same).
    pub evidence: Vec<DraftEvidence>,
}

/// Draft from memory: reviewed procedural memories become a skill draft (a generated SKILL.md
/// with the procedure, when to use it and its evidence), published through the normal path
/// (validation and the scan) and citing each memory, so deleting one flags the draft. A memory
/// qualifies when it is procedural, confirmed by a reviewer or voted helpful by enough
/// principals, voted harmful by none, at most `internal`, for any purpose and not another
/// user's own; else 422 `MEMORY_NOT_ELIGIBLE` with `details.field` and `details.reason`. A
/// memory the caller may not read answers 404 like a missing one.
#[utoipa::path(post, path = "/v1/skills/drafts/from-memory", security(("bearer" = [])),
    request_body = DraftFromMemoryRequest,
    responses((status = 201, body = DraftAnswer), (status = 200, body = DraftAnswer),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn draft_from_memory(
    State(state): State<AppState>,
    Auth(p): Auth,
    ApiJson(req): ApiJson<DraftFromMemoryRequest>,
) -> ApiResult<Response> {
    state
        .blocking(move |s| {
            let out = s.services.draft_from_memory(&p, &req)?;
            let status = if out.created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            let answer = DraftAnswer {
                draft: VersionView::of(&out.draft),
                evidence: out.evidence,
            };
            Ok((status, axum::Json(answer)).into_response())
        })
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SelectParams {
    /// Tools the caller's harness offers, comma-separated.
    pub tools: Option<String>,
    /// Permissions the caller holds, comma-separated.
    pub permissions: Option<String>,
    /// Environment variables the caller can provide, comma-separated.
    pub environment: Option<String>,
    /// Show this version instead of the current release.
    pub version: Option<String>,
}

fn split_list(s: Option<&str>) -> Vec<String> {
    s.map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect()
    })
    .unwrap_or_default()
}

/// Select: the full manifest and the versions, checked against the caller's declared tools,
/// permissions and environment.
#[utoipa::path(get, path = "/v1/skills/{name}", security(("bearer" = [])),
    params(("name" = String, Path), SelectParams),
    responses((status = 200, body = SelectView), (status = 404, body = ErrorBody)))]
pub async fn select(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(name): Path<String>,
    Query(q): Query<SelectParams>,
) -> ApiResult<axum::Json<SelectView>> {
    state
        .blocking(move |s| {
            Ok(axum::Json(s.services.skills.select_view(
                &p,
                &name,
                q.version.as_deref(),
                &split_list(q.tools.as_deref()),
                &split_list(q.permissions.as_deref()),
                &split_list(q.environment.as_deref()),
            )?))
        })
        .await
}

#[derive(Debug, Deserialize)]
pub struct VersionPath {
    pub name: String,
    pub version: String,
}

#[utoipa::path(get, path = "/v1/skills/{name}/versions/{version}", security(("bearer" = [])),
    params(("name" = String, Path), ("version" = String, Path)),
    responses((status = 200, body = VersionView), (status = 404, body = ErrorBody)))]
pub async fn get_version(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
) -> ApiResult<axum::Json<VersionView>> {
    state
        .blocking(move |s| {
            Ok(axum::Json(VersionView::of(
                &s.services.skills.resolve(&p, &v.name, &v.version)?,
            )))
        })
        .await
}

async fn run_step<F>(state: AppState, p: Principal, f: F) -> ApiResult<axum::Json<VersionView>>
where
    F: FnOnce(&AppState, &Principal) -> registry_skills::Result<Loaded> + Send + 'static,
{
    state
        .blocking(move |s| Ok(axum::Json(VersionView::of(&f(s, &p)?))))
        .await
}

/// Test: records the results of the declared tests, run against `digest` (which must be the
/// version's own, else 409). All passed: the version moves to `tested`.
#[utoipa::path(post, path = "/v1/skills/{name}/versions/{version}/test-results",
    security(("bearer" = [])), params(("name" = String, Path), ("version" = String, Path)),
    request_body = TestResultsRequest,
    responses((status = 200, body = VersionView), (status = 409, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn record_tests(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
    ApiJson(req): ApiJson<TestResultsRequest>,
) -> ApiResult<axum::Json<VersionView>> {
    run_step(state, p, move |s, p| {
        s.services.skills.record_tests(p, &v.name, &v.version, req)
    })
    .await
}

/// Review: approve or reject, by a reviewer who is not the author (self-review: 403). Approving
/// a version whose scan failed answers 409 `SCAN_FAILED` until a platform override.
#[utoipa::path(post, path = "/v1/skills/{name}/versions/{version}/review",
    security(("bearer" = [])), params(("name" = String, Path), ("version" = String, Path)),
    request_body = ReviewRequest,
    responses((status = 200, body = VersionView), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub async fn review(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
    ApiJson(req): ApiJson<ReviewRequest>,
) -> ApiResult<axum::Json<VersionView>> {
    run_step(state, p, move |s, p| {
        s.services.skills.review(p, &v.name, &v.version, req)
    })
    .await
}

/// Publish a draft: only when its tests passed on its digest and it was approved; else 409
/// `INVALID_TRANSITION` with the state and the allowed transitions. A version whose scan
/// failed answers 409 `SCAN_FAILED` (findings in `details.findings`) until a platform override.
#[utoipa::path(post, path = "/v1/skills/{name}/versions/{version}/promote",
    security(("bearer" = [])), params(("name" = String, Path), ("version" = String, Path)),
    responses((status = 200, body = VersionView), (status = 409, body = ErrorBody)))]
pub async fn promote(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
) -> ApiResult<axum::Json<VersionView>> {
    run_step(state, p, move |s, p| {
        s.services.skills.promote(p, &v.name, &v.version)
    })
    .await
}

/// Overrides a failing supply-chain scan so the version can be approved and promoted: platform
/// principals only (403 otherwise), with a reason; 409 `CONFLICT` when the scan did not fail.
/// Audited as `skill.scan_override` (ids and the digest; the reason stays in the version).
#[utoipa::path(post, path = "/v1/skills/{name}/versions/{version}/scan-override",
    security(("bearer" = [])), params(("name" = String, Path), ("version" = String, Path)),
    request_body = ScanOverrideRequest,
    responses((status = 200, body = VersionView), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn scan_override(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
    ApiJson(req): ApiJson<ScanOverrideRequest>,
) -> ApiResult<axum::Json<VersionView>> {
    run_step(state, p, move |s, p| {
        s.services.skills.scan_override(p, &v.name, &v.version, req)
    })
    .await
}

#[utoipa::path(post, path = "/v1/skills/{name}/versions/{version}/deprecate",
    security(("bearer" = [])), params(("name" = String, Path), ("version" = String, Path)),
    request_body = DeprecateRequest,
    responses((status = 200, body = VersionView), (status = 409, body = ErrorBody)))]
pub async fn deprecate(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
    ApiJson(req): ApiJson<DeprecateRequest>,
) -> ApiResult<axum::Json<VersionView>> {
    run_step(state, p, move |s, p| {
        s.services.skills.deprecate(p, &v.name, &v.version, req)
    })
    .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeleteVersionParams {
    /// Why (required for an admin deleting a released version; kept in the receipt and audit):
    /// one line, at most 200 characters.
    #[param(pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$", max_length = 200)]
    pub reason: Option<String>,
}

/// Deletes a draft or yanked version (or, for an admin with a reason, a released version that
/// is not the current release) down to the purged level, with its receipt.
#[utoipa::path(delete, path = "/v1/skills/{name}/versions/{version}",
    security(("bearer" = [])),
    params(("name" = String, Path), ("version" = String, Path), DeleteVersionParams),
    responses((status = 200, description = "the deletion receipt", body = crate::bodies::Receipt),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub async fn delete_version(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
    Query(q): Query<DeleteVersionParams>,
) -> ApiResult<axum::Json<registry_core::deletion::Receipt>> {
    state
        .blocking(move |s| {
            let receipt = s
                .services
                .skills
                .delete_version(&p, &v.name, &v.version, q.reason)?;
            Ok(axum::Json(s.services.deletions.for_reader(&p, receipt)?))
        })
        .await
}

/// Yank: excluded from new resolution, still installable from a lockfile.
#[utoipa::path(post, path = "/v1/skills/{name}/versions/{version}/yank",
    security(("bearer" = [])), params(("name" = String, Path), ("version" = String, Path)),
    request_body = YankRequest,
    responses((status = 200, body = VersionView), (status = 409, body = ErrorBody)))]
pub async fn yank(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<axum::Json<VersionView>> {
    let body = body_bytes(body)?;
    let req: YankRequest = if body.iter().all(u8::is_ascii_whitespace) {
        YankRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::validation(e.to_string()))?
    };
    run_step(state, p, move |s, p| {
        s.services.skills.yank(p, &v.name, &v.version, req)
    })
    .await
}

#[utoipa::path(post, path = "/v1/skills/{name}/versions/{version}/unyank",
    security(("bearer" = [])), params(("name" = String, Path), ("version" = String, Path)),
    responses((status = 200, body = VersionView), (status = 409, body = ErrorBody)))]
pub async fn unyank(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
) -> ApiResult<axum::Json<VersionView>> {
    run_step(state, p, move |s, p| {
        s.services.skills.unyank(p, &v.name, &v.version)
    })
    .await
}

/// Rollback: point the current release of `name` back to an earlier released version.
#[utoipa::path(post, path = "/v1/skills/{name}/rollback", security(("bearer" = [])),
    params(("name" = String, Path)), request_body = RollbackRequest,
    responses((status = 200, body = VersionView), (status = 409, body = ErrorBody)))]
pub async fn rollback(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(name): Path<String>,
    ApiJson(req): ApiJson<RollbackRequest>,
) -> ApiResult<axum::Json<VersionView>> {
    run_step(state, p, move |s, p| {
        s.services.skills.rollback(p, &name, req)
    })
    .await
}

fn instructions_of(s: &AppState, l: &Loaded) -> ApiResult<axum::Json<InstructionsView>> {
    Ok(axum::Json(s.services.skills.instructions_view(l)?))
}

fn with_headers(l: &Loaded, mut resp: Response) -> Response {
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&l.body.digest) {
        h.insert("x-skill-digest", v);
    }
    if let Ok(v) = HeaderValue::from_str(&l.body.version) {
        h.insert("x-skill-version", v);
    }
    h.insert(
        "x-skill-state",
        HeaderValue::from_static(l.body.state.as_str()),
    );
    resp
}

fn file_of(s: &AppState, l: &Loaded, path: &str) -> ApiResult<Response> {
    let f = s.services.skills.file(l, path)?;
    let mut resp = (
        [(header::CONTENT_TYPE, "application/octet-stream")],
        f.contents,
    )
        .into_response();
    if f.executable {
        resp.headers_mut()
            .insert("x-skill-executable", HeaderValue::from_static("true"));
    }
    Ok(with_headers(l, resp))
}

fn archive_of(s: &AppState, l: &Loaded) -> ApiResult<Response> {
    let bytes = s.services.skills.archive_bytes(l)?;
    let resp = ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response();
    Ok(with_headers(l, resp))
}

/// Load: the instructions (`SKILL.md` body) of a version.
#[utoipa::path(get, path = "/v1/skills/{name}/versions/{version}/instructions",
    security(("bearer" = [])), params(("name" = String, Path), ("version" = String, Path)),
    responses((status = 200, body = InstructionsView), (status = 404, body = ErrorBody)))]
pub async fn instructions(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
) -> ApiResult<axum::Json<InstructionsView>> {
    state
        .blocking(move |s| instructions_of(s, &s.services.skills.resolve(&p, &v.name, &v.version)?))
        .await
}

#[derive(Debug, Deserialize)]
pub struct FilePath {
    pub name: String,
    pub version: String,
    pub path: String,
}

/// Load: one file of a version, on demand (raw bytes).
#[utoipa::path(get, path = "/v1/skills/{name}/versions/{version}/files/{path}",
    security(("bearer" = [])),
    params(("name" = String, Path), ("version" = String, Path), ("path" = String, Path)),
    responses((status = 200, content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, body = ErrorBody)))]
pub async fn file(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<FilePath>,
) -> ApiResult<Response> {
    state
        .blocking(move |s| {
            file_of(
                s,
                &s.services.skills.resolve(&p, &v.name, &v.version)?,
                &v.path,
            )
        })
        .await
}

/// The `.skill` archive of a version, for install. Yanked versions still answer
/// (`x-skill-state: yanked`).
#[utoipa::path(get, path = "/v1/skills/{name}/versions/{version}/archive",
    security(("bearer" = [])), params(("name" = String, Path), ("version" = String, Path)),
    responses((status = 200, content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, body = ErrorBody)))]
pub async fn archive(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
) -> ApiResult<Response> {
    state
        .blocking(move |s| archive_of(s, &s.services.skills.resolve(&p, &v.name, &v.version)?))
        .await
}

#[derive(Debug, Deserialize)]
pub struct DigestFilePath {
    pub digest: String,
    pub path: String,
}

/// A version by its tree digest (`sha256:<hex>`).
#[utoipa::path(get, path = "/v1/skills/by-digest/{digest}", security(("bearer" = [])),
    params(("digest" = String, Path, pattern = "^(sha256:)?[0-9a-fA-F]{64}$", description = "The tree digest, `sha256:<64 hex>` (the prefix may be left out)")),
    responses((status = 200, body = VersionView), (status = 404, body = ErrorBody)))]
pub async fn by_digest(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(digest): Path<String>,
) -> ApiResult<axum::Json<VersionView>> {
    state
        .blocking(move |s| {
            Ok(axum::Json(VersionView::of(
                &s.services.skills.resolve_digest(&p, &digest)?,
            )))
        })
        .await
}

#[utoipa::path(get, path = "/v1/skills/by-digest/{digest}/instructions",
    security(("bearer" = [])), params(("digest" = String, Path, pattern = "^(sha256:)?[0-9a-fA-F]{64}$", description = "The tree digest, `sha256:<64 hex>` (the prefix may be left out)")),
    responses((status = 200, body = InstructionsView), (status = 404, body = ErrorBody)))]
pub async fn by_digest_instructions(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(digest): Path<String>,
) -> ApiResult<axum::Json<InstructionsView>> {
    state
        .blocking(move |s| instructions_of(s, &s.services.skills.resolve_digest(&p, &digest)?))
        .await
}

#[utoipa::path(get, path = "/v1/skills/by-digest/{digest}/files/{path}",
    security(("bearer" = [])), params(("digest" = String, Path, pattern = "^(sha256:)?[0-9a-fA-F]{64}$", description = "The tree digest, `sha256:<64 hex>` (the prefix may be left out)"), ("path" = String, Path)),
    responses((status = 200, content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, body = ErrorBody)))]
pub async fn by_digest_file(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<DigestFilePath>,
) -> ApiResult<Response> {
    state
        .blocking(move |s| {
            file_of(
                s,
                &s.services.skills.resolve_digest(&p, &v.digest)?,
                &v.path,
            )
        })
        .await
}

#[utoipa::path(get, path = "/v1/skills/by-digest/{digest}/archive",
    security(("bearer" = [])), params(("digest" = String, Path, pattern = "^(sha256:)?[0-9a-fA-F]{64}$", description = "The tree digest, `sha256:<64 hex>` (the prefix may be left out)")),
    responses((status = 200, content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, body = ErrorBody)))]
pub async fn by_digest_archive(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(digest): Path<String>,
) -> ApiResult<Response> {
    state
        .blocking(move |s| archive_of(s, &s.services.skills.resolve_digest(&p, &digest)?))
        .await
}
