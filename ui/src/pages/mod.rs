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
