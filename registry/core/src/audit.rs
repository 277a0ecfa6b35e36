//! The append-only, hash-chained audit log.
//!
//! Each event's hash covers its fields and the previous event's hash, so editing, deleting or
//! reordering any row breaks the chain at that row. Events carry ids and content hashes only,
//! never content, so that erasure leaves nothing behind here that the law does not require.
//!
//! The chain is **keyed**: an event's hash is an HMAC-SHA256 under an [`AuditKey`] kept outside
//! the database, so someone who can write the database but not read the key cannot rewrite an
//! event and recompute the chain after it. Events written before a store had a key are plain
//! sha256 (`keyed: false`); once a keyed event appears, an unkeyed one after it is a break.
//! Signed [`Checkpoint`]s of the head (sequence number, hash) anchor the chain's length, so
//! deleting the newest events is detected too, back to the last checkpoint.

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use strum::{Display, EnumIter, EnumString, IntoStaticStr};

use crate::hash::sha256_fields;

/// The secret that keys the audit chain and signs its checkpoints.
#[derive(Clone, PartialEq, Eq)]
pub struct AuditKey([u8; 32]);

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditKey(..)")
    }
}

impl AuditKey {
    pub fn from_bytes(b: [u8; 32]) -> Self {
        AuditKey(b)
    }

    /// Parses 64 hex characters (surrounding whitespace ignored).
    pub fn from_hex(s: &str) -> Option<Self> {
        let v = hex::decode(s.trim()).ok()?;
        Some(AuditKey(v.try_into().ok()?))
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// HMAC-SHA256 over length-prefixed fields (as [`sha256_fields`]), lower-case hex.
    pub fn mac_fields<'a>(&self, fields: impl IntoIterator<Item = &'a [u8]>) -> String {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("any key length");
        for f in fields {
            m.update(&(f.len() as u64).to_le_bytes());
            m.update(f);
        }
        hex::encode(m.finalize().into_bytes())
    }
}

/// The hash that precedes the first event.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Every action the registry records, each with its stable dotted name.
///
/// The name is what is stored and served (`AuditDraft::action`) and what the chain's hash
/// covers, so a variant's name is never changed once released; a new action is a new variant.
/// Rows keep the text, not the variant: a row whose text no variant names (written by an older
/// release, or by hand) still reads and verifies, and [`AuditDraft::audit_action`] gives `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Display, EnumIter, EnumString, IntoStaticStr)]
pub enum AuditAction {
    // Memory: the gate's writes and the reviewers' decisions.
    /// A write through the gate; the reason is the gate's decision.
    #[strum(serialize = "memory.write")]
    MemoryWrite,
    #[strum(serialize = "memory.supersede")]
    MemorySupersede,
    #[strum(serialize = "memory.merge")]
    MemoryMerge,
    #[strum(serialize = "memory.feedback")]
    MemoryFeedback,
    #[strum(serialize = "memory.confirm")]
    MemoryConfirm,
    #[strum(serialize = "memory.retire")]
    MemoryRetire,
    #[strum(serialize = "memory.reject")]
    MemoryReject,
    #[strum(serialize = "memory.revoke")]
    MemoryRevoke,
    // Memory: the jobs and the deletion engine.
    #[strum(serialize = "memory.consolidate")]
    MemoryConsolidate,
    #[strum(serialize = "memory.conflict_resolved")]
    MemoryConflictResolved,
    #[strum(serialize = "memory.expire")]
    MemoryExpire,
    #[strum(serialize = "memory.decay_review")]
    MemoryDecayReview,
    #[strum(serialize = "memory.retire_proposed")]
    MemoryRetireProposed,
    /// A summary regenerated without a deleted parent.
    #[strum(serialize = "memory.regenerate")]
    MemoryRegenerate,
    // Knowledge.
    #[strum(serialize = "knowledge.document.ingest")]
    KnowledgeDocumentIngest,
    #[strum(serialize = "knowledge.document.supersede")]
    KnowledgeDocumentSupersede,
    #[strum(serialize = "knowledge.chunk.create")]
    KnowledgeChunkCreate,
    #[strum(serialize = "knowledge.chunk.supersede")]
    KnowledgeChunkSupersede,
    // Skills: the lifecycle of a version.
    #[strum(serialize = "skill.publish")]
    SkillPublish,
    #[strum(serialize = "skill.test")]
    SkillTest,
    #[strum(serialize = "skill.test_self_reported")]
    SkillTestSelfReported,
    #[strum(serialize = "skill.test_waiver")]
    SkillTestWaiver,
    #[strum(serialize = "skill.review")]
    SkillReview,
    #[strum(serialize = "skill.promote")]
    SkillPromote,
    #[strum(serialize = "skill.scan_override")]
    SkillScanOverride,
    #[strum(serialize = "skill.release")]
    SkillRelease,
    #[strum(serialize = "skill.deprecate")]
    SkillDeprecate,
    #[strum(serialize = "skill.yank")]
    SkillYank,
    #[strum(serialize = "skill.unyank")]
    SkillUnyank,
    #[strum(serialize = "skill.rollback")]
    SkillRollback,
    #[strum(serialize = "skill.run_report")]
    SkillRunReport,
    #[strum(serialize = "skill.observe_flag")]
    SkillObserveFlag,
    // Tasks.
    #[strum(serialize = "task.create")]
    TaskCreate,
    #[strum(serialize = "task.update")]
    TaskUpdate,
    #[strum(serialize = "task.status")]
    TaskStatus,
    #[strum(serialize = "task.events.append")]
    TaskEventsAppend,
    #[strum(serialize = "task.artifact.put")]
    TaskArtifactPut,
    #[strum(serialize = "task.summary")]
    TaskSummary,
    #[strum(serialize = "task.checkpoint")]
    TaskCheckpoint,
    // Deletion: the levels of one receipt.
    #[strum(serialize = "deletion.revoke")]
    DeletionRevoke,
    #[strum(serialize = "deletion.purge")]
    DeletionPurge,
    #[strum(serialize = "deletion.purge_versions")]
    DeletionPurgeVersions,
    #[strum(serialize = "deletion.complete")]
    DeletionComplete,
    /// An erased user's assets handed to another owner.
    #[strum(serialize = "asset.reown")]
    AssetReown,
    // Access and the change feed.
    #[strum(serialize = "key.create")]
    KeyCreate,
    #[strum(serialize = "key.revoke")]
    KeyRevoke,
    #[strum(serialize = "webhook.create")]
    WebhookCreate,
    #[strum(serialize = "webhook.delete")]
    WebhookDelete,
}

