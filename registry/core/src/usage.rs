//! Usage counters beside the immutable versions: how often an asset was served, when it was
//! last verified, one vote per principal, the decay weight, a pending review. They are not
//! content, so they make no new versions.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::asset::AssetId;
use crate::error::CoreResult;

/// Mutable counters of one asset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UsageStats {
    pub usage_count: u64,
    pub last_retrieved: Option<DateTime<Utc>>,
    pub last_verified: Option<DateTime<Utc>>,
    /// Distinct principals who found it helpful / harmful (one vote each, the last counts).
    pub helpful: u64,
    pub harmful: u64,
    pub decay_weight: f32,
    /// Why it waits for a reviewer while it stays served (e.g. `retire_proposed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<String>,
}

impl Default for UsageStats {
    fn default() -> Self {
        UsageStats {
            usage_count: 0,
            last_retrieved: None,
            last_verified: None,
            helpful: 0,
            harmful: 0,
            decay_weight: 1.0,
            review: None,
        }
    }
}

/// Where usage counters live. Every store backend implements it.
pub trait UsageStore: Send + Sync {
    fn stats(&self, ids: &[AssetId]) -> CoreResult<HashMap<AssetId, UsageStats>>;
    /// Counts a retrieval of each id. May be applied asynchronously (usage counters are not
    /// worth delaying an answer for: see [`Self::flush_usage`]), but is never dropped on a clean
    /// shutdown.
    fn record_retrievals(&self, ids: &[AssetId], at: DateTime<Utc>) -> CoreResult<()>;
    /// Writes buffered retrievals; true when something was written.
    fn flush_usage(&self) -> CoreResult<bool> {
        Ok(false)
    }
    /// Whether retrievals wait to be written.
    fn usage_pending(&self) -> bool {
        false
    }
    /// Records `voter`'s vote on `id`, replacing that voter's earlier one; the helpful and
    /// harmful counters are the numbers of distinct voters.
    fn vote(
        &self,
        id: &str,
        voter: &str,
        helpful: bool,
        at: DateTime<Utc>,
    ) -> CoreResult<UsageStats>;
    fn mark_verified(&self, id: &str, at: DateTime<Utc>) -> CoreResult<()>;
    fn set_weights(&self, weights: &[(AssetId, f32)]) -> CoreResult<()>;
    /// Flags `id` for a reviewer while it stays served (`None`: clears the flag).
    fn set_review(&self, id: &str, reason: Option<&str>) -> CoreResult<()>;
    /// Ids flagged for review, at most `limit`.
    fn under_review(&self, limit: usize) -> CoreResult<Vec<AssetId>>;
}
