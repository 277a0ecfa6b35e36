//! The change feed: Server-Sent Events at `/v1/events`, and webhooks (`/v1/webhooks`) with their
//! dead letters. What a subscriber sees is decided by `registry_services::feed` (the access
//! rules of the read paths); delivery runs in `crate::webhooks`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use futures_util::Stream;
use registry_core::feed::{Delivery, FeedEvent, FeedKind, WebhookRecord};
use registry_core::hash::sha256_hex;
use registry_core::principal::Principal;
use registry_core::{FieldError, FieldReason};
use registry_services::feed;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, OpenApi};

use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiPath as Path, ApiQuery as Query, Auth};
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(
    paths(
        events,
        create_webhook,
        list_webhooks,
        get_webhook,
        delete_webhook,
        dead_letters,
        redeliver
    ),
    components(schemas(ErrorBody))
)]
pub struct FeedApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/events", get(events))
        .route("/v1/webhooks", post(create_webhook).get(list_webhooks))
        .route("/v1/webhooks/{id}", get(get_webhook).delete(delete_webhook))
        .route("/v1/webhooks/{id}/dead-letters", get(dead_letters))
        .route(
            "/v1/webhooks/{id}/dead-letters/{delivery}/redeliver",
            post(redeliver),
        )
}

use crate::slots::Slot;
pub use crate::slots::StreamSlots;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventsParams {
    /// Start after this sequence number (default: the newest event; only what comes next).
    /// A `Last-Event-ID` header, as a reconnecting EventSource sends, takes precedence. At
    /// most 2^53 − 1.
    #[param(maximum = 9007199254740991.0)]
    pub after: Option<u64>,
}

/// One Server-Sent Event of `/v1/events` as an EventSource reads it: `id` the event's
/// sequence number, `event` its kind, `data` a `FeedEventBody` as JSON (ids, kinds, hashes and
/// scope; never content).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct FeedSseEvent {
    pub id: String,
    pub event: String,
    /// A `FeedEventBody`, as JSON.
    #[schemars(extend("contentMediaType" = "application/json"))]
    pub data: String,
}
crate::bodies::wire_bodies! {
    answer FeedSseEvent;
    answer FeedEventBody;
    request WebhookCreate;
    answer WebhookView;
    answer WebhookCreated;
    answer WebhookList;
    answer DeliveryList;
}

/// The feed event carried in each SSE `data:` line.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct FeedEventBody(pub FeedEvent);

fn bearer_hash(headers: &HeaderMap) -> ApiResult<String> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(|k| sha256_hex(k.trim()))
        .ok_or_else(ApiError::unauthenticated)
}

fn start_position(headers: &HeaderMap, after: Option<u64>) -> ApiResult<Option<u64>> {
    // `after` is checked even when the header wins: a bad parameter is refused either way.
    let after = crate::extract::seq("after", after)?;
    match headers.get("last-event-id") {
        None => Ok(after),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|n| *n <= crate::extract::MAX_SEQ)
            .map(Some)
            .ok_or_else(|| {
                ApiError::validation("Last-Event-ID must be a sequence number").with_details(
                    FieldError::new("Last-Event-ID").reason(FieldReason::InvalidValue),
                )
            }),
    }
}

/// What one open stream holds between polls.
struct Reader {
    state: AppState,
    principal: Principal,
    key_hash: String,
    cursor: u64,
    pending: VecDeque<FeedEvent>,
    opened: std::time::Instant,
    _slot: Slot,
}

impl Reader {
    /// The next event to send; `None` ends the stream (shutdown, a revoked key, a store error,
    /// or `webhooks.max_stream_secs` passed once what was read is sent).
    async fn next(&mut self) -> Option<FeedEvent> {
        let every = Duration::from_millis(self.state.config.webhooks.poll_interval_ms);
        let lifetime = Duration::from_secs(self.state.config.webhooks.max_stream_secs);
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            if self.state.shutdown.begun() || self.opened.elapsed() >= lifetime {
                return None;
            }
            let (st, p, key, after) = (
                self.state.clone(),
                self.principal.clone(),
                self.key_hash.clone(),
                self.cursor,
            );
            let page = tokio::task::spawn_blocking(move || {
                let feed = st.services.feed();
                let live = feed.key_is_live(&key)?;
                live.then(|| feed.read(&p, after, None)).transpose()
            })
            .await;
            let Ok(Ok(Some(page))) = page else {
                return None;
            };
            let caught_up = page.next == self.cursor;
            self.cursor = page.next;
            self.pending.extend(page.events);
            if caught_up {
                tokio::time::sleep(every).await;
            }
        }
    }
}

