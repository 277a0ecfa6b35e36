//! The working layer: tasks, their event log, artifacts read by range, summaries, checkpoints
//! and the Continuation Package. Every handler calls `registry_tasks::TaskService`.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde::Deserialize;
use utoipa::{IntoParams, OpenApi};

use registry_core::deletion::Receipt;
use registry_core::task::TaskMark;
use registry_tasks::{
    AppendEvents, AppendOutcome, ArtifactList, ArtifactView, CheckpointRequest, Continuation,
    ContinuationRequest, CreateTask, EventPage, MarkList, RangeRequest, SummaryRequest, TaskList,
    TaskView, UpdateTask,
};

use crate::error::{ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiPath as Path, ApiQuery as Query, Auth};
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(
    paths(
        create_task,
        list_tasks,
        get_task,
        update_task,
        delete_task,
        append_events,
        list_events,
        put_artifact,
        list_artifacts,
        read_artifact,
        get_artifact_meta,
        add_summary,
        add_checkpoint,
        list_marks,
        continuation
    ),
    components(schemas(
        CreateTaskBody,
        UpdateTaskBody,
        TaskAnswer,
        TaskListAnswer,
        AppendBody,
        AppendAnswer,
        EventPageAnswer,
        ArtifactAnswer,
        ArtifactListAnswer,
        SummaryBody,
        CheckpointBody,
        MarkAnswer,
        MarkListAnswer,
        ContinuationBody,
        ContinuationAnswer,
        ErrorBody
    ))
)]
pub struct TasksApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/tasks", post(create_task).get(list_tasks))
        .route(
            "/v1/tasks/{id}",
            get(get_task).patch(update_task).delete(delete_task),
        )
        .route(
            "/v1/tasks/{id}/events",
            post(append_events).get(list_events),
        )
        .route("/v1/tasks/{id}/artifacts", get(list_artifacts))
        .route("/v1/tasks/{id}/artifacts/{name}", put(put_artifact))
        .route("/v1/tasks/{id}/summaries", post(add_summary))
        .route("/v1/tasks/{id}/checkpoints", post(add_checkpoint))
        .route("/v1/tasks/{id}/marks", get(list_marks))
        .route("/v1/tasks/{id}/continuation", post(continuation))
        .route("/v1/artifacts/{id}", get(read_artifact))
        .route("/v1/artifacts/{id}/meta", get(get_artifact_meta))
}

crate::bodies::wire_bodies! {
    /// A task to create.
    request CreateTaskBody = registry_tasks::CreateTask;
    /// A new version of a task.
    request UpdateTaskBody = registry_tasks::UpdateTask;
    /// A task.
    answer TaskAnswer = registry_tasks::TaskView;
    /// The caller's tasks.
    answer TaskListAnswer = registry_tasks::TaskList;
    /// Events to append.
    request AppendBody = registry_tasks::AppendEvents;
    /// What an append did.
    answer AppendAnswer = registry_tasks::AppendOutcome;
    /// A page of events.
    answer EventPageAnswer = registry_tasks::EventPage;
    /// An artifact's metadata.
    answer ArtifactAnswer = registry_tasks::ArtifactView;
    /// A task's artifacts.
    answer ArtifactListAnswer = registry_tasks::ArtifactList;
    /// A compaction summary.
    request SummaryBody = registry_tasks::SummaryRequest;
    /// A checkpoint.
    request CheckpointBody = registry_tasks::CheckpointRequest;
    /// A summary or checkpoint.
    answer MarkAnswer = registry_core::task::TaskMark;
    /// A task's summaries and checkpoints.
    answer MarkListAnswer = registry_tasks::MarkList;
    /// A Continuation Package request.
    request ContinuationBody = registry_tasks::ContinuationRequest;
    /// The Continuation Package and its manifest.
    answer ContinuationAnswer = registry_tasks::Continuation;
}

/// Creates a task in the caller's scope (tenant / project / user / session), status `open`.
#[utoipa::path(post, path = "/v1/tasks", security(("bearer" = [])), request_body = CreateTaskBody,
    responses((status = 201, body = TaskAnswer), (status = 403, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn create_task(
    State(state): State<AppState>,
    Auth(p): Auth,
    ApiJson(req): ApiJson<CreateTask>,
) -> ApiResult<(StatusCode, axum::Json<TaskView>)> {
    state
        .blocking(move |s| {
            Ok((
                StatusCode::CREATED,
                axum::Json(s.services.tasks.create(&p, req)?),
            ))
        })
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// At most this many (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
}

/// The tasks the caller may read on its path, newest first.
#[utoipa::path(get, path = "/v1/tasks", security(("bearer" = [])), params(ListParams),
    responses((status = 200, body = TaskListAnswer)))]
