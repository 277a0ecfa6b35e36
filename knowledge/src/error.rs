//! The knowledge crate's error, with the stable code each variant answers with.

use registry_core::{CoreError, ErrorCode, FieldError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{message}")]
    Validation {
        field: &'static str,
        message: String,
    },
    #[error("document is {size} bytes, more than the limit of {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("{field} is {len} characters; at most {limit} are accepted")]
    TextTooLong {
        field: &'static str,
        len: usize,
        limit: usize,
    },
    #[error("the document cuts into more than {limit} chunks")]
    TooManyChunks { limit: usize },
    #[error("content is not valid UTF-8 (first bad byte at offset {offset})")]
    InvalidUtf8 { offset: usize },
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("conflict: {0}")]
    Conflict(String),
    #[error(transparent)]
    Core(#[from] CoreError),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn validation(field: &'static str, message: impl Into<String>) -> Self {
        Error::Validation {
            field,
            message: message.into(),
        }
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Validation { .. } | Error::InvalidUtf8 { .. } => ErrorCode::ValidationFailed,
            Error::TooLarge { .. } | Error::TextTooLong { .. } | Error::TooManyChunks { .. } => {
                ErrorCode::PayloadTooLarge
            }
            Error::Forbidden(_) => ErrorCode::Forbidden,
            Error::NotFound(_) => ErrorCode::NotFound,
            Error::Conflict(_) => ErrorCode::Conflict,
            Error::Core(e) => e.code(),
        }
    }

    pub fn details(&self) -> serde_json::Value {
        match self {
            Error::Validation { field, .. } => FieldError::new(*field).into(),
            Error::TooLarge { size, limit } => FieldError::new("content")
                .with("size", size)
                .limit(*limit)
                .into(),
            Error::TextTooLong { field, len, limit } => FieldError::new(*field)
                .reason(registry_core::FieldReason::TooLarge)
                .len(*len)
                .limit(*limit)
                .into(),
            Error::TooManyChunks { limit } => {
                FieldError::new("content").with("max_chunks", limit).into()
            }
            Error::InvalidUtf8 { offset } => {
                FieldError::new("content").with("offset", offset).into()
            }
            Error::Core(e) => e.details(),
            _ => serde_json::Value::Null,
        }
    }
}

impl From<Error> for CoreError {
    fn from(e: Error) -> Self {
        match e {
            Error::Core(c) => c,
            other => CoreError::Coded {
                code: other.code(),
                details: other.details(),
                message: other.to_string(),
            },
        }
    }
}
