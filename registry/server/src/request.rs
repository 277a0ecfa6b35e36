//! What the server knows about the request being served, wherever its work runs: its id (for
//! error bodies and the log) and its deadline (for cancelling work before it commits).
//!
//! A middleware sets it as a task-local for the request's future; [`crate::state::AppState::
//! blocking`] carries it into the blocking thread that does the work.

use std::cell::RefCell;
use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

#[derive(Debug, Clone)]
pub struct RequestCtx {
    pub id: String,
    /// When the request's time limit runs out.
    pub deadline: Instant,
}

tokio::task_local! {
    static REQUEST: RequestCtx;
}

thread_local! {
    static BLOCKING: RefCell<Option<RequestCtx>> = const { RefCell::new(None) };
}

/// The current request, from the async task serving it or the blocking thread working for it.
pub fn current() -> Option<RequestCtx> {
    REQUEST
        .try_with(Clone::clone)
        .ok()
        .or_else(|| BLOCKING.with(|b| b.borrow().clone()))
}

/// Runs `f` on this (blocking) thread as part of `ctx`.
pub fn run_as<T>(ctx: Option<RequestCtx>, f: impl FnOnce() -> T) -> T {
    let prev = BLOCKING.with(|b| b.replace(ctx));
    let out = f();
    BLOCKING.with(|b| *b.borrow_mut() = prev);
    out
}

/// Middleware: the request's id (set by the request-id layer before it) and its deadline.
pub async fn scope(timeout: std::time::Duration, req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let ctx = RequestCtx {
        id,
        deadline: Instant::now() + timeout,
    };
    REQUEST.scope(ctx, next.run(req)).await
}