/// The change feed as Server-Sent Events: each event has `id:` its sequence number, `event:`
/// its kind and `data:` a `FeedEvent` (ids, kinds, hashes and scope; never content). Only
/// events on assets the key may see when the event is read are sent; another tenant's never.
/// Keep-alive comments every 15 s; the stream ends when the server shuts down or the key is
/// revoked, or after `webhooks.max_stream_secs` (the client reconnects with `Last-Event-ID`).
/// At most `webhooks.max_streams_per_key` streams per key (429 beyond).
#[utoipa::path(get, path = "/v1/events", security(("bearer" = [])), params(EventsParams,
        ("Last-Event-ID" = Option<String>, Header, description = "resume after this sequence number (at most 2^53 − 1)", pattern = "^[0-9]{1,15}$")),
    responses((status = 200, content_type = "text/event-stream", description = "a stream of feed events", body = FeedSseEvent),
        (status = 422, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn events(
    State(state): State<AppState>,
    Auth(p): Auth,
    headers: HeaderMap,
    Query(q): Query<EventsParams>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let key_hash = bearer_hash(&headers)?;
    let start = start_position(&headers, q.after)?;
    let slot = state
        .feed_streams
        .take(&key_hash, state.config.webhooks.max_streams_per_key)
        .ok_or_else(|| {
            ApiError::new(
                registry_core::ErrorCode::TooManyRequests,
                "this key has as many event streams open as it may",
            )
        })?;
    let cursor = match start {
        Some(n) => n,
        None => state.blocking(|s| Ok(s.services.feed().head()?)).await?,
    };
    let reader = Reader {
        state,
        principal: p,
        key_hash,
        cursor,
        pending: VecDeque::new(),
        opened: std::time::Instant::now(),
        _slot: slot,
    };
    let stream = futures_util::stream::unfold(reader, |mut r| async move {
        let e = r.next().await?;
        let ev = Event::default()
            .id(e.seq.to_string())
            .event(e.kind.as_str())
            .json_data(&e)
            .unwrap_or_else(|_| Event::default().comment("unencodable event"));
        Some((Ok(ev), r))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// Registers a webhook.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookCreate {
    /// Where to POST the events: http or https, no credentials, at most 2048 characters; a
    /// host that resolves to a loopback, private, link-local, unspecified or multicast address
    /// is refused unless the operator sets `webhooks.allow_private_targets`.
    #[schemars(length(max = 2048))]
    pub url: String,
    /// The kinds to deliver (at least one).
    #[schemars(length(min = 1, max = 8))]
    pub events: Vec<FeedKind>,
}

/// A webhook, without its secret.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct WebhookView {
    pub id: String,
    pub url: String,
    pub events: Vec<FeedKind>,
    pub owner: String,
    pub created_at: DateTime<Utc>,
}

impl From<WebhookRecord> for WebhookView {
    fn from(w: WebhookRecord) -> Self {
        WebhookView {
            id: w.id,
            url: w.url,
            events: w.events,
            owner: w.owner,
            created_at: w.created_at,
        }
    }
}

/// A new webhook and its secret, shown this once: each delivery's body is signed with it
/// (HMAC-SHA256, `X-Registry-Signature: sha256=<hex>`).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct WebhookCreated {
    #[serde(flatten)]
    pub webhook: WebhookView,
    pub secret: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct WebhookList {
    pub webhooks: Vec<WebhookView>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct DeliveryList {
    pub deliveries: Vec<Delivery>,
}

/// Registers a webhook for the caller's key, from the newest event on. Deliveries carry what
/// this key may see when each is sent, and stop while it is revoked.
#[utoipa::path(post, path = "/v1/webhooks", security(("bearer" = [])), request_body = WebhookCreate,
    responses((status = 201, body = WebhookCreated), (status = 422, body = ErrorBody)))]
pub async fn create_webhook(
    State(state): State<AppState>,
    Auth(p): Auth,
    headers: HeaderMap,
    ApiJson(body): ApiJson<WebhookCreate>,
) -> ApiResult<(StatusCode, axum::Json<WebhookCreated>)> {
    let key_hash = bearer_hash(&headers)?;
    let url = crate::webhooks::parse_target(&body.url)?;
    let events = feed::webhook_events(body.events)?;
    let cfg = &state.config.webhooks;
    crate::webhooks::resolve_target(
        &url,
        cfg.allow_private_targets,
        Duration::from_secs(cfg.timeout_secs),
    )
    .await?;
    let url = body.url;
    state
        .blocking(move |s| {
            let (w, secret) = s
                .services
                .feed()
                .create_webhook(&p, &key_hash, url, events)?;
            Ok((
                StatusCode::CREATED,
                axum::Json(WebhookCreated {
                    webhook: w.into(),
                    secret,
                }),
            ))
        })
        .await
}

/// The webhooks the caller manages: its own, and its tenant's for an admin.
#[utoipa::path(get, path = "/v1/webhooks", security(("bearer" = [])),
    responses((status = 200, body = WebhookList)))]