pub async fn list_tasks(
    State(state): State<AppState>,
    Auth(p): Auth,
    Query(q): Query<ListParams>,
) -> ApiResult<axum::Json<TaskList>> {
    let limit = crate::extract::positive("limit", q.limit, 100, 1000)?;
    state
        .blocking(move |s| Ok(axum::Json(s.services.tasks.list(&p, limit)?)))
        .await
}

/// A task the caller may read; any other answers 404.
#[utoipa::path(get, path = "/v1/tasks/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "task id")),
    responses((status = 200, body = TaskAnswer), (status = 404, body = ErrorBody)))]
pub async fn get_task(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<TaskView>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.tasks.get(&p, &id)?)))
        .await
}

/// A new version of the task from the head the caller read (`version`; another answers 409):
/// its status (open, paused, done, failed; audited `task.status`) or next step.
#[utoipa::path(patch, path = "/v1/tasks/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "task id")), request_body = UpdateTaskBody,
    responses((status = 200, body = TaskAnswer), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn update_task(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UpdateTask>,
) -> ApiResult<axum::Json<TaskView>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.tasks.update(&p, &id, req)?)))
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeleteParams {
    /// Why (kept in the receipt; the audit log keeps its hash): one line, at most 200 characters.
    #[param(pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$", max_length = 200)]
    pub reason: Option<String>,
}

/// Deletes the task and purges its events, artifacts, summaries and checkpoints; answers the
/// deletion receipt.
#[utoipa::path(delete, path = "/v1/tasks/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "task id"), DeleteParams),
    responses((status = 200, description = "the deletion receipt", body = crate::bodies::Receipt),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn delete_task(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    Query(q): Query<DeleteParams>,
) -> ApiResult<axum::Json<Receipt>> {
    state
        .blocking(move |s| {
            let receipt = s.services.tasks.delete(&p, &id, q.reason)?;
            Ok(axum::Json(s.services.deletions.for_reader(&p, receipt)?))
        })
        .await
}

/// Appends events in order (append-only, idempotent by the client's event id, screened like
/// memory fields).
#[utoipa::path(post, path = "/v1/tasks/{id}/events", security(("bearer" = [])),
    params(("id" = String, Path, description = "task id")), request_body = AppendBody,
    responses((status = 200, body = AppendAnswer), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn append_events(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<AppendEvents>,
) -> ApiResult<axum::Json<AppendOutcome>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.tasks.append(&p, &id, req)?)))
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventParams {
    /// Events with a greater sequence number (default 0; at most 2^53 − 1).
    #[param(maximum = 9007199254740991.0)]
    pub after: Option<u64>,
    /// At most this many (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
}

/// Events after `after`, in sequence order; `next` is the `after` of the next page.
#[utoipa::path(get, path = "/v1/tasks/{id}/events", security(("bearer" = [])),
    params(("id" = String, Path, description = "task id"), EventParams),
    responses((status = 200, body = EventPageAnswer), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn list_events(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    Query(q): Query<EventParams>,
) -> ApiResult<axum::Json<EventPage>> {
    let after = crate::extract::seq("after", q.after)?.unwrap_or(0);
    let limit = crate::extract::positive("limit", q.limit, 100, 1000)?;
    state
        .blocking(move |s| {
            Ok(axum::Json(s.services.tasks.events(
                &p,
                &id,
                after,
                Some(limit),
            )?))
        })
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ArtifactParams {
    /// A short description (at most 256 bytes, without NUL).
    #[param(pattern = "^[^\\u0000]*$", max_length = 256)]
    pub summary: Option<String>,
}

/// Stores the raw body (any media type, at most 8 MiB) as an artifact of the task,
/// content-addressed; answers its id, `sha256:` digest, size and line count.
#[utoipa::path(put, path = "/v1/tasks/{id}/artifacts/{name}", security(("bearer" = [])),
    params(("id" = String, Path, description = "task id"),
        ("name" = String, Path, description = "1-200 characters of [A-Za-z0-9._-]", pattern = "^[A-Za-z0-9._-]{1,200}$"), ArtifactParams),
    request_body(content = Option<Vec<u8>>, content_type = "application/octet-stream",
        description = "the artifact's bytes (an empty or missing body stores an empty artifact)"),
    responses((status = 201, body = ArtifactAnswer), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn put_artifact(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path((id, name)): Path<(String, String)>,
    Query(q): Query<ArtifactParams>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, axum::Json<ArtifactView>)> {
    let bytes = crate::routes::skills::body_bytes(body)?;
    let media_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    state
        .blocking(move |s| {
            let v = s.services.tasks.put_artifact(
                &p,
                &id,
                &name,
                media_type.as_deref(),
                q.summary.as_deref(),
                &bytes,
            )?;
            Ok((StatusCode::CREATED, axum::Json(v)))
        })
        .await
}

/// The task's artifacts, oldest first.
#[utoipa::path(get, path = "/v1/tasks/{id}/artifacts", security(("bearer" = [])),
    params(("id" = String, Path, description = "task id")),
    responses((status = 200, body = ArtifactListAnswer), (status = 404, body = ErrorBody)))]
pub async fn list_artifacts(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<ArtifactList>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.tasks.artifacts(&p, &id)?)))
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RangeParams {
    /// First byte (default 0).
    pub offset: Option<u64>,
    /// How many bytes (default: to the end).
    pub length: Option<u64>,
    /// First line, counted from 1 (not with offset or length).
    #[param(minimum = 1)]
    pub line: Option<u64>,
    /// How many lines (default 1, at most 100,000).
    #[param(minimum = 1, maximum = 100000)]
    pub lines: Option<u64>,
}

