#![doc = include_str!("../README.md")]

pub mod layout;
pub mod pages;
pub mod session;
pub mod svg;
pub mod throttle;

use std::sync::Arc;

use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use registry_core::principal::Principal;
use registry_core::{CoreError, ErrorCode};
use registry_services::Services;

use crate::session::Sessions;

/// Resolves the principal of an API key from the key's sha256, exactly as the HTTP API's
/// bearer authentication does (`Ok(None)`: unknown or revoked). The server passes its own.
pub type KeyLookup = Arc<dyn Fn(&str) -> Result<Option<Principal>, String> + Send + Sync>;

/// The console's state: the same services every other door calls, the key lookup of the HTTP
/// API and the session table.
#[derive(Clone)]
pub struct Console(Arc<Inner>);

struct Inner {
    services: Services,
    lookup: KeyLookup,
    runtime: Runtime,
    sessions: Sessions,
    throttle: throttle::Throttle,
}

/// How the console's work runs, as the API's does: under the request's deadline (the server's
/// request scope names it) and stopped by the server's shutdown.
#[derive(Clone)]
pub struct Runtime {
    /// The current request's deadline.
    pub deadline: Arc<dyn Fn() -> std::time::Instant + Send + Sync>,
    pub shutdown: registry_core::deadline::Shutdown,
}

impl Console {
    pub fn new(services: Services, lookup: KeyLookup, runtime: Runtime) -> Console {
        Console(Arc::new(Inner {
            services,
            lookup,
            runtime,
            sessions: Sessions::default(),
            throttle: throttle::Throttle::default(),
        }))
    }

    pub fn services(&self) -> &Services {
        &self.0.services
    }

    /// Runs blocking work (the store, the indexes, the model) off the async workers, under the
    /// request's deadline as the API's work runs: when it passes first (or the server shuts
    /// down), the page answers 408 `REQUEST_TIMEOUT` and the work is cancelled before it
    /// commits anything; once the work has committed, the answer waits for its outcome.
    pub async fn run<T, F>(&self, f: F) -> Result<T, UiError>
    where
        T: Send + 'static,
        F: FnOnce(&Services) -> Result<T, UiError> + Send + 'static,
    {
        use registry_core::deadline::{CancelOnDrop, Deadline};
        let at = (self.0.runtime.deadline)();
        let deadline = Deadline::at(at).with_shutdown(&self.0.runtime.shutdown);
        let guard = CancelOnDrop::new(deadline.clone());
        let me = self.clone();
        let d = deadline.clone();
        let mut handle = tokio::task::spawn_blocking(move || d.run(|| f(&me.0.services)));
        let failed =
            |e: tokio::task::JoinError| UiError::internal(format!("console task failed: {e}"));
        let out = match tokio::time::timeout_at(at.into(), &mut handle).await {
            Ok(joined) => joined.map_err(failed)?,
            Err(_) if deadline.cancel() => Err(CoreError::DeadlineExceeded.into()),
            // Committed already: its outcome is the answer.
            Err(_) => handle.await.map_err(failed)?,
        };
        guard.disarm();
        out
    }

    async fn resolve(&self, key_hash: String) -> Result<Option<Principal>, UiError> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || (me.0.lookup)(&key_hash))
            .await
            .map_err(|e| UiError::internal(e.to_string()))?
            .map_err(UiError::internal)
    }
}