impl AuditAction {
    /// The stored and served name (`memory.write`, …).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The action a stored name denotes, if any does.
    pub fn parse(s: &str) -> Option<AuditAction> {
        s.parse().ok()
    }

    /// A step of a deletion receipt (revoke, purge, purge of old versions, completion).
    pub fn is_deletion(self) -> bool {
        matches!(
            self,
            AuditAction::DeletionRevoke
                | AuditAction::DeletionPurge
                | AuditAction::DeletionPurgeVersions
                | AuditAction::DeletionComplete
        )
    }

    /// Whether the event's `asset_id` names something other than a stored asset: a deletion
    /// receipt (a deletion's levels), a key or a webhook.
    pub fn names_no_asset(self) -> bool {
        matches!(
            self,
            AuditAction::DeletionRevoke
                | AuditAction::DeletionPurge
                | AuditAction::DeletionComplete
                | AuditAction::KeyCreate
                | AuditAction::KeyRevoke
                | AuditAction::WebhookCreate
                | AuditAction::WebhookDelete
        )
    }

    /// Something taken out of use at once: a memory, a key, or a deletion's first level.
    pub fn is_revocation(self) -> bool {
        matches!(
            self,
            AuditAction::MemoryRevoke | AuditAction::KeyRevoke | AuditAction::DeletionRevoke
        )
    }
}

impl From<AuditAction> for String {
    fn from(a: AuditAction) -> String {
        a.as_str().to_string()
    }
}

/// What a caller asks to record; the log assigns sequence, time and hashes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditDraft {
    pub actor: String,
    pub tenant: Option<String>,
    // An `AuditAction`'s name, kept as text so that any stored row reads and verifies (a plain
    // comment: a doc comment would change the served schema).
    pub action: String,
    pub asset_id: Option<String>,
    pub before_hash: Option<String>,
    pub after_hash: Option<String>,
    pub reason: Option<String>,
}

