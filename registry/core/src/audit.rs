//! The append-only, hash-chained audit log.
//!
//! Each event's hash covers its fields and the previous event's hash, so editing, deleting or
//! reordering any row breaks the chain at that row. Events carry ids and content hashes only,
//! never content, so that erasure leaves nothing behind here that the law does not require.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::hash::sha256_fields;

/// The hash that precedes the first event.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What a caller asks to record; the log assigns sequence, time and hashes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditDraft {
    pub actor: String,
    pub tenant: Option<String>,
    pub action: String,
    pub asset_id: Option<String>,
    pub before_hash: Option<String>,
    pub after_hash: Option<String>,
    pub reason: Option<String>,
}

impl AuditDraft {
    pub fn new(actor: impl Into<String>, action: impl Into<String>) -> Self {
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

    pub fn tenant(mut self, t: impl Into<String>) -> Self {
        self.tenant = Some(t.into());
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
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEvent {
    pub seq: u64,
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub draft: AuditDraft,
    pub prev_hash: String,
    pub hash: String,
}

impl AuditEvent {
    /// Seals a draft as the event after `prev_hash`.
    pub fn seal(seq: u64, at: DateTime<Utc>, draft: AuditDraft, prev_hash: String) -> Self {
        let hash = Self::compute_hash(seq, &at, &draft, &prev_hash);
        AuditEvent {
            seq,
            at,
            draft,
            prev_hash,
            hash,
        }
    }

    pub fn compute_hash(seq: u64, at: &DateTime<Utc>, d: &AuditDraft, prev: &str) -> String {
        let seq_s = seq.to_string();
        let at_s = at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
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
        sha256_fields(fields.iter().map(|s| s.as_bytes()))
    }
}

/// The first place the chain breaks, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
}

impl Default for ChainVerifier {
    fn default() -> Self {
        ChainVerifier {
            prev: GENESIS_HASH.to_string(),
            expected_seq: 1,
            count: 0,
        }
    }
}

impl ChainVerifier {
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
        if AuditEvent::compute_hash(e.seq, &e.at, &e.draft, &e.prev_hash) != e.hash {
            return fail("stored hash does not match the event's content".into());
        }
        self.prev = e.hash.clone();
        self.expected_seq += 1;
        self.count += 1;
        Ok(())
    }

    /// Events verified so far.
    pub fn count(&self) -> u64 {
        self.count
    }
}

/// Walks events in sequence order and reports the first broken link.
pub fn verify_chain<I: IntoIterator<Item = AuditEvent>>(events: I) -> Result<u64, ChainBreak> {
    let mut v = ChainVerifier::default();
    for e in events {
        v.push(&e)?;
    }
    Ok(v.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: u64) -> Vec<AuditEvent> {
        let mut prev = GENESIS_HASH.to_string();
        (1..=n)
            .map(|i| {
                let e = AuditEvent::seal(
                    i,
                    Utc::now(),
                    AuditDraft::new("ann", "memory.write").asset(format!("a{i}")),
                    prev.clone(),
                );
                prev = e.hash.clone();
                e
            })
            .collect()
    }

    #[test]
    fn intact_chain_verifies_and_edits_are_named() {
        let c = chain(5);
        assert_eq!(verify_chain(c.clone()), Ok(5));
        let mut edited = c.clone();
        edited[2].draft.reason = Some("changed".into());
        assert_eq!(verify_chain(edited).unwrap_err().seq, 3);
        let mut dropped = c;
        dropped.remove(1);
        assert_eq!(verify_chain(dropped).unwrap_err().seq, 3);
    }
}