/// The console under `/ui/`: pages, their form actions and the embedded assets.
pub fn router(console: Console) -> Router {
    Router::new()
        .route("/ui", get(|| async { Redirect::to("/ui/") }))
        .route("/ui/", get(pages::overview::page))
        .route(
            "/ui/sign-in",
            get(pages::sign_in::form).post(pages::sign_in::submit),
        )
        .route("/ui/sign-out", post(pages::sign_in::sign_out))
        .route("/ui/review", get(pages::review::page))
        .route(
            "/ui/review/memories/{id}/{decision}",
            post(pages::review::decide_memory),
        )
        .route("/ui/memory", get(pages::memory::search))
        .route("/ui/memory/{id}", get(pages::memory::record))
        .route("/ui/knowledge", get(pages::knowledge::page))
        .route("/ui/knowledge/{id}", get(pages::knowledge::document))
        .route("/ui/skills", get(pages::skills::list))
        .route("/ui/skills/{name}", get(pages::skills::skill))
        .route(
            "/ui/skills/{name}/versions/{version}/{action}",
            post(pages::skills::act),
        )
        .route("/ui/skills/{name}/rollback", post(pages::skills::rollback))
        .route("/ui/derivation", get(pages::derivation::page))
        .route("/ui/deletions", get(pages::deletions::list))
        .route("/ui/deletions/{id}", get(pages::deletions::receipt))
        .route("/ui/audit", get(pages::audit::page))
        .route("/ui/audit/verify", post(pages::audit::verify))
        .route("/ui/context", get(pages::context::list))
        .route("/ui/context/compare", get(pages::context::compare))
        .route("/ui/context/{id}", get(pages::context::manifest))
        .route("/ui/tasks", get(pages::tasks::list))
        .route("/ui/tasks/{id}", get(pages::tasks::task))
        .route(
            "/ui/tasks/{task}/artifacts/{id}",
            get(pages::tasks::artifact),
        )
        .route("/ui/assets/htmx.min.js", get(htmx))
        .route("/ui/assets/console.css", get(css))
        .layer(axum::middleware::map_response(harden))
        .with_state(console)
}

/// What every console answer carries: it is never framed (clickjacking), never sniffed as
/// another type, and a page (anything but the static assets) is never stored by a cache, so a
/// shared browser or proxy keeps no tenant's data. An error that an extractor answered in plain
/// text (a malformed query or path) is shown in the console's error page instead.
async fn harden(resp: Response) -> Response {
    let mut resp = if resp.status().is_client_error() || resp.status().is_server_error() {
        as_error_page(resp).await
    } else {
        resp
    };
    let h = resp.headers_mut();
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "frame-ancestors 'none'; base-uri 'none'; object-src 'none'; form-action 'self'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    let asset = h
        .get(header::CACHE_CONTROL)
        .is_some_and(|v| v.as_bytes().starts_with(b"public"));
    if !asset {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    resp
}

/// Most of an extractor's plain-text refusal quoted in the error page.
const MAX_QUOTED: usize = 300;

/// An error answered as something other than a page (an axum extractor's plain text, an empty
/// body) becomes the error page with the same status and the code of the API's code table.
async fn as_error_page(resp: Response) -> Response {
    let is_html = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"));
    if is_html {
        return resp;
    }
    let status = resp.status();
    let (mut parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let code = ErrorCode::ALL
        .iter()
        .find(|(_, s)| *s == status.as_u16())
        .map_or("BAD_REQUEST", |(c, _)| c.as_str());
    let mut message: String = text.trim().chars().take(MAX_QUOTED).collect();
    if message.is_empty() {
        message = status.canonical_reason().unwrap_or("refused").to_string();
    }
    let page = UiError::new(status, code, message).into_response();
    let (new_parts, body) = page.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::CONTENT_TYPE);
    for (k, v) in new_parts.headers.iter() {
        parts.headers.insert(k.clone(), v.clone());
    }
    Response::from_parts(parts, body)
}

/// htmx, vendored from its npm package (see `ui/assets/VENDORED`).
pub const HTMX_JS: &str = include_str!("../assets/htmx.min.js");
/// The sha256 `ui/assets/VENDORED` records for [`HTMX_JS`].
pub const HTMX_SHA256: &str = "a0abb04f2f45a1f89d1d4844023245537e5e6014c87b144553e0607b4cc32130";
const CSS: &str = include_str!("../assets/console.css");

async fn htmx() -> Response {
    asset("text/javascript; charset=utf-8", HTMX_JS)
}

async fn css() -> Response {
    asset("text/css; charset=utf-8", CSS)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

/// The client a request came from: the TCP peer the server records (`ConnectInfo`), if any.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub throttle::Client);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip());
        Ok(ClientAddr(throttle::Client::new(peer)))
    }
}

/// A signed-in request: the principal the session's key resolves to (re-read every request),
/// the session's CSRF token, and whether the request came from this site.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub principal: Principal,
    pub csrf: String,
    session_id: String,
    same_origin: bool,
}

impl Ctx {
    /// A state-changing request must come from this site and carry the session's token.
    pub fn check_post(&self, token: &str) -> Result<(), UiError> {
        if !self.same_origin {
            return Err(UiError::forbidden("cross-site request refused"));
        }
        if !session::tokens_match(token, &self.csrf) {
            return Err(UiError::forbidden("missing or invalid CSRF token"));
        }
        Ok(())
    }