impl AuditDraft {
    pub fn new(actor: impl Into<String>, action: AuditAction) -> Self {
        AuditDraft {
            actor: actor.into(),
            tenant: None,
            action: action.into(),
            asset_id: None,
            before_hash: None,
            after_hash: None,
            reason: None,
        }
    }

    /// The action recorded, when its name is one this release knows.
    pub fn audit_action(&self) -> Option<AuditAction> {
        AuditAction::parse(&self.action)
    }

    pub fn tenant(mut self, t: impl Into<String>) -> Self {
        self.tenant = Some(t.into());
        self
    }

    /// Files the event under the tenant of the scope it concerns: `None` for the global scope,
    /// whose events every tenant's audit shows.
    pub fn in_scope(mut self, s: &crate::scope::Scope) -> Self {
        self.tenant = s.tenant.clone();
        self
    }

    pub fn asset(mut self, id: impl Into<String>) -> Self {
        self.asset_id = Some(id.into());
        self
    }

    pub fn hashes(mut self, before: Option<String>, after: Option<String>) -> Self {
        self.before_hash = before;
        self.after_hash = after;
        self
    }

    pub fn reason(mut self, r: impl Into<String>) -> Self {
        self.reason = Some(r.into());
        self
    }

    /// Refuses a draft with a NUL character in any field (see [`crate::store::refuse_nul`]).
    pub fn refuse_nul(&self) -> crate::error::CoreResult<()> {
        crate::text::refuse_nul([
            ("audit.actor", Some(self.actor.as_str())),
            ("audit.tenant", self.tenant.as_deref()),
            ("audit.action", Some(self.action.as_str())),
            ("audit.asset_id", self.asset_id.as_deref()),
            ("audit.before_hash", self.before_hash.as_deref()),
            ("audit.after_hash", self.after_hash.as_deref()),
            ("audit.reason", self.reason.as_deref()),
        ])
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditEvent {
    pub seq: u64,
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub draft: AuditDraft,
    pub prev_hash: String,
    pub hash: String,
    /// Whether `hash` is an HMAC under the store's audit key (else a plain sha256).
    #[serde(default)]
    pub keyed: bool,
}

impl AuditEvent {
    /// Seals a draft as the event after `prev_hash`, keyed when a key is given.
    pub fn seal(
        seq: u64,
        at: DateTime<Utc>,
        draft: AuditDraft,
        prev_hash: String,
        key: Option<&AuditKey>,
    ) -> Self {
        let hash = Self::compute_hash(seq, &at, &draft, &prev_hash, key);
        AuditEvent {
            seq,
            at,
            draft,
            prev_hash,
            hash,
            keyed: key.is_some(),
        }
    }

    pub fn compute_hash(
        seq: u64,
        at: &DateTime<Utc>,
        d: &AuditDraft,
        prev: &str,
        key: Option<&AuditKey>,
    ) -> String {
        let seq_s = seq.to_string();
        let at_s = crate::time::to_text(at);
        let opt = |o: &Option<String>| o.clone().unwrap_or_default();
        let fields = [
            seq_s,
            at_s,
            d.actor.clone(),
            opt(&d.tenant),
            d.action.clone(),
            opt(&d.asset_id),
            opt(&d.before_hash),
            opt(&d.after_hash),
            opt(&d.reason),
            prev.to_string(),
        ];
        let bytes = fields.iter().map(|s| s.as_bytes());
        match key {
            Some(k) => k.mac_fields(bytes),
            None => sha256_fields(bytes),
        }
    }
}

/// A signed statement of the chain's head: `count` events, the last one `seq` with `hash`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Checkpoint {
    pub seq: u64,
    pub hash: String,
    pub at: DateTime<Utc>,
    pub mac: String,
}

impl Checkpoint {
    fn fields(seq: u64, hash: &str, at: &DateTime<Utc>) -> [String; 4] {
        [
            "audit-checkpoint-v1".to_string(),
            seq.to_string(),
            hash.to_string(),
            crate::time::to_text(at),
        ]
    }

    pub fn sign(key: &AuditKey, seq: u64, hash: &str, at: DateTime<Utc>) -> Checkpoint {
        let f = Self::fields(seq, hash, &at);
        Checkpoint {
            seq,
            hash: hash.to_string(),
            at,
            mac: key.mac_fields(f.iter().map(|s| s.as_bytes())),
        }
    }

