//! The one table of stable error codes, and the core's error type.
//!
//! A code is a contract with callers: tests assert codes, never message text. Every code appears
//! once in [`ErrorCode::ALL`] with its HTTP status, so the server maps errors without knowing
//! where they came from.

use serde::Serialize;

/// Stable, machine-readable error codes. The wire form is the SCREAMING_SNAKE name.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, strum::IntoStaticStr, strum::EnumIter,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    Unauthenticated,
    Forbidden,
    NotFound,
    ValidationFailed,
    BadRequest,
    Conflict,
    InvalidTransition,
    PayloadTooLarge,
    UnsupportedMediaType,
    WriteGateRejected,
    IdempotencyKeyReused,
    FixedZoneOverBudget,
    ModelUnavailable,
    ConfigInvalid,
    Internal,
    MethodNotAllowed,
    RequestTimeout,
    TooManyRequests,
    /// A skill version whose supply-chain scan failed cannot be approved or promoted until a
    /// platform principal overrides the scan.
    ScanFailed,
    /// Promotion without the evidence Test rests on (`details.reason` says which is missing).
    TestEvidenceMissing,
    /// A context manifest stored before requests were kept with manifests cannot be replayed.
    ReplayUnavailable,
    /// A memory that may not become a skill draft (not procedural, not confirmed and without
    /// enough helpful feedback, or with harmful feedback); `details.reason` says which.
    MemoryNotEligible,
}

impl ErrorCode {
    /// Every code, each once, with its HTTP status.
    pub const ALL: &'static [(ErrorCode, u16)] = &[
        (ErrorCode::Unauthenticated, 401),
        (ErrorCode::Forbidden, 403),
        (ErrorCode::NotFound, 404),
        (ErrorCode::ValidationFailed, 422),
        (ErrorCode::BadRequest, 400),
        (ErrorCode::Conflict, 409),
        (ErrorCode::InvalidTransition, 409),
        (ErrorCode::PayloadTooLarge, 413),
        (ErrorCode::UnsupportedMediaType, 415),
        (ErrorCode::WriteGateRejected, 422),
        (ErrorCode::IdempotencyKeyReused, 422),
        (ErrorCode::FixedZoneOverBudget, 422),
        (ErrorCode::ModelUnavailable, 503),
        (ErrorCode::ConfigInvalid, 500),
        (ErrorCode::Internal, 500),
        (ErrorCode::MethodNotAllowed, 405),
        (ErrorCode::RequestTimeout, 408),
        (ErrorCode::TooManyRequests, 429),
        (ErrorCode::ScanFailed, 409),
        (ErrorCode::TestEvidenceMissing, 409),
        (ErrorCode::ReplayUnavailable, 409),
        (ErrorCode::MemoryNotEligible, 422),
    ];

    pub fn http_status(self) -> u16 {
        Self::ALL
            .iter()
            .find(|(c, _)| *c == self)
            .map(|(_, s)| *s)
            .unwrap_or(500)
    }

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a field (or a request) was refused: the stable snake_case code an error's
/// `details.reason` carries. Every code the server answers is a variant here, so a client can
/// match them all and a new one is a reviewed change of this list.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FieldReason {
    /// Of the right type but not of the allowed form.
    Invalid,
    /// The body is not JSON at all.
    InvalidJson,
    /// A JSON value of another type than the field's.
    InvalidType,
    /// A value outside the field's enumeration or rules.
    InvalidValue,
    /// Too many or too few items or characters.
    InvalidLength,
    /// A required field is absent.
    Missing,
    /// A text field that must say something is blank.
    Empty,
    /// A field the body does not have.
    UnknownField,
    /// A variant the enumeration does not have.
    UnknownVariant,
    /// Names something that does not exist (a declared test, a parameter).
    Unknown,
    /// Over a documented size in bytes.
    TooLarge,
    /// Over a documented count.
    TooMany,
    /// Over a documented limit (with `limit`).
    Limit,
    /// A quota of the tenant or key is used up.
    LimitExceeded,
    /// A number outside its range.
    OutOfRange,
    /// Holds a credential, which is never stored.
    Secret,
    /// Holds a NUL character, which no text column keeps.
    NulCharacter,
    /// A digest that does not match the content.
    DigestMismatch,
    /// A run id already used for other results.
    RunIdReused,
    /// A webhook host that does not resolve.
    Unresolvable,
    /// A webhook host on an address webhooks may not reach.
    ForbiddenTarget,
    /// A name and version a release already holds.
    VersionHeldByRelease,
    /// A memory that is not procedural (a skill draft is made from procedures).
    NotProcedural,
    /// A memory not yet confirmed by use.
    NotConfirmed,
    /// A memory with harmful feedback.
    HarmfulFeedback,
    /// A memory in a private scope.
    PrivateScope,
    /// A memory restricted to a purpose.
    PurposeRestricted,
    /// A memory above the sensitivity a skill may carry.
    Sensitivity,
    /// Memories from more than one project.
    MixedProjects,
    /// A manifest kept without its request, which cannot be replayed.
    NoStoredRequest,
}

