//! Request extractors: JSON bodies whose every rejection is a coded error, and the
//! authenticated principal behind a bearer key.

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::HeaderMap;
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
        if !json_content_type(req.headers()) {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "expected Content-Type: application/json",
            ));
        }
        let bytes =
            Bytes::from_request(req, state)
                .await
                .map_err(|rej| match rej.status().as_u16() {
                    413 => ApiError::new(ErrorCode::PayloadTooLarge, "request body is too large"),
                    _ => ApiError::new(ErrorCode::BadRequest, rej.body_text()),
                })?;
        parse_body(&bytes).map(ApiJson)
    }
}

fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(ct) = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Reads a JSON body as `T`. A body that is not JSON answers 400 `BAD_REQUEST` with the line
/// and column; a body of the wrong shape answers 422 `VALIDATION_FAILED` naming the field by
/// its JSON path (`details.field`, e.g. `filters.min_trust` or `memories[2].class`) and why
/// (`details.reason`: `missing`, `unknown_field`, `unknown_variant`, `invalid_type`,
/// `invalid_value`, `invalid_length`, `invalid`).
pub fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut *de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if !matches!(inner.classify(), serde_json::error::Category::Data) {
            return not_json(&inner);
        }
        let text = inner.to_string();
        let (field, reason) = field_and_reason(&path, &text);
        let field = if field.is_empty() {
            "body".to_string()
        } else {
            field
        };
        ApiError::validation(format!("invalid body at {field}: {text}"))
            .with_details(serde_json::json!({ "field": field, "reason": reason }))
    })?;
    de.end().map_err(|e| not_json(&e))?;
    Ok(value)
}

fn not_json(e: &serde_json::Error) -> ApiError {
    ApiError::new(ErrorCode::BadRequest, format!("the body is not JSON: {e}")).with_details(
        serde_json::json!({ "reason": "invalid_json", "line": e.line(), "column": e.column() }),
    )
}

/// The field a serde data error is about, and a stable word for why. serde reports a missing
/// or unknown field at its parent, naming the field in backquotes; the path is then completed.
fn field_and_reason(path: &str, text: &str) -> (String, &'static str) {
    let path = if path == "." { "" } else { path };
    let named = || text.split('`').nth(1).unwrap_or("").to_string();
    let join = |name: String| match (path, name.as_str()) {
        (p, "") => p.to_string(),
        ("", n) => n.to_string(),
        (p, n) => format!("{p}.{n}"),
    };
    if text.starts_with("missing field") {
        (join(named()), "missing")
    } else if text.starts_with("unknown field") {
        (join(named()), "unknown_field")
    } else if text.starts_with("unknown variant") {
        (path.to_string(), "unknown_variant")
    } else if text.starts_with("invalid type") {
        (path.to_string(), "invalid_type")
    } else if text.starts_with("invalid length") {
        (path.to_string(), "invalid_length")
    } else if text.starts_with("invalid value") {
        (path.to_string(), "invalid_value")
    } else {
        (path.to_string(), "invalid")
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
    let rec = store
        .find_key(&sha256_hex(key))?
        .filter(|r| r.revoked_at.is_none())
        .ok_or_else(ApiError::unauthenticated)?;
    Ok(Principal {
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
    })
}