    /// Whether the signature is the key's.
    pub fn is_signed_by(&self, key: &AuditKey) -> bool {
        let f = Self::fields(self.seq, &self.hash, &self.at);
        key.mac_fields(f.iter().map(|s| s.as_bytes())) == self.mac
    }
}

/// The first place the chain breaks, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ChainBreak {
    pub seq: u64,
    pub reason: String,
}

/// Checks events one at a time, in sequence order, so a long log can be verified page by page.
#[derive(Debug, Clone)]
pub struct ChainVerifier {
    prev: String,
    expected_seq: u64,
    count: u64,
    key: Option<AuditKey>,
    keyed_seen: bool,
}

impl Default for ChainVerifier {
    fn default() -> Self {
        Self::new(None)
    }
}

impl ChainVerifier {
    /// A verifier for a chain keyed with `key` (`None`: only unkeyed events verify).
    pub fn new(key: Option<AuditKey>) -> Self {
        ChainVerifier {
            prev: GENESIS_HASH.to_string(),
            expected_seq: 1,
            count: 0,
            key,
            keyed_seen: false,
        }
    }

    pub fn push(&mut self, e: &AuditEvent) -> Result<(), ChainBreak> {
        let fail = |reason: String| Err(ChainBreak { seq: e.seq, reason });
        if e.seq != self.expected_seq {
            return fail(format!(
                "sequence gap: expected {}, found {}",
                self.expected_seq, e.seq
            ));
        }
        if e.prev_hash != self.prev {
            return fail("prev_hash does not match the previous event's hash".into());
        }
        let key = match (e.keyed, &self.key) {
            (true, Some(k)) => Some(k),
            (true, None) => return fail("a keyed event, and no audit key to check it".into()),
            (false, _) if self.keyed_seen => {
                return fail("an unkeyed event after keyed ones".into());
            }
            (false, _) => None,
        };
        if AuditEvent::compute_hash(e.seq, &e.at, &e.draft, &e.prev_hash, key) != e.hash {
            return fail("stored hash does not match the event's content".into());
        }
        self.keyed_seen |= e.keyed;
        self.prev = e.hash.clone();
        self.expected_seq += 1;
        self.count += 1;
        Ok(())
    }

    /// Events verified so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The hash of the last event verified (the genesis hash before any).
    pub fn head(&self) -> &str {
        &self.prev
    }
}

/// Walks events in sequence order and reports the first broken link.
pub fn verify_chain<I: IntoIterator<Item = AuditEvent>>(
    events: I,
    key: Option<&AuditKey>,
) -> Result<u64, ChainBreak> {
    let mut v = ChainVerifier::new(key.cloned());
    for e in events {
        v.push(&e)?;
    }
    Ok(v.count())
}

