//! One module per console page; each handler resolves the signed-in principal ([`crate::Ctx`])
//! and calls the same services, with the same principal, as the HTTP API.

pub mod audit;
pub mod context;
pub mod deletions;
pub mod derivation;
pub mod knowledge;
pub mod memory;
pub mod overview;
pub mod review;
pub mod sign_in;
pub mod skills;
pub mod tasks;

/// A POSTed form that carries only the CSRF token. A missing field reads as empty, so a forged
/// POST answers 403 rather than a parse error.
#[derive(Debug, serde::Deserialize)]
pub struct TokenForm {
    #[serde(default)]
    pub csrf: String,
}

/// Whether the request came from htmx (the answer is then a fragment).
pub fn is_htmx(headers: &axum::http::HeaderMap) -> bool {
    headers.contains_key("hx-request")
}

/// A console form. Anything that does not parse as one (no body, another content type) is
/// refused like a form without its token, 403, since no page of the console sends it.
#[derive(Debug)]
pub struct Posted<T>(pub T);

impl<T, S> axum::extract::FromRequest<S> for Posted<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = crate::UiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        axum::Form::<T>::from_request(req, state)
            .await
            .map(|axum::Form(v)| Posted(v))
            .map_err(|e| {
                crate::UiError::forbidden(format!("not a console form: {}", e.body_text()))
            })
    }
}