impl FieldReason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What was wrong with one field of a request: the `details` of a validation error, one shape
/// at every door (HTTP, MCP, console).
///
/// `field` is the JSON path in the body (`memories[2].content`), or a query parameter, path
/// segment or header name, with `in` saying which. Keys are left out when absent, so each
/// refusal answers exactly the keys it documents.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldError {
    pub field: String,
    /// Why, as a stable code (see [`FieldReason`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<FieldReason>,
    /// Where the field is when not in the body: `query` or `path`.
    #[serde(rename = "in", skip_serializing_if = "Option::is_none")]
    pub location: Option<&'static str>,
    /// The size found, in the unit of the limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub len: Option<u64>,
    /// The documented maximum the field went over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Keys particular to one refusal (`findings`, `memory_id`, `current_version`, …).
    #[serde(flatten)]
    pub more: serde_json::Map<String, serde_json::Value>,
}

impl FieldError {
    pub fn new(field: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            reason: None,
            location: None,
            len: None,
            limit: None,
            more: serde_json::Map::new(),
        }
    }

    pub fn reason(mut self, r: FieldReason) -> Self {
        self.reason = Some(r);
        self
    }

    /// The field is a query parameter (`"query"`) or a path segment (`"path"`).
    pub fn located_in(mut self, place: &'static str) -> Self {
        self.location = Some(place);
        self
    }

    pub fn len(mut self, n: impl TryInto<u64>) -> Self {
        self.len = Some(n.try_into().unwrap_or(u64::MAX));
        self
    }

    pub fn limit(mut self, n: impl TryInto<u64>) -> Self {
        self.limit = Some(n.try_into().unwrap_or(u64::MAX));
        self
    }

    /// Adds a key of this refusal's own.
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        let v = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
        self.more.insert(key.to_string(), v);
        self
    }
}

impl From<FieldError> for serde_json::Value {
    fn from(e: FieldError) -> serde_json::Value {
        serde_json::to_value(e).expect("a field error serialises")
    }
}

/// The core's error. Backends wrap their own failures as [`CoreError::Backend`].
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("validation failed: {message}")]
    Validation {
        message: String,
        details: serde_json::Value,
    },
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("invalid transition from {from} ({action}); allowed: {allowed:?}")]
    InvalidTransition {
        from: String,
        action: String,
        allowed: Vec<String>,
    },
    /// The request's deadline passed before the work committed anything; nothing was written.
    #[error("the request's time limit passed before anything was committed")]
    DeadlineExceeded,
    /// A domain's own refusal, already mapped onto the code table.
    #[error("{message}")]
    Coded {
        code: ErrorCode,
        message: String,
        details: serde_json::Value,
    },
    #[error("{store} backend error: {message}")]
    Backend {
        store: &'static str,
        message: String,
    },
}

pub type CoreResult<T> = Result<T, CoreError>;

impl CoreError {
    pub fn validation(message: impl Into<String>) -> Self {
        CoreError::Validation {
            message: message.into(),
            details: serde_json::Value::Null,
        }
    }

    pub fn validation_with(
        message: impl Into<String>,
        details: impl Into<serde_json::Value>,
    ) -> Self {
        CoreError::Validation {
            message: message.into(),
            details: details.into(),
        }
    }

    pub fn backend(store: &'static str, err: impl std::fmt::Display) -> Self {
        CoreError::Backend {
            store,
            message: err.to_string(),
        }
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            CoreError::NotFound(_) => ErrorCode::NotFound,
            CoreError::Forbidden(_) => ErrorCode::Forbidden,
            CoreError::Validation { .. } => ErrorCode::ValidationFailed,
            CoreError::Conflict(_) => ErrorCode::Conflict,
            CoreError::InvalidTransition { .. } => ErrorCode::InvalidTransition,
            CoreError::DeadlineExceeded => ErrorCode::RequestTimeout,
            CoreError::Coded { code, .. } => *code,
            CoreError::Backend { .. } => ErrorCode::Internal,
        }
    }

    /// Machine-readable details for the error body.
    pub fn details(&self) -> serde_json::Value {
        match self {
            CoreError::Validation { details, .. } => details.clone(),
            CoreError::InvalidTransition {
                from,
                action,
                allowed,
            } => serde_json::json!({
                "state": from, "action": action, "allowed_transitions": allowed
            }),
            CoreError::Coded { details, .. } => details.clone(),
            _ => serde_json::Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_listed_once_and_names_match_serde() {
        let mut seen = std::collections::HashSet::new();
        for (code, status) in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "{code} listed twice");
            assert!((400..600).contains(status));
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::String(code.as_str().to_string())
            );
        }
        assert_eq!(ErrorCode::Unauthenticated.http_status(), 401);
        assert_eq!(ErrorCode::PayloadTooLarge.http_status(), 413);
    }

    #[test]
    fn a_field_error_answers_only_the_keys_it_has() {
        use serde_json::{Value, json};
        assert_eq!(
            Value::from(FieldError::new("query")),
            json!({"field": "query"})
        );
        assert_eq!(
            Value::from(
                FieldError::new("note")
                    .reason(FieldReason::TooLarge)
                    .len(9)
                    .limit(8)
            ),
            json!({"field": "note", "reason": "too_large", "len": 9, "limit": 8})
        );
        assert_eq!(
            Value::from(
                FieldError::new("after")
                    .reason(FieldReason::Invalid)
                    .located_in("query")
            ),
            json!({"field": "after", "reason": "invalid", "in": "query"})
        );
        assert_eq!(
            Value::from(FieldError::new("version").with("current_version", 3)),
            json!({"field": "version", "current_version": 3})
        );
    }
}
