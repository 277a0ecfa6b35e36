//! The change feed: a projection of the audit log, not a second write path. The audit log is
//! already an outbox: append-only, sequence-numbered without gaps (writes serialise behind one
//! lock on every backend), written in the same transaction as the change it records, and
//! holding ids and hashes only. A feed event is an audit event whose action names a feed kind
//! ([`AuditAction::feed_kind`]), shown to a subscriber only when its key may see the asset at
//! delivery time (see `registry_services::feed`).
//!
//! Webhooks keep their own state beside it ([`FeedStore`]): a cursor into the log per webhook
//! and one delivery row per event sent, claimed with a lease so that each is sent once across
//! nodes.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::asset::AssetKind;
use crate::audit::{AuditAction, AuditDraft};
use crate::error::CoreResult;
use crate::scope::Scope;

/// What happened, as a subscriber names it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
pub enum FeedKind {
    #[serde(rename = "skill.version.moved")]
    #[strum(serialize = "skill.version.moved")]
    SkillVersionMoved,
    #[serde(rename = "memory.written")]
    #[strum(serialize = "memory.written")]
    MemoryWritten,
    #[serde(rename = "memory.held")]
    #[strum(serialize = "memory.held")]
    MemoryHeld,
    #[serde(rename = "memory.revoked")]
    #[strum(serialize = "memory.revoked")]
    MemoryRevoked,
    #[serde(rename = "document.ingested")]
    #[strum(serialize = "document.ingested")]
    DocumentIngested,
    #[serde(rename = "document.deleted")]
    #[strum(serialize = "document.deleted")]
    DocumentDeleted,
    #[serde(rename = "receipt.completed")]
    #[strum(serialize = "receipt.completed")]
    ReceiptCompleted,
    #[serde(rename = "task.status")]
    #[strum(serialize = "task.status")]
    TaskStatus,
}

impl FeedKind {
    /// The change-feed kind an audit action projects to. `memory.write` is split further by the
    /// gate's decision ([`kind_of`]); `deletion.revoke` is a document deletion
    /// only when a root of its receipt is a document (the projection checks).
    pub fn of(action: AuditAction) -> Option<FeedKind> {
        use AuditAction::*;
        Some(match action {
            SkillPublish | SkillRelease | SkillReview | SkillPromote | SkillScanOverride
            | SkillDeprecate | SkillYank | SkillUnyank | SkillRollback => {
                FeedKind::SkillVersionMoved
            }
            MemoryWrite | MemoryMerge | MemoryConfirm => FeedKind::MemoryWritten,
            MemoryRevoke => FeedKind::MemoryRevoked,
            KnowledgeDocumentIngest => FeedKind::DocumentIngested,
            DeletionRevoke => FeedKind::DocumentDeleted,
            DeletionComplete => FeedKind::ReceiptCompleted,
            TaskStatus => FeedKind::TaskStatus,
            // Listed, not `_`: a new action decides whether subscribers see it.
            MemorySupersede
            | MemoryFeedback
            | MemoryRetire
            | MemoryReject
            | MemoryConsolidate
            | MemoryConflictResolved
            | MemoryExpire
            | MemoryDecayReview
            | MemoryRetireProposed
            | MemoryRegenerate
            | KnowledgeDocumentSupersede
            | KnowledgeChunkCreate
            | KnowledgeChunkSupersede
            | SkillTest
            | SkillTestSelfReported
            | SkillTestWaiver
            | SkillRunReport
            | SkillObserveFlag
            | TaskCreate
            | TaskUpdate
            | TaskEventsAppend
            | TaskArtifactPut
            | TaskSummary
            | TaskCheckpoint
            | DeletionPurge
            | DeletionPurgeVersions
            | AssetReown
            | KeyCreate
            | KeyRevoke
            | WebhookCreate
            | WebhookDelete => return None,
        })
    }

