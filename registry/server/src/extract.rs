//! Request extractors: JSON bodies whose every rejection is a coded error, and the
//! authenticated principal behind a bearer key.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use registry_core::ErrorCode;
use registry_core::hash::sha256_hex;
use registry_core::principal::Principal;
use registry_core::store::KeyStore;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::state::AppState;

/// `Json<T>` whose rejections answer with the error table's codes.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(rej) => Err(json_rejection(rej)),
        }
    }
}

fn json_rejection(rej: JsonRejection) -> ApiError {
    let status = rej.status().as_u16();
    let text = rej.body_text();
    match (&rej, status) {
        (_, 413) => ApiError::new(ErrorCode::PayloadTooLarge, "request body is too large"),
        (JsonRejection::MissingJsonContentType(_), _) => ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "expected Content-Type: application/json",
        ),
        (JsonRejection::JsonDataError(_), _) => ApiError::new(ErrorCode::ValidationFailed, text),
        _ => ApiError::new(ErrorCode::BadRequest, text),
    }
}

/// `Query<T>` whose rejections answer with the error envelope (422 `VALIDATION_FAILED`, the
/// query string named as the field), never plain text.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(ApiQuery(v)),
            Err(rej) => Err(query_rejection(rej)),
        }
    }
}

fn query_rejection(rej: QueryRejection) -> ApiError {
    // serde_urlencoded names the parameter in its message ("... field `limit` ...").
    let text = rej.body_text();
    let field = text
        .split('`')
        .nth(1)
        .filter(|f| f.len() <= 64)
        .unwrap_or("query")
        .to_string();
    ApiError::validation(format!("invalid query string: {text}"))
        .with_details(serde_json::json!({ "field": field, "reason": "invalid", "in": "query" }))
}

/// `Path<T>` whose rejections answer with the error envelope.
#[derive(Debug, Clone, Default)]
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(ApiPath(v)),
            Err(rej) => Err(path_rejection(rej)),
        }
    }
}

fn path_rejection(rej: PathRejection) -> ApiError {
    ApiError::validation(format!("invalid path: {}", rej.body_text()))
        .with_details(serde_json::json!({ "field": "path", "reason": "invalid", "in": "path" }))
}

/// The caller, authenticated by `Authorization: Bearer <key>`. Optional context headers
/// (`X-Project`, `X-Session`, `X-Task`, `X-Purpose`) narrow the principal's position; they can
/// never widen what the key's tenant and user may see.
#[derive(Debug, Clone)]
pub struct Auth(pub Principal);

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        authenticate(parts, state, false).await.map(Auth)
    }
}

/// As [`Auth`], and also accepting `Authorization: Basic` with the key as the password, for
/// clients that cannot set a bearer header (the LlamaIndex Pathway retriever sends only what a
/// `http://any:KEY@host` URL gives it).
#[derive(Debug, Clone)]
pub struct RetrieverAuth(pub Principal);

impl FromRequestParts<AppState> for RetrieverAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        authenticate(parts, state, true).await.map(RetrieverAuth)
    }
}

fn basic_password(value: &str) -> Option<String> {
    use base64::Engine;
    let raw = value.strip_prefix("Basic ")?.trim();
    let bytes = base64::engine::general_purpose::STANDARD.decode(raw).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    text.split_once(':').map(|(_, pw)| pw.to_string())
}

async fn authenticate(
    parts: &mut Parts,
    state: &AppState,
    allow_basic: bool,
) -> Result<Principal, ApiError> {
    {
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(ApiError::unauthenticated)?;
        let key = match header.strip_prefix("Bearer ") {
            Some(k) => Some(k.trim().to_string()),
            None if allow_basic => basic_password(header),
            None => None,
        }
        .filter(|k| !k.is_empty())
        .ok_or_else(ApiError::unauthenticated)?;
        let mut principal = state.authenticate(&key).await?;
        let ctx = |name: &str| -> Result<Option<String>, ApiError> {
            match parts.headers.get(name).map(|v| v.to_str()) {
                None => Ok(None),
                Some(Ok(v)) if valid_context(v) => Ok(Some(v.to_string())),
                Some(_) => Err(ApiError::validation(format!(
                    "header {name} must be 1-128 chars of [A-Za-z0-9._@-]"
                ))
                .with_details(serde_json::json!({ "field": name }))),
            }
        };
        principal.project = ctx("x-project")?;
        principal.session = ctx("x-session")?;
        principal.task = ctx("x-task")?;
        principal.purpose = ctx("x-purpose")?;
        // A project is a boundary: the header only narrows within the key's projects, and a
        // project the key is not in answers the same as any other refusal.
        if let Some(project) = &principal.project
            && !principal.member_of(project)
        {
            return Err(ApiError::forbidden(
                "this key is not a member of the project in X-Project",
            ));
        }
        Ok(principal)
    }
}

fn valid_context(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 128
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
}

/// Looks a key up by its sha256; revoked and unknown keys both answer 401.
pub(crate) fn principal_for_key(store: &dyn KeyStore, key: &str) -> Result<Principal, ApiError> {
    principal_for_key_hash(store, &sha256_hex(key))?.ok_or_else(ApiError::unauthenticated)
}

/// The principal of the key with this sha256 (`None`: unknown or revoked). The console resolves
/// its sessions' keys through this, so both doors see the same principal.
pub fn principal_for_key_hash(
    store: &dyn KeyStore,
    key_hash: &str,
) -> Result<Option<Principal>, ApiError> {
    let Some(rec) = store.find_key(key_hash)?.filter(|r| r.revoked_at.is_none()) else {
        return Ok(None);
    };
    Ok(Some(Principal {
        tenant: rec.tenant,
        user: rec.user,
        groups: rec.groups,
        roles: rec.roles,
        platform: rec.platform,
        projects: rec.projects,
        clearance: rec.clearance,
        purpose: None,
        project: None,
        session: None,
        task: None,
    }))
}
