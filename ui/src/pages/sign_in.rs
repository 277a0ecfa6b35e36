//! Sign-in (an API key exchanged for a session cookie) and sign-out.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::html;
use registry_core::hash::sha256_hex;
use serde::Deserialize;

use crate::layout::bare;
use crate::pages::{Posted, TokenForm};
use crate::{Console, Ctx, UiError, see_other, session};

fn sign_in_page(status: StatusCode, message: Option<&str>) -> Response {
    let body = html! {
        @if let Some(m) = message { p role="alert" class="error" { (m) } }
        form method="post" action="/ui/sign-in" class="card narrow" {
            p { "Sign in with an API key. The key is exchanged for a session; it is not kept in the page, a URL or the log." }
            label for="key" { "API key" }
            input id="key" name="key" type="password" autocomplete="off" required;
            button type="submit" { "Sign in" }
        }
    };
    (status, bare("Sign in", body)).into_response()
}

pub async fn form() -> Response {
    sign_in_page(StatusCode::OK, None)
}

#[derive(Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    key: String,
}

pub async fn submit(
    State(c): State<Console>,
    headers: HeaderMap,
    Posted(f): Posted<SignInForm>,
) -> Result<Response, UiError> {
    // No session yet, so no token: a sign-in posted from another site is refused by origin.
    if !session::same_origin(&headers) {
        return Err(UiError::forbidden("cross-site request refused"));
    }
    let key = f.key.trim();
    if key.is_empty() || key.len() > 512 {
        return Ok(sign_in_page(
            StatusCode::UNAUTHORIZED,
            Some("That key was refused."),
        ));
    }
    let hash = sha256_hex(key);
    match c.resolve(hash.clone()).await? {
        None => Ok(sign_in_page(
            StatusCode::UNAUTHORIZED,
            Some("That key was refused."),
        )),
        Some(p) => {
            tracing::info!(tenant = %p.tenant, user = %p.user, "console sign-in");
            let id = c.0.sessions.open(hash);
            let mut r = see_other("/ui/");
            let v = HeaderValue::from_str(&session::set_cookie(&id)).map_err(UiError::internal)?;
            r.headers_mut().insert(header::SET_COOKIE, v);
            Ok(r)
        }
    }
}

pub async fn sign_out(
    State(c): State<Console>,
    ctx: Ctx,
    Posted(f): Posted<TokenForm>,
) -> Result<Response, UiError> {
    ctx.check_post(&f.csrf)?;
    c.0.sessions.close(&ctx.session_id);
    let mut r = see_other("/ui/sign-in");
    let v = HeaderValue::from_str(&session::clear_cookie()).map_err(UiError::internal)?;
    r.headers_mut().insert(header::SET_COOKIE, v);
    Ok(r)
}
