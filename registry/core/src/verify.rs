//! Verifies a store's audit log: the hash chain over every stored event, the signed
//! checkpoints kept beside it, and the anchor the operator keeps outside the database.

use crate::audit::{AuditEvent, AuditKey, ChainVerifier, Checkpoint, Verification};
use crate::error::CoreResult;
use crate::store::AssetStore;

/// Walks the whole stored chain page by page with `key`, checks every stored checkpoint and
/// the one kept outside the database (`anchor`, the newest the operator has) against it, and
/// reports the first break. With `tenant`, counts and names only that tenant's events (and
/// the global ones): one tenant learns nothing of another's activity from a verification.
pub fn verify_store(
    store: &dyn AssetStore,
    key: Option<&AuditKey>,
    anchor: Option<&Checkpoint>,
    tenant: Option<&str>,
) -> CoreResult<Verification> {
    let mut checkpoints = store.audit_checkpoints()?;
    checkpoints.extend(anchor.cloned());
    let mut pending: std::collections::BTreeMap<u64, Vec<Checkpoint>> = Default::default();
    for cp in checkpoints {
        pending.entry(cp.seq).or_default().push(cp);
    }
    let checked = pending.values().map(|v| v.len() as u64).sum();
    let mut v = ChainVerifier::new(key.cloned());
    let mut own = 0u64;
    let mine =
        |e: &AuditEvent| tenant.is_none_or(|t| e.draft.tenant.as_deref().is_none_or(|x| x == t));
    let broken = |seq: u64, reason: String, own: u64, mine_at: bool| Verification {
        ok: false,
        events: own,
        broken_at: (tenant.is_none() || mine_at).then_some(seq),
        reason: Some(if tenant.is_none() || mine_at {
            reason
        } else {
            "the chain is broken at an event outside this tenant; the operator can locate it".into()
        }),
        checkpoints: checked,
    };
    let mut after = 0;
    loop {
        crate::deadline::check()?;
        let page = store.audit_events(after, 5000)?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for e in &page {
            if let Err(b) = v.push(e) {
                return Ok(broken(b.seq, b.reason, own, mine(e)));
            }
            if mine(e) {
                own += 1;
            }
            if let Some(cps) = pending.remove(&e.seq) {
                for cp in cps {
                    let signed = key.is_some_and(|k| cp.is_signed_by(k));
                    if !signed || cp.hash != e.hash {
                        let why = if signed {
                            "a signed checkpoint does not match the event at its position"
                        } else {
                            "a checkpoint is not signed by the audit key"
                        };
                        return Ok(broken(e.seq, why.into(), own, mine(e)));
                    }
                }
            }
        }
    }
    // A checkpoint past the end: events it covered were deleted.
    if let Some((&seq, _)) = pending.iter().next() {
        let first_missing = v.count() + 1;
        return Ok(broken(
            first_missing,
            format!(
                "a signed checkpoint covers {seq} events but the log ends at {}: events were deleted",
                v.count()
            ),
            own,
            tenant.is_none(),
        ));
    }
    Ok(Verification {
        ok: true,
        events: own,
        broken_at: None,
        reason: None,
        checkpoints: checked,
    })
}
