//! Following the change log of a store several nodes share (DESIGN §8): this node's text and
//! vector indexes are derived state, brought up to date from the log. The node that made a
//! write indexed it at once (read your writes); every other node applies it here, by re-reading
//! the asset from the store: a servable head is (re-)indexed, anything else (revoked, purged,
//! superseded) is removed, and after a purge the indexes are compacted so that no segment of
//! this node's data directory keeps it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use registry_core::asset::{AssetId, AssetKind, AssetStatus};
use registry_core::cluster::{Cluster, NodeReach};
use registry_core::deletion::{Receipt, ReceiptStatus};
use serde::Serialize;

use crate::{Result, Services};

/// How the nodes of one store follow each other.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// A node that has not reported within this is no longer live.
    pub live_within: Duration,
    /// How long a purge waits for every live node to apply it.
    pub purge_propagation: Duration,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            live_within: Duration::from_secs(15),
            purge_propagation: Duration::from_secs(30),
        }
    }
}

/// What one pass over the log did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct FollowReport {
    /// Log entries read (this node's own included).
    pub changes: usize,
    pub indexed: usize,
    pub removed: usize,
    /// Where this node's indexes are in the log now.
    pub applied_seq: i64,
}

/// Changes read per round trip.
const BATCH: usize = 500;

fn memory_served(s: AssetStatus) -> bool {
    matches!(s, AssetStatus::Active | AssetStatus::Confirmed)
}

impl Services {
    fn cluster(&self) -> Option<&dyn Cluster> {
        self.backends.store.cluster()
    }

    /// Brings this node's indexes to the head of the log: from where it stopped, or, when it
    /// never followed this store or the log was pruned past it, by rebuilding them from the
    /// store. Returns `None` when the store is not shared.
    pub fn catch_up(&self) -> Result<Option<FollowReport>> {
        let Some(c) = self.cluster() else {
            return Ok(None);
        };
        let applied = c.applied()?;
        let pruned = c.pruned_through()?;
        if applied.is_none_or(|a| a < pruned) {
            // Changes committed while rebuilding are applied again afterwards. A shared vector
            // index holds every node's vectors already: only the text index is this node's.
            let head = c.head_seq()?;
            let n = if self.backends.vectors.shared() {
                self.rebuild_text_index()?
            } else {
                self.rebuild_indexes()?
            };
            c.report_applied(head)?;
            tracing::info!(
                entries = n,
                head,
                "rebuilt this node's indexes from the store"
            );
        }
        self.follow_once().map(Some)
    }

    /// Re-writes every index entry of this node from the store (memories and chunks embedded
    /// again, skills' discover entries).
    pub fn rebuild_indexes(&self) -> Result<usize> {
        let memories = self
            .backends
            .store
            .find(&registry_core::store::AssetQuery {
                kind: Some(AssetKind::Memory),
                heads_only: true,
                ..Default::default()
            })?;
        let mut n = self.memory.reindex(&memories)?;
        n += self.knowledge.reindex()?;
        n += self.skills.reindex()?;
        self.backends.text.flush()?;
        Ok(n)
    }

    /// Applies the log entries after this node's position to its indexes and reports the new
    /// position (which is also this node's sign of life).
    pub fn follow_once(&self) -> Result<FollowReport> {
        let Some(c) = self.cluster() else {
            return Ok(FollowReport::default());
        };
        let mut report = FollowReport {
            applied_seq: c.applied()?.unwrap_or(0),
            ..Default::default()
        };
        loop {
            let batch = c.changes_after(report.applied_seq, BATCH)?;
            let Some(last) = batch.last() else { break };
            let last = last.seq;
            let ids: BTreeSet<AssetId> = batch
                .iter()
                .filter(|ch| ch.node.as_deref() != Some(c.node_id()))
                .map(|ch| ch.asset_id.clone())
                .collect();
            report.changes += batch.len();
            let (indexed, removed) = self.apply_changes(&ids)?;
            report.indexed += indexed;
            report.removed += removed;
            report.applied_seq = last;
            if batch.len() < BATCH {
                break;
            }
        }
        c.report_applied(report.applied_seq)?;
        Ok(report)
    }

    /// Re-reads each asset and makes this node's indexes agree with it.
    fn apply_changes(&self, ids: &BTreeSet<AssetId>) -> Result<(usize, usize)> {
        if ids.is_empty() {
            return Ok((0, 0));
        }
        let store = &self.backends.store;
        let (mut memories, mut chunks, mut remove) = (vec![], vec![], vec![]);
        let (mut skills, mut purged) = (false, false);
        for id in ids {
            let Some(r) = store.get(id)? else {
                purged = true;
                remove.push(id.clone());
                continue;
            };
            match r.meta.kind {
                AssetKind::Memory if memory_served(r.meta.status) => memories.push(r),
                AssetKind::Chunk if r.meta.status.is_servable() => chunks.push(id.clone()),
                AssetKind::SkillVersion => skills = true,
                _ => remove.push(id.clone()),
            }
        }
        // A shared vector index was written by the node that took each change (and had the
        // removals applied by it): only this node's text index follows here, and nothing is
        // embedded twice.
        let shared = self.backends.vectors.shared();
        if !remove.is_empty() {
            if shared {
                self.backends.text.delete(&remove)?;
            } else {
                self.search.remove(&remove)?;
            }
        }
        let mut indexed = if shared {
            self.memory.reindex_text(&memories)?
        } else {
            self.memory.reindex(&memories)?
        };
        if !chunks.is_empty() {
            indexed += if shared {
                self.knowledge.reindex_text_only(chunks)?
            } else {
                self.knowledge.reindex_only(Some(chunks))?
            };
        }
        if skills {
            indexed += if shared {
                self.skills.reindex_text()?
            } else {
                self.skills.reindex()?
            };
        }
        self.backends.text.flush()?;
        if purged {
            // No segment or page of this node's indexes may keep what was purged.
            self.backends.text.compact()?;
            if !shared {
                self.backends.vectors.compact()?;
            }
        }
        Ok((indexed, remove.len()))
    }
}

/// After a purge on a shared store: waits (up to `purge_propagation`) until every live node has
/// applied the log up to now (each node's follower reports it), and records in the receipt
/// which had. A receipt that some live node has not applied stays in progress; the purge job
/// looks again (`Deletions::resume_unfinished`).
pub(crate) fn settle_nodes(
    store: &dyn registry_core::store::Store,
    opts: &ClusterOptions,
    r: &mut Receipt,
) -> registry_core::CoreResult<()> {
    let Some(c) = store.cluster() else {
        return Ok(());
    };
    if r.level_reached < registry_core::deletion::DeletionLevel::Purged {
        return Ok(());
    }
    let head = c.head_seq()?;
    let deadline = Instant::now() + opts.purge_propagation;
    loop {
        let nodes = c.live_nodes(opts.live_within)?;
        let all = nodes.iter().all(|n| n.applied_seq >= head);
        if all || Instant::now() >= deadline {
            r.nodes = nodes
                .iter()
                .map(|n| NodeReach {
                    node: n.node.clone(),
                    applied: n.applied_seq >= head,
                    applied_seq: n.applied_seq,
                })
                .collect();
            if !all {
                r.status = ReceiptStatus::InProgress;
                r.finished_at = None;
            }
            r.updated_at = chrono::Utc::now();
            return store.put_receipt(r);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
