//! Several registry nodes on one shared store (DESIGN §8, the scale-out form).
//!
//! The shared store keeps a change log: every asset change appends the asset's id with a
//! sequence number in the same transaction, so the log lists every change in commit order. Each
//! node's indexes are derived state that follows the log: a node applies the changes after the
//! last one it applied (re-indexing the asset from the store, or removing it), then reports
//! how far it got and that it is alive. A deletion is complete when every live node has applied
//! it. Jobs that act on the shared store take a lock of the store, so each runs once across
//! nodes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::asset::AssetId;
use crate::error::CoreResult;

/// One entry of the change log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub seq: i64,
    pub asset_id: AssetId,
    /// The node whose write made the change (it applied the change to its own indexes then).
    pub node: Option<String>,
}

/// A node that follows the log, as it last reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    pub node: String,
    /// Every change up to this sequence number is in the node's indexes.
    pub applied_seq: i64,
    pub seen_at: DateTime<Utc>,
    pub started_at: DateTime<Utc>,
}

/// Whether a node had applied a deletion when its receipt was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeReach {
    pub node: String,
    pub applied: bool,
    pub applied_seq: i64,
}

/// Held while a job runs; dropping it releases the lock.
pub trait JobLock: Send {}

/// The change log of a store that several nodes share, and this node's place in it.
///
/// Invariants: sequence numbers grow in commit order (no change commits with a number below
/// one already visible), so a follower that applied everything up to `n` never misses a
/// change below `n`; the log holds asset ids only, never content.
pub trait Cluster: Send + Sync {
    /// This node's name, stable for its data directory.
    fn node_id(&self) -> &str;
    /// Changes with `seq > after`, oldest first, at most `limit`.
    fn changes_after(&self, after: i64, limit: usize) -> CoreResult<Vec<Change>>;
    /// The newest sequence number (0: none yet).
    fn head_seq(&self) -> CoreResult<i64>;
    /// The lowest sequence number a follower may still read from: changes at or below it may
    /// have been pruned, so a node that applied less must rebuild from the store.
    fn pruned_through(&self) -> CoreResult<i64>;
    /// Where this node's indexes are in the log (`None`: it never followed it).
    fn applied(&self) -> CoreResult<Option<i64>>;
    /// Records that this node applied every change up to `seq` and is alive.
    fn report_applied(&self, seq: i64) -> CoreResult<()>;
    /// Nodes that reported within `live_within`.
    fn live_nodes(&self, live_within: std::time::Duration) -> CoreResult<Vec<NodeState>>;
    /// Drops log entries every node seen within `live_within` has applied (a node that comes
    /// back after that rebuilds from the store). Returns how many went.
    fn prune(&self, live_within: std::time::Duration) -> CoreResult<u64>;
    /// Takes the cluster-wide lock of job `name` if no node holds it.
    fn try_lock_job(&self, name: &str) -> CoreResult<Option<Box<dyn JobLock>>>;
}