/// Exactly the bytes `offset .. offset + length`, or exactly the lines `line ..` (each with
/// its line feed), as `application/octet-stream`; the artifact's media type and digest are in
/// `X-Artifact-Media-Type` and `X-Artifact-Digest`, the range's first byte in `X-Range-Offset`.
#[utoipa::path(get, path = "/v1/artifacts/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "artifact id"), RangeParams),
    responses((status = 200, content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn read_artifact(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    Query(q): Query<RangeParams>,
) -> ApiResult<Response> {
    let range = RangeRequest {
        offset: q.offset,
        length: q.length,
        line: q.line,
        lines: q.lines,
    };
    state
        .blocking(move |s| {
            let r = s.services.tasks.read_range(&p, &id, &range)?;
            let mut resp = (
                [
                    (header::CONTENT_TYPE, "application/octet-stream"),
                    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                ],
                r.bytes,
            )
                .into_response();
            let h = resp.headers_mut();
            for (name, value) in [
                ("x-artifact-digest", r.artifact.digest.clone()),
                ("x-artifact-size", r.artifact.size.to_string()),
                ("x-range-offset", r.offset.to_string()),
            ] {
                if let Ok(v) = HeaderValue::from_str(&value) {
                    h.insert(name, v);
                }
            }
            if let Ok(v) = HeaderValue::from_str(&r.artifact.media_type) {
                h.insert("x-artifact-media-type", v);
            }
            Ok(resp)
        })
        .await
}

/// An artifact's metadata.
#[utoipa::path(get, path = "/v1/artifacts/{id}/meta", security(("bearer" = [])),
    params(("id" = String, Path, description = "artifact id")),
    responses((status = 200, body = ArtifactAnswer), (status = 404, body = ErrorBody)))]
pub async fn get_artifact_meta(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<ArtifactView>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.tasks.artifact(&p, &id)?)))
        .await
}

/// A compaction summary of events `from_seq ..= to_seq` (checked against the log); the hash
/// of the covered events is recorded beside it.
#[utoipa::path(post, path = "/v1/tasks/{id}/summaries", security(("bearer" = [])),
    params(("id" = String, Path, description = "task id")), request_body = SummaryBody,
    responses((status = 201, body = MarkAnswer), (status = 404, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn add_summary(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<SummaryRequest>,
) -> ApiResult<(StatusCode, axum::Json<TaskMark>)> {
    state
        .blocking(move |s| {
            let m = s.services.tasks.summarize(&p, &id, req)?;
            Ok((StatusCode::CREATED, axum::Json(m)))
        })
        .await
}

/// A checkpoint pinning a sequence number (default: the last event).
#[utoipa::path(post, path = "/v1/tasks/{id}/checkpoints", security(("bearer" = [])),
    params(("id" = String, Path, description = "task id")), request_body = CheckpointBody,
    responses((status = 201, body = MarkAnswer), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn add_checkpoint(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<CheckpointRequest>,
) -> ApiResult<(StatusCode, axum::Json<TaskMark>)> {
    state
        .blocking(move |s| {
            let m = s.services.tasks.checkpoint(&p, &id, req)?;
            Ok((StatusCode::CREATED, axum::Json(m)))
        })
        .await
}

/// The task's summaries and checkpoints, newest first.
#[utoipa::path(get, path = "/v1/tasks/{id}/marks", security(("bearer" = [])),
    params(("id" = String, Path, description = "task id")),
    responses((status = 200, body = MarkListAnswer), (status = 404, body = ErrorBody)))]
pub async fn list_marks(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<MarkList>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.tasks.marks(&p, &id)?)))
        .await
}

/// The Continuation Package: assembled deterministically within the token budget, with its
/// manifest. The goal and acceptance are never cut: over the budget alone they answer 422
/// `FIXED_ZONE_OVER_BUDGET`.
#[utoipa::path(post, path = "/v1/tasks/{id}/continuation", security(("bearer" = [])),
    params(("id" = String, Path, description = "task id")), request_body = ContinuationBody,
    responses((status = 200, body = ContinuationAnswer), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn continuation(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<ContinuationRequest>,
) -> ApiResult<axum::Json<Continuation>> {
    state
        .blocking(move |s| Ok(axum::Json(s.services.tasks.continuation(&p, &id, &req)?)))
        .await
}