/// What a verification of a stored log found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Verification {
    pub ok: bool,
    /// Events verified (for a tenant's view: that tenant's events and the global ones).
    pub events: u64,
    /// The first broken event, if any (in a tenant's view: only when it is one of its own).
    pub broken_at: Option<u64>,
    pub reason: Option<String>,
    /// Signed checkpoints checked against the chain.
    pub checkpoints: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: u64, key: Option<&AuditKey>) -> Vec<AuditEvent> {
        let mut prev = GENESIS_HASH.to_string();
        (1..=n)
            .map(|i| {
                let e = AuditEvent::seal(
                    i,
                    Utc::now(),
                    AuditDraft::new("ann", AuditAction::MemoryWrite).asset(format!("a{i}")),
                    prev.clone(),
                    key,
                );
                prev = e.hash.clone();
                e
            })
            .collect()
    }

    /// The names as released: stored rows and the chain's hashes carry them, so none may
    /// change. Adding an action adds a line here.
    const RELEASED: [&str; 48] = [
        "memory.write",
        "memory.supersede",
        "memory.merge",
        "memory.feedback",
        "memory.confirm",
        "memory.retire",
        "memory.reject",
        "memory.revoke",
        "memory.consolidate",
        "memory.conflict_resolved",
        "memory.expire",
        "memory.decay_review",
        "memory.retire_proposed",
        "memory.regenerate",
        "knowledge.document.ingest",
        "knowledge.document.supersede",
        "knowledge.chunk.create",
        "knowledge.chunk.supersede",
        "skill.publish",
        "skill.test",
        "skill.test_self_reported",
        "skill.test_waiver",
        "skill.review",
        "skill.promote",
        "skill.scan_override",
        "skill.release",
        "skill.deprecate",
        "skill.yank",
        "skill.unyank",
        "skill.rollback",
        "skill.run_report",
        "skill.observe_flag",
        "task.create",
        "task.update",
        "task.status",
        "task.events.append",
        "task.artifact.put",
        "task.summary",
        "task.checkpoint",
        "deletion.revoke",
        "deletion.purge",
        "deletion.purge_versions",
        "deletion.complete",
        "asset.reown",
        "key.create",
        "key.revoke",
        "webhook.create",
        "webhook.delete",
    ];

    #[test]
    fn every_action_name_round_trips_is_unique_and_was_released() {
        use strum::IntoEnumIterator;
        let names: Vec<&str> = AuditAction::iter().map(AuditAction::as_str).collect();
        let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(
            unique.len(),
            names.len(),
            "a name is given twice: {names:?}"
        );
        let released: std::collections::BTreeSet<&str> = RELEASED.into_iter().collect();
        assert_eq!(unique, released);
        for a in AuditAction::iter() {
            assert_eq!(AuditAction::parse(a.as_str()), Some(a));
            assert_eq!(a.to_string(), a.as_str());
            assert_eq!(String::from(a), a.as_str());
            assert_eq!(AuditDraft::new("ann", a).audit_action(), Some(a));
        }
        assert_eq!(AuditAction::parse("memory.nope"), None);
    }

    /// The predicates the overview and the feed match on, against the names they replaced
    /// (`starts_with("deletion.")`, `contains("revoke")` and the feed's table).
    #[test]
    fn the_predicates_pick_the_actions_their_names_say() {
        use strum::IntoEnumIterator;
        for a in AuditAction::iter() {
            let n = a.as_str();
            assert_eq!(a.is_deletion(), n.starts_with("deletion."), "{n}");
            assert_eq!(a.is_revocation(), n.contains("revoke"), "{n}");
        }
    }

    #[test]
    fn an_event_whose_action_no_variant_names_still_verifies() {
        let key = AuditKey::from_bytes([7; 32]);
        let mut old = AuditDraft::new("ann", AuditAction::MemoryWrite);
        old.action = "summary.write".into();
        assert_eq!(old.audit_action(), None);
        let e = AuditEvent::seal(1, Utc::now(), old, GENESIS_HASH.into(), Some(&key));
        assert_eq!(verify_chain([e], Some(&key)), Ok(1));
    }

    #[test]
    fn intact_chain_verifies_and_edits_are_named() {
        let c = chain(5, None);
        assert_eq!(verify_chain(c.clone(), None), Ok(5));
        let mut edited = c.clone();
        edited[2].draft.reason = Some("changed".into());
        assert_eq!(verify_chain(edited, None).unwrap_err().seq, 3);
        let mut dropped = c;
        dropped.remove(1);
        assert_eq!(verify_chain(dropped, None).unwrap_err().seq, 3);
    }

    #[test]
    fn a_keyed_chain_rewritten_without_the_key_breaks_at_the_rewrite() {
        let key = AuditKey::from_bytes([7; 32]);
        let c = chain(5, Some(&key));
        assert_eq!(verify_chain(c.clone(), Some(&key)), Ok(5));
        // The forger edits event 3 and recomputes every hash from there, without the key.
        let mut forged = c.clone();
        forged[2].draft.reason = Some("changed".into());
        for i in 2..forged.len() {
            let prev = forged[i - 1].hash.clone();
            let e = &forged[i];
            let h = AuditEvent::compute_hash(e.seq, &e.at, &e.draft, &prev, None);
            forged[i].prev_hash = prev;
            forged[i].hash = h;
        }
        assert_eq!(verify_chain(forged.clone(), Some(&key)).unwrap_err().seq, 3);
        // ... and marking them unkeyed after keyed ones is a break too.
        for e in &mut forged[2..] {
            e.keyed = false;
        }
        assert_eq!(verify_chain(forged, Some(&key)).unwrap_err().seq, 3);
        let cp = Checkpoint::sign(&key, 5, &c[4].hash, Utc::now());
        assert!(cp.is_signed_by(&key));
        assert!(!cp.is_signed_by(&AuditKey::from_bytes([8; 32])));
        let mut moved = cp;
        moved.seq = 4;
        assert!(!moved.is_signed_by(&key));
    }
}
