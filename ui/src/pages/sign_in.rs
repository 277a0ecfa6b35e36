//! Sign-in (an API key exchanged for a session cookie) and sign-out.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::html;
use registry_core::hash::sha256_hex;
use serde::Deserialize;

use crate::layout::bare;
use crate::pages::{Posted, TokenForm};
use crate::throttle::Client;
use crate::{ClientAddr, Console, Ctx, UiError, see_other, session};

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

/// A refused sign-in: the same page and status whatever was wrong with the key.
fn refused(c: &Console, client: Client) -> Response {
    c.0.throttle.failed(client);
    sign_in_page(StatusCode::UNAUTHORIZED, Some("That key was refused."))
}

pub async fn submit(
    State(c): State<Console>,
    ClientAddr(client): ClientAddr,
    headers: HeaderMap,
    Posted(f): Posted<SignInForm>,
) -> Result<Response, UiError> {
    // No session yet, so no token: a sign-in posted from another site is refused by origin.
    if !session::same_origin(&headers) {
        return Err(UiError::forbidden("cross-site request refused"));
    }
    // A client over its failed sign-ins is refused before its key is looked at.
    if let Err(wait) = c.0.throttle.check(client) {
        let mut r = UiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "TOO_MANY_REQUESTS",
            "too many failed sign-ins from this address; try again later",
        )
        .into_response();
        r.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(wait.as_secs().max(1)),
        );
        return Ok(r);
    }
    let key = f.key.trim();
    if key.is_empty() || key.len() > 512 {
        return Ok(refused(&c, client));
    }
    let hash = sha256_hex(key);
    match c.resolve(hash.clone()).await? {
        None => Ok(refused(&c, client)),
        Some(p) => {
            tracing::info!(tenant = %p.tenant, user = %p.user, "console sign-in");
            let id = c.0.sessions.open(hash).map_err(|session::Full| {
                UiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "TOO_MANY_REQUESTS",
                    "the console holds as many sessions as it keeps; try again later",
                )
            })?;
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