    pub fn is_admin(&self) -> bool {
        self.principal.is_admin()
    }

    pub fn has_role(&self, r: registry_core::principal::Role) -> bool {
        self.principal.has_role(r)
    }
}

impl FromRequestParts<Console> for Ctx {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, c: &Console) -> Result<Ctx, Response> {
        let refuse = |parts: &Parts| -> Response {
            if parts.method == Method::GET || parts.method == Method::HEAD {
                let mut r = Redirect::to("/ui/sign-in").into_response();
                if let Ok(v) = HeaderValue::from_str(&session::clear_cookie()) {
                    r.headers_mut().insert(header::SET_COOKIE, v);
                }
                r
            } else {
                UiError::new(StatusCode::UNAUTHORIZED, "UNAUTHENTICATED", "sign in first")
                    .into_response()
            }
        };
        let Some(id) = session::cookie_value(&parts.headers) else {
            return Err(refuse(parts));
        };
        let Some(s) = c.0.sessions.get(&id) else {
            return Err(refuse(parts));
        };
        match c.resolve(s.key_hash.clone()).await {
            Ok(Some(principal)) => Ok(Ctx {
                principal,
                csrf: s.csrf,
                session_id: id,
                same_origin: session::same_origin(&parts.headers),
            }),
            Ok(None) => {
                // The key was revoked: the session ends with it.
                c.0.sessions.close(&id);
                Err(refuse(parts))
            }
            Err(e) => Err(e.into_response()),
        }
    }
}

/// A refusal or failure, answered as a page with the status of the API's code table.
#[derive(Debug)]
pub struct UiError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
}

impl UiError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        UiError {
            status,
            code: code.to_string(),
            message: message.into(),
        }
    }

    pub fn forbidden(m: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "FORBIDDEN", m)
    }

    pub fn not_found(m: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "NOT_FOUND", m)
    }

    pub fn validation(m: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_FAILED", m)
    }

    pub fn internal(m: impl std::fmt::Display) -> Self {
        tracing::error!(error = %m, "console: internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL",
            "internal error (see the server log)",
        )
    }

    fn coded(code: ErrorCode, message: String) -> Self {
        if code == ErrorCode::Internal {
            return Self::internal(message);
        }
        let status =
            StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self::new(status, code.as_str(), message)
    }
}

impl From<registry_services::Error> for UiError {
    fn from(e: registry_services::Error) -> Self {
        Self::coded(e.code, e.message)
    }
}

impl From<CoreError> for UiError {
    fn from(e: CoreError) -> Self {
        registry_services::Error::from(e).into()
    }
}

impl From<registry_memory::Error> for UiError {
    fn from(e: registry_memory::Error) -> Self {
        registry_services::Error::from(e).into()
    }
}

impl From<registry_knowledge::Error> for UiError {
    fn from(e: registry_knowledge::Error) -> Self {
        registry_services::Error::from(e).into()
    }
}

impl From<registry_skills::Error> for UiError {
    fn from(e: registry_skills::Error) -> Self {
        registry_services::Error::from(e).into()
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let body = layout::bare(
            &format!("{} {}", self.status.as_u16(), self.code),
            maud::html! {
                p role="alert" { strong { (self.code) } ": " (self.message) }
                p { a href="/ui/" { "Back to the overview" } " · " a href="/ui/sign-in" { "Sign in" } }
            },
        );
        (self.status, body).into_response()
    }
}

/// A page or a redirect after an action.
pub type Page = Result<Response, UiError>;

/// The console's answer to a successful POST: back to `to` (POST-redirect-GET).
pub fn see_other(to: &str) -> Response {
    Redirect::to(to).into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn vendored_htmx_matches_its_recorded_checksum() {
        let recorded = include_str!("../assets/VENDORED")
            .lines()
            .find(|l| l.starts_with("htmx.org "))
            .and_then(|l| l.split_whitespace().nth(3))
            .expect("VENDORED names htmx.org");
        assert_eq!(recorded, super::HTMX_SHA256);
        assert_eq!(
            registry_core::hash::sha256_hex(super::HTMX_JS),
            super::HTMX_SHA256,
            "ui/assets/htmx.min.js is not the vendored htmx.org file; run scripts/vendor-ui.sh"
        );
    }
}
