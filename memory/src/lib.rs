//! Memory: four classes behind a deterministic write gate, conflict states, mixed-signal
//! retrieval, and the consolidation and decay jobs (DESIGN §4).
//!
//! This crate knows only the traits of `registry-core` and the engine's [`HybridSearcher`]; the
//! server plugs in SQLite, tantivy, the vector index and the embedding model.
//!
//! [`HybridSearcher`]: registry_engine::HybridSearcher

pub mod detect;
pub mod gate;
pub mod identity;
pub mod jobs;
pub mod reason;
pub mod record;
pub mod search;
pub mod service;
pub mod temporal;
pub mod weights;

use registry_core::{CoreError, FieldError, FieldReason};

pub use reason::{Decision, Reason, ReasonCode};
pub use record::{Layer, MemoryBody, MemoryClass, MemoryStats, MemoryView, WriteRequest};
pub use service::{MemoryService, StatsStore, WriteOutcome};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("the write gate rejected the memory")]
    Rejected(Vec<Reason>),
    #[error("the idempotency key was used before with a different request")]
    IdempotencyKeyReused,
    #[error("{field} is {len} characters; at most {limit} are accepted")]
    TooLarge {
        field: &'static str,
        len: usize,
        limit: usize,
    },
    #[error("forbidden: {message}")]
    Forbidden {
        message: String,
        reasons: Vec<Reason>,
    },
    #[error("no memory {0}")]
    NotFound(String),
    #[error("{message}")]
    Invalid { message: String, field: String },
    #[error("cannot {action} a memory that is {from}")]
    Transition {
        from: String,
        action: String,
        allowed: Vec<String>,
    },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn invalid(field: &str, message: impl Into<String>) -> Error {
        Error::Invalid {
            message: message.into(),
            field: field.to_string(),
        }
    }

    /// The code of the core's table this error answers with.
    pub fn code(&self) -> registry_core::ErrorCode {
        use registry_core::ErrorCode as C;
        match self {
            Error::Core(c) => c.code(),
            Error::Rejected(_) => C::WriteGateRejected,
            Error::IdempotencyKeyReused => C::IdempotencyKeyReused,
            Error::TooLarge { .. } => C::PayloadTooLarge,
            Error::Forbidden { .. } => C::Forbidden,
            Error::NotFound(_) => C::NotFound,
            Error::Invalid { .. } => C::ValidationFailed,
            Error::Transition { .. } => C::InvalidTransition,
        }
    }

    /// Machine-readable details: the gate's reasons, the field at fault, the allowed moves.
    pub fn details(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Error::Core(c) => c.details(),
            Error::Rejected(reasons) => json!({ "decision": "rejected", "reasons": reasons }),
            Error::IdempotencyKeyReused => json!({ "header": "Idempotency-Key" }),
            Error::TooLarge { field, len, limit } => FieldError::new(*field)
                .reason(FieldReason::TooLarge)
                .len(*len)
                .limit(*limit)
                .into(),
            Error::Forbidden { reasons, .. } if !reasons.is_empty() => {
                json!({ "reasons": reasons })
            }
            Error::Forbidden { .. } | Error::NotFound(_) => serde_json::Value::Null,
            Error::Invalid { field, .. } => {
                FieldError::new(field).reason(FieldReason::Invalid).into()
            }
            Error::Transition {
                from,
                action,
                allowed,
            } => json!({ "state": from, "action": action, "allowed_transitions": allowed }),
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

#[cfg(test)]
mod wire_names {
    use crate::reason::Decision;
    use crate::record::MemoryClass;

    /// A variant's stored name (`as_str`, derived by strum) must be its serde name.
    fn names_match_serde<T>()
    where
        T: strum::IntoEnumIterator + serde::Serialize + Into<&'static str> + Copy + std::fmt::Debug,
    {
        for v in T::iter() {
            let name: &'static str = v.into();
            assert_eq!(serde_json::to_value(v).unwrap(), name, "{v:?}");
        }
    }

    #[test]
    fn stored_names_are_the_serde_names() {
        names_match_serde::<Decision>();
        names_match_serde::<MemoryClass>();
    }
}
