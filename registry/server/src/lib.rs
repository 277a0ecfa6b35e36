#![doc = include_str!("../README.md")]

pub mod bodies;
pub mod cli;
pub mod config;

pub mod error;
pub mod extract;
pub mod jobs;
pub mod mcp;

pub mod openapi;
pub mod request;
pub mod routes;
pub mod slots;

pub mod state;
pub mod webhooks;

use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, StatusCode};
use registry_core::ErrorCode;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::error::ApiError;
use crate::state::AppState;

const REQUEST_ID: &str = "x-request-id";

/// The whole HTTP application over `state`.
pub fn app(state: AppState) -> Router {
    app_with(state, tokio_util::sync::CancellationToken::new())
}

/// The application; cancelling `shutdown` ends open MCP streams so a drain can finish.
pub fn app_with(state: AppState, shutdown: tokio_util::sync::CancellationToken) -> Router {
    let limit = state.config.max_body_bytes;
    let timeout = Duration::from_secs(state.config.request_timeout_secs);
    // The request's own deadline is enforced by `AppState::blocking`, which cancels work before
    // it commits or waits for the outcome of work that did; this outer limit is only a backstop
    // for a request stuck outside any blocking work (a body that trickles in).
    let backstop = timeout + Duration::from_secs(30);
    let request_id = HeaderName::from_static(REQUEST_ID);
    Router::new()
        .merge(routes::system::router())
        .merge(routes::memory::router())
        .merge(routes::knowledge::router())
        .merge(routes::skills::router())
        .merge(routes::skill_proof::router())
        .merge(routes::deletion::router())
        .merge(routes::feed::router())
        .merge(routes::context::router())
        .merge(routes::retrieve::router())
        .merge(routes::tasks::router())
        .route("/openapi.json", axum::routing::get(openapi::serve_openapi))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state.clone())
        .merge(console(&state))
        .merge(mcp::router(state, shutdown))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            backstop,
        ))
        .layer(axum::middleware::from_fn(move |req, next| {
            request::scope(timeout, req, next)
        }))
        .layer(TraceLayer::new_for_http())
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
}

/// The web console at `/ui/` (outside the OpenAPI document): the same services, and keys
/// resolved by the same lookup as the bearer authentication.
fn console(state: &AppState) -> Router {
    let store = state.services.backends.store.clone();
    let lookup: registry_ui::KeyLookup = std::sync::Arc::new(move |hash: &str| {
        state::principal_for_key_hash(store.as_ref(), hash).map_err(|e| e.message)
    });
    let timeout = Duration::from_secs(state.config.request_timeout_secs);
    let runtime = registry_ui::Runtime {
        deadline: std::sync::Arc::new(move || {
            request::current().map_or_else(|| std::time::Instant::now() + timeout, |c| c.deadline)
        }),
        shutdown: state.shutdown.clone(),
    };
    registry_ui::router(registry_ui::Console::new(
        state.services.clone(),
        lookup,
        runtime,
    ))
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "method not allowed on this route",
    )
}

/// Serves until SIGTERM or Ctrl-C, then drains in-flight requests.
pub async fn serve(state: AppState, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    serve_until(state, listener, shutdown_signal()).await
}

/// Serves until `shutdown` completes, then drains in-flight requests: those that have
/// committed finish, the others stop at their next deadline check.
pub async fn serve_until(
    state: AppState,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let token = tokio_util::sync::CancellationToken::new();
    let cancel = token.clone();
    let st = state.clone();
    let stop = state.shutdown.clone();
    // The peer address reaches the handlers (the console throttles failed sign-ins by it).
    let deliveries = webhooks::spawn(state.clone(), token.clone());
    let app = app_with(state, token.clone())
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            // Work that has not committed stops at its next deadline check (its request
            // answers 408), so the drain below waits for commits only, never for a long ingest.
            stop.begin();
            cancel.cancel();
        })
        .await;
    token.cancel();
    if let Some(d) = deliveries {
        let _ = d.await;
    }
    // Anchor what this run appended to the audit log before the process goes.
    let _ = tokio::task::spawn_blocking(move || {
        if let Err(e) = st.services.audit.checkpoint() {
            tracing::warn!(error = %e, "no audit checkpoint at shutdown");
        }
    })
    .await;
    served
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown signal received; draining");
}