    pub const ALL: [FeedKind; 8] = [
        FeedKind::SkillVersionMoved,
        FeedKind::MemoryWritten,
        FeedKind::MemoryHeld,
        FeedKind::MemoryRevoked,
        FeedKind::DocumentIngested,
        FeedKind::DocumentDeleted,
        FeedKind::ReceiptCompleted,
        FeedKind::TaskStatus,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<FeedKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether the event concerns a deletion receipt (seen by the receipt's readers) rather
    /// than a live asset (seen by whoever may see the asset).
    pub fn about_receipt(self) -> bool {
        matches!(self, FeedKind::DocumentDeleted | FeedKind::ReceiptCompleted)
    }
}

/// The gate's decisions (the reason of `memory.write`) that hold a memory for review.
const HELD_DECISIONS: [&str; 2] = ["candidate", "conflict_pending"];

/// The feed kind of an audit event, if it has one. A rejected memory write stores nothing
/// anyone could read, so it has none.
pub fn kind_of(d: &AuditDraft) -> Option<FeedKind> {
    let action = d.audit_action()?;
    let kind = FeedKind::of(action)?;
    if action == AuditAction::MemoryWrite {
        return match d.reason.as_deref() {
            Some("rejected") => None,
            Some(r) if HELD_DECISIONS.contains(&r) => Some(FeedKind::MemoryHeld),
            _ => Some(kind),
        };
    }
    Some(kind)
}

/// One event of the feed: ids, kinds, hashes and scope, never content nor the caller's text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FeedEvent {
    /// The audit event's sequence number: the feed's position (`after`, `Last-Event-ID`).
    pub seq: u64,
    pub kind: FeedKind,
    pub at: DateTime<Utc>,
    /// The audit action it projects (`skill.promote`, `memory.write`, …).
    pub action: String,
    /// The asset it concerns (for a deletion, its first root).
    pub asset_id: Option<String>,
    pub asset_kind: Option<AssetKind>,
    /// The asset's version when the event was read (absent once purged).
    pub version: Option<u32>,
    pub scope: Option<Scope>,
    pub before_hash: Option<String>,
    pub after_hash: Option<String>,
    /// The deletion receipt, for `document.deleted` and `receipt.completed`.
    pub receipt_id: Option<String>,
}

/// A registered webhook. The secret is not stored: it is derived, when signing, from the
/// server's webhook key and this record's `salt` ([`webhook_secret`]), so a copy of the
/// database alone cannot forge a signature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookRecord {
    pub id: String,
    pub tenant: String,
    /// The user of the key that registered it.
    pub owner: String,
    /// That key's id: deliveries are filtered by what this key may see, and stop when it is
    /// revoked.
    pub key_id: String,
    pub url: String,
    pub events: Vec<FeedKind>,
    pub salt: String,
    /// The last audit sequence number examined for it.
    pub cursor: u64,
    pub created_at: DateTime<Utc>,
}

/// The secret of a webhook, `whsec_` and 64 hex characters.
pub fn webhook_secret(key: &crate::audit::AuditKey, webhook_id: &str, salt: &str) -> String {
    let mac = key.mac_fields([
        b"webhook-secret-v1".as_slice(),
        webhook_id.as_bytes(),
        salt.as_bytes(),
    ]);
    format!("whsec_{mac}")
}

/// The `X-Registry-Signature` of a delivery body: `sha256=` and the hex HMAC-SHA256 of the
/// body's bytes under the webhook's secret (the whole `whsec_…` string as the key).
pub fn sign_body(secret: &str, body: &[u8]) -> String {
    use hmac::{Hmac, Mac};
    let mut m =
        <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes()).expect("any key length");
    m.update(body);
    format!("sha256={}", hex::encode(m.finalize().into_bytes()))
}

/// Where a delivery stands.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum DeliveryStatus {
    /// Waiting for its first or next attempt.
    Pending,
    /// The receiver answered 2xx.
    Delivered,
    /// Every attempt failed: in the dead-letter list until redelivered.
    Dead,
    /// Its key may no longer see the asset: not sent.
    Withheld,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Pending, Self::Delivered, Self::Dead, Self::Withheld]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// One event to send to one webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Delivery {
    pub id: String,
    pub webhook_id: String,
    pub seq: u64,
    pub kind: FeedKind,
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub next_at: DateTime<Utc>,
    /// Why the last attempt failed: `http 500`, `timeout`, `connect`, `forbidden_target`.
    pub last_error: Option<String>,
    pub updated_at: DateTime<Utc>,
}

