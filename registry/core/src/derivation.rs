//! The derivation graph: parent → child edges, with the relation and the store that holds the
//! child. Deletion walks these edges so that it reaches every copy, index entry and summary.

use serde::{Deserialize, Serialize};

use crate::asset::AssetId;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Relation {
    /// A chunk cut from a document.
    ChunkOf,
    /// An index entry (text or vector) made from an asset.
    IndexedAs,
    /// A consolidated memory built from raw log entries.
    ConsolidatedFrom,
    /// A summary of several parents.
    SummaryOf,
    /// A new version that replaces an earlier asset.
    Supersedes,
    /// A skill version or evaluation case that cites a reference.
    Cites,
    /// A reported run of a skill version (deleted with it).
    RunOf,
    /// Something a task recorded while it ran (an artifact's blob).
    Produced,
}

impl Relation {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        use Relation::*;
        [
            ChunkOf,
            IndexedAs,
            ConsolidatedFrom,
            SummaryOf,
            Supersedes,
            Cites,
            RunOf,
            Produced,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// Where a child lives.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ChildStore {
    Assets,
    TextIndex,
    VectorIndex,
    Blobs,
}

impl ChildStore {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        use ChildStore::*;
        [Assets, TextIndex, VectorIndex, Blobs]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DerivationEdge {
    pub parent: AssetId,
    pub child: AssetId,
    pub relation: Relation,
    pub child_store: ChildStore,
}
