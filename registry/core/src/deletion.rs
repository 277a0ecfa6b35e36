//! True deletion along the derivation graph (DESIGN §3): the receipts, levels and traits every
//! domain shares. The engine that carries a deletion out lives in `registry-services`.
//!
//! A deletion request names root assets and a target level. The engine walks every derivation
//! edge from the roots to reach all descendants, then moves them through three levels that are
//! never confused:
//!
//! 1. **revoked**: status `revoked` in the store, so no read, search hit or context use serves
//!    them (every read path checks `AssetStatus::is_servable`);
//! 2. **de-indexed**: removed from the text and vector indexes;
//! 3. **purged**: every version and edge deleted from the store (secure delete), the indexes
//!    compacted so no segment or page holds them, blobs unlinked.
//!
//! A descendant with parents outside the deletion (a summary of several records) is
//! regenerated from its remaining parents by the owning domain's [`Regenerator`], or deleted
//! when nothing is left. A child reached through a `Cites` edge (a skill version citing a
//! reference) is flagged, not deleted. Each stage is recorded in the [`Receipt`] before the next
//! begins, so a run killed midway resumes from the last finished stage and ends with the same
//! outcome. Receipts and audit events hold ids and content hashes, never content.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::asset::{AssetId, AssetKind, AssetRecord};
use crate::error::{CoreError, CoreResult, FieldError, FieldReason};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DeletionLevel {
    Revoked,
    Deindexed,
    Purged,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptStatus {
    InProgress,
    Completed,
}

/// One store reached for one asset, and how far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StoreReach {
    pub store: String,
    pub level: DeletionLevel,
    pub count: u64,
    /// How the store reached the level, when it is not the embedded default (PostgreSQL:
    /// rows deleted, then VACUUM of the touched tables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReachedAsset {
    pub id: AssetId,
    pub kind: AssetKind,
    /// How it was reached: `root`, or the relation of the edge that led here.
    pub via: String,
    /// Content hash of every version (never the content).
    pub content_hashes: Vec<String>,
    pub versions: u64,
    pub stores: Vec<StoreReach>,
    /// A summary regenerated without the deleted parents: its replacement's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regenerated_as: Option<AssetId>,
    /// When the replacement is a new version of this same asset: that version. It stays; every
    /// earlier one (each may hold a deleted parent's content) is purged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regenerated_version: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blobs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Flagged {
    /// The asset that cites a deleted one (kept, but marked).
    pub id: AssetId,
    pub cites: AssetId,
    pub relation: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReceiptCounts {
    pub assets: u64,
    pub versions: u64,
    pub text_entries: u64,
    pub vectors: u64,
    pub blobs: u64,
    pub regenerated: u64,
    pub flagged: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Receipt {
    pub id: String,
    pub tenant: Option<String>,
    pub actor: String,
    pub reason: String,
    /// What was asked: roots and target level.
    pub roots: Vec<AssetId>,
    pub target: DeletionLevel,
    pub status: ReceiptStatus,
    /// The last level every reached asset is known to have.
    pub level_reached: DeletionLevel,
    pub assets: Vec<ReachedAsset>,
    pub flagged: Vec<Flagged>,
    pub counts: ReceiptCounts,
    pub started_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Wall time of each stage of this run, in milliseconds (`plan`, `revoke`, `deindex`,
    /// `regenerate`, `purge_store`, `compact_text`, `compact_vectors`, `blobs`, `verify`); a
    /// resumed run adds to them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stage_ms: BTreeMap<String, u64>,
    /// Assets kept and given a new owner instead (a subject erasure re-owns what the subject
    /// shared with others to the tenant).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reowned: Vec<AssetId>,
    /// Several nodes on one store: whether each live node had applied the deletion to its own
    /// indexes when the receipt was written (complete only when every one had).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<crate::cluster::NodeReach>,
}

/// Durable receipts. `put` replaces the receipt with the same id atomically.
pub trait ReceiptStore: Send + Sync {
    fn put_receipt(&self, r: &Receipt) -> CoreResult<()>;
    fn get_receipt(&self, id: &str) -> CoreResult<Option<Receipt>>;
    /// Receipts not yet completed, oldest first (for resuming after a crash).
    fn unfinished_receipts(&self) -> CoreResult<Vec<Receipt>>;
    /// A tenant's receipts (`None`: the global scope's), newest first, at most `limit`.
    fn recent_receipts(&self, tenant: Option<&str>, limit: usize) -> CoreResult<Vec<Receipt>>;
}

/// Longest reason a caller gives for a deletion (kept in the receipt; the audit log keeps its
/// hash only).
pub const MAX_REASON_CHARS: usize = 200;

/// Checks a caller-given deletion reason: short, one line.
pub fn check_reason(reason: Option<String>) -> CoreResult<Option<String>> {
    match reason {
        Some(r) if r.chars().count() > MAX_REASON_CHARS || r.chars().any(char::is_control) => {
            Err(CoreError::validation_with(
                format!("reason must be at most {MAX_REASON_CHARS} characters on one line"),
                FieldError::new("reason").reason(FieldReason::Invalid),
            ))
        }
        other => Ok(other),
    }
}

/// Deletes assets and what derives from them, to a level, and answers the receipt: the
/// deletion engine over a deployment's stores, as domains call it.
pub trait Deleter: Send + Sync {
    fn delete(
        &self,
        actor: &str,
        reason: &str,
        roots: &[AssetId],
        level: DeletionLevel,
    ) -> CoreResult<Receipt>;
}

/// The owning domain rebuilds a derived asset from the parents that remain.
pub trait Regenerator: Send + Sync {
    /// A replacement for `child` built only from `remaining` parents (already committed and
    /// indexed by the implementation), or `None` when nothing useful is left.
    fn regenerate(
        &self,
        child: &AssetRecord,
        remaining: &[AssetRecord],
    ) -> CoreResult<Option<AssetId>>;
}
