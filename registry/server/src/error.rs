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
    #[schema(value_type = Object)]
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

    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = details;
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

    pub fn internal(e: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::Internal, e.to_string())
    }
}

impl From<CoreError> for ApiError {
    fn from(e: CoreError) -> Self {
        if let CoreError::Backend { .. } = &e {
            tracing::error!(error = %e, "backend failure");
        }
        ApiError {
            code: e.code(),
            message: e.to_string(),
            details: e.details(),
        }
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
