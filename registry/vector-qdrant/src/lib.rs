#![doc = include_str!("../README.md")]

pub mod filter;
mod index;
pub mod test_support;

pub use filter::filter_for;
pub use index::{
    DELETED_THRESHOLD, PURGE_METHOD, QdrantOptions, QdrantVectorIndex, VACUUM_MIN_POINTS,
    WAL_SEGMENT_MIB,
};

use registry_core::CoreError;
use registry_core::asset::AssetId;

/// This crate's error: Qdrant, the local runtime, bad input and unexpected server state.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("qdrant: {0}")]
    Qdrant(#[from] qdrant_client::QdrantError),
    #[error("starting the client's runtime: {0}")]
    Runtime(std::io::Error),
    #[error("vector has dimension {got}, index has {want}")]
    Dimension { want: usize, got: usize },
    #[error("vector for {0} has a non-finite component")]
    NonFinite(AssetId),
    #[error(
        "collection {name} is not a single cosine vector space of the index's dimension: {found}"
    )]
    Collection { name: String, found: String },
    #[error("configuration: {0}")]
    Config(String),
    #[error("stored point is corrupt: {0}")]
    Corrupt(String),
}

impl Error {
    pub fn config(message: impl Into<String>) -> Self {
        Error::Config(message.into())
    }
}

pub type Result<T> = std::result::Result<T, Error>;

impl From<Error> for CoreError {
    fn from(e: Error) -> Self {
        match e {
            Error::Dimension { .. } | Error::NonFinite(_) => CoreError::validation(e.to_string()),
            other => CoreError::backend("vector-qdrant", other),
        }
    }
}
