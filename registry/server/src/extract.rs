//! Request extractors: JSON bodies whose every rejection is a coded error, and the
//! authenticated principal behind a bearer key.

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use registry_core::principal::Principal;
use registry_core::{ErrorCode, FieldError, FieldReason};
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
    // Every body is a JSON object; serde would also read a struct from an array of its fields
    // in order, which the contract does not offer.
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_some_and(|b| *b != b'{')
        && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
    {
        return Err(ApiError::validation("the body must be a JSON object")
            .with_details(FieldError::new("body").reason(FieldReason::InvalidType)));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    match serde_path_to_error::deserialize(&mut *de) {
        Ok(value) => {
            de.end().map_err(|e| not_json(&e))?;
            Ok(value)
        }
        // JSON Schema counts `430.0` as an integer and serde does not: read such a body again
        // with its integral numbers written as integers. Only then, so that a duplicate key
        // (which a `Value` would silently collapse) is still refused on the first reading.
        Err(err)
            if err
                .inner()
                .to_string()
                .starts_with("invalid type: floating point") =>
        {
            let mut v: serde_json::Value =
                serde_json::from_slice(bytes).map_err(|e| not_json(&e))?;
            integral_floats_as_integers(&mut v);
            serde_path_to_error::deserialize(v).map_err(|e| body_error(e, bytes))
        }
        Err(err) => Err(body_error(err, bytes)),
    }
}

fn integral_floats_as_integers(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0) {
                if (0.0..18_446_744_073_709_551_616.0).contains(&f) {
                    *n = (f as u64).into();
                } else if (i64::MIN as f64..0.0).contains(&f) {
                    *n = (f as i64).into();
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(integral_floats_as_integers),
        serde_json::Value::Object(m) => m.values_mut().for_each(integral_floats_as_integers),
        _ => {}
    }
}

fn body_error(err: serde_path_to_error::Error<serde_json::Error>, bytes: &[u8]) -> ApiError {
    {
        let path = err.path().to_string();
        let inner = err.into_inner();
        // serde_json reports some type errors as syntax ("expected value" for a number where an
        // enum goes): the body is not JSON only if it does not parse as JSON at all.
        if !matches!(inner.classify(), serde_json::error::Category::Data) {
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                return not_json(&e);
            }
            let field = if path == "." {
                "body".to_string()
            } else {
                path
            };
            return ApiError::validation(format!("invalid body at {field}: {inner}"))
                .with_details(FieldError::new(field).reason(FieldReason::InvalidType));
        }
        let text = inner.to_string();
        let (field, reason) = field_and_reason(&path, &text);
        let field = if field.is_empty() {
            "body".to_string()
        } else {
            field
        };
        ApiError::validation(format!("invalid body at {field}: {text}"))
            .with_details(FieldError::new(field).reason(reason))
    }
}

fn not_json(e: &serde_json::Error) -> ApiError {
    ApiError::new(ErrorCode::BadRequest, format!("the body is not JSON: {e}")).with_details(
        serde_json::json!({ "reason": FieldReason::InvalidJson, "line": e.line(), "column": e.column() }),
    )
}

/// The field a serde data error is about, and a stable word for why. serde reports a missing
/// field at its parent, naming the field in backquotes, and the path is then completed; an
/// unknown field's path already ends with it.
fn field_and_reason(path: &str, text: &str) -> (String, FieldReason) {
    let path = if path == "." { "" } else { path };
    let named = || text.split('`').nth(1).unwrap_or("").to_string();
    let join = |name: String| match (path, name.as_str()) {
        (p, "") => p.to_string(),
        ("", n) => n.to_string(),
        (p, n) if p == n || p.ends_with(&format!(".{n}")) => p.to_string(),
        (p, n) => format!("{p}.{n}"),
    };
    if text.starts_with("missing field") {
        (join(named()), FieldReason::Missing)
    } else if text.starts_with("unknown field") {
        (join(named()), FieldReason::UnknownField)
    } else if text.starts_with("unknown variant") {
        (path.to_string(), FieldReason::UnknownVariant)
    } else if text.starts_with("invalid type") {
        (path.to_string(), FieldReason::InvalidType)
    } else if text.starts_with("invalid length") {
        (path.to_string(), FieldReason::InvalidLength)
    } else if text.starts_with("invalid value") {
        (path.to_string(), FieldReason::InvalidValue)
    } else {
        (path.to_string(), FieldReason::Invalid)
    }
}

/// The rule for a retry key, one for every door (the HTTP header `Idempotency-Key`, MCP
/// `memory_write`'s `idempotency_key`): 1-200 visible ASCII characters, as the document says.
pub fn idempotency_key_ok(k: &str) -> bool {
    (1..=200).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_graphic())
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
    ApiError::validation(format!("invalid query string: {text}")).with_details(
        FieldError::new(field)
            .reason(FieldReason::Invalid)
            .located_in("query"),
    )
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
    ApiError::validation(format!("invalid path: {}", rej.body_text())).with_details(
        FieldError::new("path")
            .reason(FieldReason::Invalid)
            .located_in("path"),
    )
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
                .with_details(FieldError::new(name))),
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
        // A purpose is bound to the key the same way: the header names one the key holds.
        if let Some(purpose) = &principal.purpose
            && !principal.holds_purpose(purpose)
        {
            return Err(ApiError::forbidden(
                "this key does not hold the purpose in X-Purpose",
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

/// A count parameter (`limit`, `k`) within its documented bound: absent gives the default, 0
/// gives 1, above `max` is refused (422, naming the field), as the contract's `maximum` says.
/// As [`bounded`], for a parameter documented with `minimum: 1`: 0 is refused.
pub fn positive(
    field: &str,
    value: Option<u64>,
    default: usize,
    max: usize,
) -> Result<usize, ApiError> {
    if value == Some(0) {
        return Err(ApiError::validation(format!("{field} must be at least 1"))
            .with_details(FieldError::new(field).reason(FieldReason::InvalidValue)));
    }
    bounded(field, value, default, max)
}

/// The largest sequence number a client may name (`after`, `Last-Event-ID`): 2^53 − 1, the
/// largest integer every JSON reader holds exactly; the stores keep sequence numbers as i64.
pub const MAX_SEQ: u64 = (1 << 53) - 1;

/// A client's sequence number, refused above [`MAX_SEQ`].
pub fn seq(field: &str, value: Option<u64>) -> Result<Option<u64>, ApiError> {
    match value {
        Some(v) if v > MAX_SEQ => Err(ApiError::validation(format!(
            "{field} must be at most {MAX_SEQ}"
        ))
        .with_details(FieldError::new(field).reason(FieldReason::InvalidValue))),
        v => Ok(v),
    }
}

pub fn bounded(
    field: &str,
    value: Option<u64>,
    default: usize,
    max: usize,
) -> Result<usize, ApiError> {
    match value {
        None => Ok(default),
        Some(v) if v > max as u64 => Err(ApiError::validation(format!(
            "{field} must be at most {max}"
        ))
        .with_details(FieldError::new(field).reason(FieldReason::InvalidValue))),
        Some(v) => Ok((v as usize).max(1)),
    }
}
