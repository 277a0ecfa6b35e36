//! The evidence around a skill version: a reviewer's test waiver, the stored test logs, and
//! the runs harnesses report after Publish with their figures. Service logic lives in
//! `registry_skills::{proof, runs}`.

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use utoipa::OpenApi;

use crate::error::{ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiPath as Path, Auth};
use crate::routes::skills::VersionPath;
use crate::state::AppState;
use registry_skills::{
    ObserveFlag, RunComparison, RunOutcome, RunReport, RunStats, RunSummary, RunView, TestWaiver,
    TestWaiverRequest, VersionView,
};
use serde::Deserialize;

#[derive(OpenApi)]
#[openapi(
    paths(test_waiver, test_log, report_run, run_summary),
    components(schemas(
        TestWaiver,
        TestWaiverRequest,
        RunReport,
        RunOutcome,
        RunView,
        RunStats,
        RunComparison,
        RunSummary,
        ObserveFlag
    ))
)]
pub struct SkillProofApi;

pub fn router() -> Router<AppState> {
    let v = "/v1/skills/{name}/versions/{version}";
    Router::new()
        .route(&format!("{v}/test-waiver"), post(test_waiver))
        .route(&format!("{v}/test-logs/{{digest}}"), get(test_log))
        .route(&format!("{v}/runs"), post(report_run))
        .route(&format!("{v}/runs/summary"), get(run_summary))
}

/// Waives Test for a version that declares no test: a reviewer of its scope who is not its
/// author, with a reason (at most 1,000 characters). Audited as `skill.test_waiver`; the
/// version moves to `tested`. A version that declares tests: 409.
#[utoipa::path(post, path = "/v1/skills/{name}/versions/{version}/test-waiver",
    security(("bearer" = [])), params(("name" = String, Path), ("version" = String, Path)),
    request_body = TestWaiverRequest,
    responses((status = 200, body = VersionView), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn test_waiver(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
    ApiJson(req): ApiJson<TestWaiverRequest>,
) -> ApiResult<axum::Json<VersionView>> {
    state
        .blocking(move |s| {
            let l = s
                .services
                .skills
                .record_waiver(&p, &v.name, &v.version, req)?;
            Ok(axum::Json(VersionView::of(&l)))
        })
        .await
}

#[derive(Debug, Deserialize)]
pub struct LogPath {
    pub name: String,
    pub version: String,
    pub digest: String,
}

/// One uploaded test log of a version (`text/plain`), by its `sha256:<hex>` digest: to the
/// version's author and its scope's reviewers, testers and admins (403 to others of the tenant;
/// another tenant: 404 like a missing version).
#[utoipa::path(get, path = "/v1/skills/{name}/versions/{version}/test-logs/{digest}",
    security(("bearer" = [])),
    params(("name" = String, Path), ("version" = String, Path),
        ("digest" = String, Path, pattern = "^(sha256:)?[0-9a-fA-F]{64}$")),
    responses((status = 200, content_type = "text/plain", body = String),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn test_log(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<LogPath>,
) -> ApiResult<Response> {
    state
        .blocking(move |s| {
            let bytes = s
                .services
                .skills
                .test_log(&p, &v.name, &v.version, &v.digest)?;
            Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], bytes).into_response())
        })
        .await
}

/// Reports one run of a version, by a principal who may load it: idempotent by `run_id` (the
/// same body answers the same; another body under that `run_id` is 409 `CONFLICT`,
/// `details.reason = run_id_reused`); a digest the version does not have is 409
/// (`details.reason = digest_mismatch`). The note is kept as its sha256 only. A released
/// version whose runs fail credibly worse than its predecessor's, or above
/// `skills.max_failure_rate`, is flagged for review once (`observe_flag`).
#[utoipa::path(post, path = "/v1/skills/{name}/versions/{version}/runs",
    security(("bearer" = [])), params(("name" = String, Path), ("version" = String, Path)),
    request_body = RunReport,
    responses((status = 200, body = RunView), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn report_run(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
    ApiJson(req): ApiJson<RunReport>,
) -> ApiResult<axum::Json<RunView>> {
    state
        .blocking(move |s| {
            Ok(axum::Json(
                s.services.skills.report_run(&p, &v.name, &v.version, req)?,
            ))
        })
        .await
}

/// A version's observed figures (the runs the caller may see): runs, success rate with its
/// Wilson 95% interval, duration p50/p95, last use, the comparison with the release it
/// replaced, and its review flag.
#[utoipa::path(get, path = "/v1/skills/{name}/versions/{version}/runs/summary",
    security(("bearer" = [])), params(("name" = String, Path), ("version" = String, Path)),
    responses((status = 200, body = RunSummary), (status = 404, body = ErrorBody)))]
pub async fn run_summary(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(v): Path<VersionPath>,
) -> ApiResult<axum::Json<RunSummary>> {
    state
        .blocking(move |s| {
            Ok(axum::Json(
                s.services.skills.run_summary(&p, &v.name, &v.version)?,
            ))
        })
        .await
}
