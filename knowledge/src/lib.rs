//! Knowledge: documents ingested as governed evidence (DESIGN §5).
//!
//! A document is an asset (kind `document`, looked up by its `source_id` within the tenant);
//! its chunks are assets (kind `chunk`) derived from it. Ingest validates, chunks and embeds
//! everything before one atomic commit, then writes both indexes. Search filters both index
//! legs by the principal's scopes and ACL keys before ranking, then drops what may not be
//! served (expired, not yet effective, superseded) and answers with evidence records, or with
//! `INSUFFICIENT_EVIDENCE` when nothing admissible and fresh clears the bar.

pub mod chunk;
pub mod error;
pub mod instruction;
pub mod model;
pub mod service;

pub use chunk::{Chunk, ChunkKind, ChunkLimits, Format, Tokens, chunk_document, slice_chars};
pub use error::{Error, Result};
pub use instruction::{InstructionFlag, detect_instructions};
pub use model::{Authority, Freshness, freshness};
pub use service::{
    DEFAULT_ALPHA, DEFAULT_MIN_SCORE, Evidence, IngestOutcome, IngestRequest, KnowledgeConfig,
    KnowledgeService, SearchAnswer, SearchRequest,
};

/// Decodes file bytes, naming the first invalid byte.
pub fn decode_utf8(bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| Error::InvalidUtf8 {
        offset: e.utf8_error().valid_up_to(),
    })
}

#[cfg(test)]
mod wire_names {
    use crate::chunk::Format;
    use crate::model::Authority;

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
        names_match_serde::<Format>();
        names_match_serde::<Authority>();
    }
}