pub async fn list_webhooks(
    State(state): State<AppState>,
    Auth(p): Auth,
) -> ApiResult<axum::Json<WebhookList>> {
    state
        .blocking(move |s| {
            let list = s.services.feed().list_webhooks(&p)?;
            Ok(axum::Json(WebhookList {
                webhooks: list.into_iter().map(Into::into).collect(),
            }))
        })
        .await
}

/// One webhook (its owner, or an admin of its tenant; anyone else: 404).
#[utoipa::path(get, path = "/v1/webhooks/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "webhook id")),
    responses((status = 200, body = WebhookView), (status = 404, body = ErrorBody)))]
pub async fn get_webhook(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<WebhookView>> {
    state
        .blocking(move |s| {
            let w = s.services.feed().get_webhook(&p, &id)?;
            Ok(axum::Json(w.into()))
        })
        .await
}

/// Removes a webhook and its deliveries.
#[utoipa::path(delete, path = "/v1/webhooks/{id}", security(("bearer" = [])),
    params(("id" = String, Path, description = "webhook id")),
    responses((status = 204, description = "removed"), (status = 404, body = ErrorBody)))]
pub async fn delete_webhook(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    state
        .blocking(move |s| {
            s.services.feed().delete_webhook(&p, &id)?;
            Ok(StatusCode::NO_CONTENT)
        })
        .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeadLetterParams {
    /// At most this many (default 100, at most 1000).
    #[param(minimum = 0, maximum = 1000)]
    pub limit: Option<u64>,
}

/// Deliveries that failed every attempt, newest first (ids, kinds and the last error word).
#[utoipa::path(get, path = "/v1/webhooks/{id}/dead-letters", security(("bearer" = [])),
    params(("id" = String, Path, description = "webhook id"), DeadLetterParams),
    responses((status = 200, body = DeliveryList), (status = 404, body = ErrorBody)))]
pub async fn dead_letters(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path(id): Path<String>,
    Query(q): Query<DeadLetterParams>,
) -> ApiResult<axum::Json<DeliveryList>> {
    let limit = crate::extract::bounded("limit", q.limit, 100, 1000)?;
    state
        .blocking(move |s| {
            let deliveries = s.services.feed().dead_letters(&p, &id, limit)?;
            Ok(axum::Json(DeliveryList { deliveries }))
        })
        .await
}

/// Queues a dead delivery again, with its attempts reset.
#[utoipa::path(post, path = "/v1/webhooks/{id}/dead-letters/{delivery}/redeliver", security(("bearer" = [])),
    params(("id" = String, Path, description = "webhook id"), ("delivery" = String, Path, description = "delivery id")),
    responses((status = 202, description = "queued"), (status = 404, body = ErrorBody)))]
pub async fn redeliver(
    State(state): State<AppState>,
    Auth(p): Auth,
    Path((id, delivery)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    state
        .blocking(move |s| {
            s.services.feed().redeliver(&p, &id, &delivery)?;
            Ok(StatusCode::ACCEPTED)
        })
        .await
}