/// Webhook state. Every node of a shared store reads the same rows: advancing a cursor is a
/// compare-and-set, and a claimed delivery is leased to one node until it settles it.
pub trait FeedStore: Send + Sync {
    /// The newest audit sequence number (0 when the log is empty).
    fn feed_head(&self) -> CoreResult<u64>;
    /// Stores a webhook and records `audit` in the same transaction.
    fn create_webhook(&self, w: &WebhookRecord, audit: AuditDraft) -> CoreResult<()>;
    fn webhook(&self, id: &str) -> CoreResult<Option<WebhookRecord>>;
    /// Every webhook (of one tenant, or all), oldest first.
    fn webhooks(&self, tenant: Option<&str>) -> CoreResult<Vec<WebhookRecord>>;
    /// Removes a webhook and its deliveries, recording `audit`; true if it existed.
    fn delete_webhook(&self, id: &str, audit: AuditDraft) -> CoreResult<bool>;
    /// Moves the webhook's cursor from `from` to `to` and stores `deliveries`, atomically; false
    /// (nothing written) when the cursor is no longer at `from` (another node moved it).
    fn advance_webhook(
        &self,
        id: &str,
        from: u64,
        to: u64,
        deliveries: &[Delivery],
    ) -> CoreResult<bool>;
    /// Leases up to `limit` pending deliveries due by `now` that no live lease holds, for
    /// `lease`; no other caller gets them until the lease ends.
    fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        lease: Duration,
        limit: usize,
    ) -> CoreResult<Vec<Delivery>>;
    /// Records the outcome of an attempt and drops the lease.
    fn settle_delivery(&self, d: &Delivery) -> CoreResult<()>;
    /// A webhook's deliveries (of one status, or all), newest first.
    fn deliveries(
        &self,
        webhook_id: &str,
        status: Option<DeliveryStatus>,
        limit: usize,
    ) -> CoreResult<Vec<Delivery>>;
    /// Puts a dead delivery back to pending, due `now`, with its attempts reset; false when
    /// there is no dead delivery `delivery_id` of that webhook.
    fn redeliver(
        &self,
        webhook_id: &str,
        delivery_id: &str,
        now: DateTime<Utc>,
    ) -> CoreResult<bool>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The actions subscribers see, against the feed's former table.
    #[test]
    fn the_feed_sees_the_actions_of_its_table() {
        use strum::IntoEnumIterator;
        let fed: Vec<(&str, FeedKind)> = AuditAction::iter()
            .filter_map(|a| Some((a.as_str(), FeedKind::of(a)?)))
            .collect();
        let moved = FeedKind::SkillVersionMoved;
        assert_eq!(
            fed,
            [
                ("memory.write", FeedKind::MemoryWritten),
                ("memory.merge", FeedKind::MemoryWritten),
                ("memory.confirm", FeedKind::MemoryWritten),
                ("memory.revoke", FeedKind::MemoryRevoked),
                ("knowledge.document.ingest", FeedKind::DocumentIngested),
                ("skill.publish", moved),
                ("skill.review", moved),
                ("skill.promote", moved),
                ("skill.scan_override", moved),
                ("skill.release", moved),
                ("skill.deprecate", moved),
                ("skill.yank", moved),
                ("skill.unyank", moved),
                ("skill.rollback", moved),
                ("task.status", FeedKind::TaskStatus),
                ("deletion.revoke", FeedKind::DocumentDeleted),
                ("deletion.complete", FeedKind::ReceiptCompleted),
            ]
        );
    }

    #[test]
    fn held_memory_writes_are_their_own_kind_and_rejections_none() {
        let w = |r: &str| AuditDraft::new("ann", AuditAction::MemoryWrite).reason(r);
        assert_eq!(kind_of(&w("accepted")), Some(FeedKind::MemoryWritten));
        assert_eq!(kind_of(&w("candidate")), Some(FeedKind::MemoryHeld));
        assert_eq!(kind_of(&w("conflict_pending")), Some(FeedKind::MemoryHeld));
        assert_eq!(kind_of(&w("rejected")), None);
        assert_eq!(
            kind_of(&AuditDraft::new("a", AuditAction::MemoryFeedback)),
            None
        );
        assert_eq!(
            kind_of(&AuditDraft::new("a", AuditAction::TaskStatus)),
            Some(FeedKind::TaskStatus)
        );
    }

    #[test]
    fn kinds_round_trip_by_name_and_serde() {
        for k in FeedKind::ALL {
            assert_eq!(FeedKind::parse(k.as_str()), Some(k));
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::json!(k.as_str())
            );
        }
    }
}
