//! The HTTP error body: `{"error": {"code", "message", "details"}}`, with the status taken
//! from the one code table in `registry_core::ErrorCode`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use registry_core::{CoreError, ErrorCode};
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub details: serde_json::Value,
}

pub type ApiResult<T> = Result<T, ApiError>;

/// Wire form of an error.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorInner,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorInner {
    /// Stable code, e.g. `NOT_FOUND`.
    pub code: String,
    pub message: String,
    /// What the code needs said: for a validation failure, `field` (the JSON path) and
    /// `reason`; for an internal error, `request_id`. Null when there is nothing to add.
    #[schema(value_type = Option<HashMap<String, serde_json::Value>>)]
    pub details: serde_json::Value,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            details: serde_json::Value::Null,
        }
    }

    pub fn with_details(mut self, details: impl Into<serde_json::Value>) -> Self {
        self.details = field_reason(self.code, details.into());
        self
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, what)
    }

    pub fn forbidden(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, what)
    }

    pub fn validation(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::ValidationFailed, what)
    }

    pub fn unauthenticated() -> Self {
        Self::new(
            ErrorCode::Unauthenticated,
            "a valid API key is required: Authorization: Bearer <key>",
        )
    }

    /// An internal failure: the cause goes to the log with the request id; the caller gets
    /// the stable code, a generic message and the request id, never backend text.
    pub fn internal(e: impl std::fmt::Display) -> Self {
        let request_id = crate::request::current().map(|r| r.id).unwrap_or_default();
        tracing::error!(error = %e, request_id = %request_id, "internal error");
        ApiError {
            code: ErrorCode::Internal,
            message: format!(
                "internal error (request {request_id}); the cause is in the server log"
            ),
            details: serde_json::json!({ "request_id": request_id }),
        }
    }
}

/// A validation failure that names its field always says why (`details.reason`), so a client
/// can branch on `{field, reason}` alone; checks that only know the value was refused say
/// `invalid`.
fn field_reason(code: ErrorCode, mut details: serde_json::Value) -> serde_json::Value {
    if code == ErrorCode::ValidationFailed
        && let Some(m) = details.as_object_mut()
        && m.contains_key("field")
        && !m.contains_key("reason")
    {
        m.insert(
            "reason".into(),
            registry_core::FieldReason::Invalid.as_str().into(),
        );
    }
    details
}

impl From<CoreError> for ApiError {
    fn from(e: CoreError) -> Self {
        if let CoreError::Backend { .. } = &e {
            return ApiError::internal(e);
        }
        ApiError {
            code: e.code(),
            message: e.to_string(),
            details: field_reason(e.code(), e.details()),
        }
    }
}

/// A domain's coded error: internal ones are logged and answered generically.
macro_rules! from_coded {
    ($($t:ty),*) => {$(
        impl From<$t> for ApiError {
            fn from(e: $t) -> Self {
                if e.code == ErrorCode::Internal {
                    return ApiError::internal(e.message);
                }
                ApiError {
                    code: e.code,
                    message: e.message,
                    details: field_reason(e.code, e.details),
                }
            }
        }
    )*};
}

// `registry_services::Error` is `registry_context::Error`.
from_coded!(registry_skills::Error, registry_context::Error);

impl From<registry_memory::Error> for ApiError {
    fn from(e: registry_memory::Error) -> Self {
        CoreError::from(e).into()
    }
}

impl From<registry_knowledge::Error> for ApiError {
    fn from(e: registry_knowledge::Error) -> Self {
        CoreError::from(e).into()
    }
}

impl From<tokio::task::JoinError> for ApiError {
    fn from(e: tokio::task::JoinError) -> Self {
        ApiError::internal(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = ErrorBody {
            error: ErrorInner {
                code: self.code.as_str().to_string(),
                message: self.message,
                details: self.details,
            },
        };
        (status, Json(body)).into_response()
    }
}
