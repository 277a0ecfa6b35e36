//! The change feed as each subscriber sees it, and webhook bookkeeping. The feed is the audit
//! log projected through `registry_core::feed::kind_of`; an event reaches a subscriber only when
//! its key may see the asset *when the event is read* (`registry_core::access`, the rule of
//! every read path; a deletion's events follow its receipt's readers). Another tenant's event
//! is skipped before any asset is loaded.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use registry_core::access;
use registry_core::audit::{AuditAction, AuditDraft, AuditEvent, AuditKey};
use registry_core::deletion::Receipt;
use registry_core::feed::{
    Delivery, DeliveryStatus, FeedEvent, FeedKind, WebhookRecord, kind_of, webhook_secret,
};
use registry_core::principal::Principal;
use registry_core::store::Store;
use registry_core::{AssetKind, CoreError, CoreResult, FieldError, FieldReason, Scope};

/// Audit events one page of the feed examines at most, and how long it may take: a reader's
/// cost per request is bounded whatever the log holds.
pub const SCAN_EVENTS: usize = 500;
pub const SCAN_TIME: Duration = Duration::from_millis(250);

/// Webhooks a tenant may register.
pub const MAX_WEBHOOKS_PER_TENANT: usize = 25;
/// Event kinds one webhook names at most (every kind, each once).
pub const MAX_WEBHOOK_EVENTS: usize = FeedKind::ALL.len();

/// What one read of the feed found: the events `p` may see, and the position to read after
/// next (past every event examined, seen or not).
#[derive(Debug, Clone, PartialEq)]
pub struct FeedPage {
    pub events: Vec<FeedEvent>,
    pub next: u64,
}

/// The feed event of `e` as `p` may see it now, if any.
pub fn project(store: &dyn Store, p: &Principal, e: &AuditEvent) -> CoreResult<Option<FeedEvent>> {
    let Some(kind) = kind_of(&e.draft) else {
        return Ok(None);
    };
    if !p.platform && e.draft.tenant.as_deref().is_some_and(|t| t != p.tenant) {
        return Ok(None);
    }
    let Some(id) = e.draft.asset_id.as_deref() else {
        return Ok(None);
    };
    let event = |asset_id: Option<String>| FeedEvent {
        seq: e.seq,
        kind,
        at: e.at,
        action: e.draft.action.clone(),
        asset_id,
        asset_kind: None,
        version: None,
        scope: None,
        before_hash: e.draft.before_hash.clone(),
        after_hash: e.draft.after_hash.clone(),
        receipt_id: None,
    };
    if kind.about_receipt() {
        let Some(r) = store.get_receipt(id)? else {
            return Ok(None);
        };
        if !access::may_read_receipt(p, &r) {
            return Ok(None);
        }
        return Ok(receipt_event(kind, &r, event(None)));
    }
    let Some(rec) = store.get(id)? else {
        return Ok(None);
    };
    // A skill version before release is seen only by its author, the testers, reviewers and
    // admins of its scope, as from every skill door.
    if !crate::overview::may_see(p, &rec) {
        return Ok(None);
    }
    Ok(Some(FeedEvent {
        asset_kind: Some(rec.meta.kind),
        version: Some(rec.meta.version),
        scope: Some(rec.meta.scope),
        ..event(Some(id.to_string()))
    }))
}

/// A deletion's event names its first root (for `document.deleted`, its first document root;
/// none: not a document deletion) and the receipt, scoped to the receipt's tenant.
fn receipt_event(kind: FeedKind, r: &Receipt, base: FeedEvent) -> Option<FeedEvent> {
    let roots = r.assets.iter().filter(|a| r.roots.contains(&a.id));
    let root = match kind {
        FeedKind::DocumentDeleted => Some(roots.clone().find(|a| a.kind == AssetKind::Document)?),
        _ => roots.clone().next(),
    };
    Some(FeedEvent {
        asset_id: root.map(|a| a.id.clone()),
        asset_kind: root.map(|a| a.kind),
        scope: Some(
            r.tenant
                .as_deref()
                .map_or_else(Scope::global, Scope::tenant),
        ),
        receipt_id: Some(r.id.clone()),
        ..base
    })
}

/// The events after `after` that `p` may see (of `kinds`, when given), examining at most
/// [`SCAN_EVENTS`] audit events for at most [`SCAN_TIME`].
pub fn read(
    store: &dyn Store,
    p: &Principal,
    after: u64,
    kinds: Option<&[FeedKind]>,
) -> CoreResult<FeedPage> {
    let started = Instant::now();
    let mut page = FeedPage {
        events: vec![],
        next: after,
    };
    for e in store.audit_events(after, SCAN_EVENTS)? {
        if started.elapsed() > SCAN_TIME {
            break;
        }
        page.next = e.seq;
        if kind_of(&e.draft).is_some_and(|k| kinds.is_none_or(|ks| ks.contains(&k)))
            && let Some(ev) = project(store, p, &e)?
        {
            page.events.push(ev);
        }
    }
    Ok(page)
}

/// The principal deliveries of `w` are filtered for: its key's, while the key is not revoked.
pub fn webhook_principal(store: &dyn Store, w: &WebhookRecord) -> CoreResult<Option<Principal>> {
    Ok(store
        .list_keys(Some(&w.tenant))?
        .into_iter()
        .find(|k| k.id == w.key_id && k.revoked_at.is_none())
        .map(|k| Principal::of_key(&k)))
}

/// Whether `p` manages webhook `w`: its owner, or an admin of its tenant. Anyone else is told
/// it does not exist.
pub fn may_manage(p: &Principal, w: &WebhookRecord) -> bool {
    w.tenant == p.tenant && (w.owner == p.user || p.is_admin())
}

/// What registering a webhook needs besides its URL (checked by the door, which resolves it).
#[derive(Debug, Clone)]
pub struct NewWebhook {
    pub url: String,
    pub events: Vec<FeedKind>,
    /// The id of the key registering it.
    pub key_id: String,
}

/// The kinds a webhook names, sorted and each once; at least one. Doors check this before
/// any costlier work (resolving the URL).
pub fn webhook_events(mut events: Vec<FeedKind>) -> CoreResult<Vec<FeedKind>> {
    events.sort();
    events.dedup();
    if events.is_empty() {
        return Err(CoreError::validation_with(
            "name at least one event kind",
            FieldError::new("events").reason(FieldReason::InvalidLength),
        ));
    }
    Ok(events)
}

/// Registers a webhook for `p` from the newest event on; returns it and its secret (shown
/// once, derived again from `key` and the stored salt when signing).
pub fn create_webhook(
    store: &dyn Store,
    key: &AuditKey,
    p: &Principal,
    new: NewWebhook,
) -> CoreResult<(WebhookRecord, String)> {
    let events = webhook_events(new.events)?;
    if store.webhooks(Some(&p.tenant))?.len() >= MAX_WEBHOOKS_PER_TENANT {
        return Err(CoreError::validation_with(
            format!("a tenant registers at most {MAX_WEBHOOKS_PER_TENANT} webhooks"),
            FieldError::new("url").reason(FieldReason::LimitExceeded),
        ));
    }
    let id = format!("wh_{}", uuid::Uuid::now_v7().simple());
    let salt = hex::encode(rand::random::<[u8; 32]>());
    let w = WebhookRecord {
        id: id.clone(),
        tenant: p.tenant.clone(),
        owner: p.user.clone(),
        key_id: new.key_id,
        url: new.url,
        events,
        salt,
        cursor: store.feed_head()?,
        created_at: Utc::now(),
    };
    store.create_webhook(
        &w,
        AuditDraft::new(&p.user, AuditAction::WebhookCreate)
            .tenant(&p.tenant)
            .asset(&id),
    )?;
    let secret = webhook_secret(&signing_key(key), &w.id, &w.salt);
    Ok((w, secret))
}

/// The key webhook secrets derive from: the audit key's, for this one purpose.
pub fn signing_key(audit: &AuditKey) -> AuditKey {
    let mac = audit.mac_fields([b"webhook-signing-key-v1".as_slice()]);
    AuditKey::from_hex(&mac).expect("a MAC is 32 bytes")
}

/// The webhook `id` if `p` manages it; anything else answers "not found".
pub fn get_webhook(store: &dyn Store, p: &Principal, id: &str) -> CoreResult<WebhookRecord> {
    match store.webhook(id)? {
        Some(w) if may_manage(p, &w) => Ok(w),
        _ => Err(CoreError::NotFound(format!("no webhook {id}"))),
    }
}

/// The webhooks `p` manages.
pub fn list_webhooks(store: &dyn Store, p: &Principal) -> CoreResult<Vec<WebhookRecord>> {
    Ok(store
        .webhooks(Some(&p.tenant))?
        .into_iter()
        .filter(|w| may_manage(p, w))
        .collect())
}

pub fn delete_webhook(store: &dyn Store, p: &Principal, id: &str) -> CoreResult<()> {
    let w = get_webhook(store, p, id)?;
    store.delete_webhook(
        &w.id,
        AuditDraft::new(&p.user, AuditAction::WebhookDelete)
            .tenant(&w.tenant)
            .asset(&w.id),
    )?;
    Ok(())
}

/// Examines, for every webhook whose key is live, the events after its cursor and queues one
/// delivery per event its key may see now. Two nodes doing this at once queue each event once
/// (the cursor moves by compare-and-set). Returns the deliveries queued.
pub fn dispatch_once(store: &dyn Store) -> CoreResult<usize> {
    let mut queued = 0;
    for w in store.webhooks(None)? {
        let Some(p) = webhook_principal(store, &w)? else {
            continue;
        };
        let page = read(store, &p, w.cursor, Some(&w.events))?;
        if page.next == w.cursor {
            continue;
        }
        let now = Utc::now();
        let deliveries: Vec<Delivery> = page
            .events
            .iter()
            .map(|e| Delivery {
                id: format!("dl_{}", uuid::Uuid::now_v7().simple()),
                webhook_id: w.id.clone(),
                seq: e.seq,
                kind: e.kind,
                status: DeliveryStatus::Pending,
                attempts: 0,
                next_at: now,
                last_error: None,
                updated_at: now,
            })
            .collect();
        if store.advance_webhook(&w.id, w.cursor, page.next, &deliveries)? {
            queued += deliveries.len();
        }
    }
    Ok(queued)
}

/// The event a delivery carries, as its webhook's key may see it now (`None`: withheld).
pub fn delivery_event(
    store: &dyn Store,
    w: &WebhookRecord,
    d: &Delivery,
) -> CoreResult<Option<FeedEvent>> {
    let Some(p) = webhook_principal(store, w)? else {
        return Ok(None);
    };
    let Some(e) = store
        .audit_events(d.seq.saturating_sub(1), 1)?
        .into_iter()
        .find(|e| e.seq == d.seq)
    else {
        return Ok(None);
    };
    Ok(project(store, &p, &e)?.filter(|ev| ev.kind == d.kind))
}

/// How retries space out: `base` doubled per failed attempt, at most `max_delay`; after
/// `max_attempts` the delivery is dead.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub base: Duration,
    pub max_delay: Duration,
    pub max_attempts: u32,
}

/// `d` after a failed attempt: due again later, or dead.
pub fn failed(mut d: Delivery, error: &str, policy: &RetryPolicy, now: DateTime<Utc>) -> Delivery {
    d.attempts += 1;
    d.last_error = Some(error.to_string());
    d.updated_at = now;
    if d.attempts >= policy.max_attempts {
        d.status = DeliveryStatus::Dead;
    } else {
        let exp = policy
            .base
            .saturating_mul(1u32 << (d.attempts - 1).min(20))
            .min(policy.max_delay);
        d.next_at = now + chrono::Duration::from_std(exp).unwrap_or_default();
    }
    d
}

/// The dead letters of a webhook `p` manages, newest first.
pub fn dead_letters(
    store: &dyn Store,
    p: &Principal,
    id: &str,
    limit: usize,
) -> CoreResult<Vec<Delivery>> {
    let w = get_webhook(store, p, id)?;
    store.deliveries(&w.id, Some(DeliveryStatus::Dead), limit)
}

/// Queues a dead delivery of a webhook `p` manages again, with its attempts reset.
pub fn redeliver(store: &dyn Store, p: &Principal, id: &str, delivery: &str) -> CoreResult<()> {
    let w = get_webhook(store, p, id)?;
    if store.redeliver(&w.id, delivery, Utc::now())? {
        Ok(())
    } else {
        Err(CoreError::NotFound(format!("no dead delivery {delivery}")))
    }
}

/// The feed as the doors call it (`Services::feed`): each operation above on this registry's
/// store and audit key, so that a route or MCP tool never holds the store itself.
pub struct FeedDoor<'a> {
    store: &'a dyn Store,
    audit_key: &'a AuditKey,
}

impl crate::Services {
    pub fn feed(&self) -> FeedDoor<'_> {
        FeedDoor {
            store: self.backends.store.as_ref(),
            audit_key: &self.options.audit_key,
        }
    }
}

impl FeedDoor<'_> {
    /// The newest event's position: a reader that names no start begins after it.
    pub fn head(&self) -> CoreResult<u64> {
        self.store.feed_head()
    }

    /// Whether the API key with this hash exists and is not revoked (an open stream stops
    /// when it is).
    pub fn key_is_live(&self, key_hash: &str) -> CoreResult<bool> {
        Ok(self
            .store
            .find_key(key_hash)?
            .is_some_and(|k| k.revoked_at.is_none()))
    }

    pub fn read(
        &self,
        p: &Principal,
        after: u64,
        kinds: Option<&[FeedKind]>,
    ) -> CoreResult<FeedPage> {
        read(self.store, p, after, kinds)
    }

    /// Registers a webhook for the key with this hash (which must exist): deliveries carry
    /// what that key may see. Answers the webhook and its signing secret (shown once).
    pub fn create_webhook(
        &self,
        p: &Principal,
        key_hash: &str,
        url: String,
        events: Vec<FeedKind>,
    ) -> CoreResult<(WebhookRecord, String)> {
        let key = self
            .store
            .find_key(key_hash)?
            .ok_or_else(|| CoreError::Coded {
                code: registry_core::ErrorCode::Unauthenticated,
                message: "a valid API key is required: Authorization: Bearer <key>".into(),
                details: serde_json::Value::Null,
            })?;
        create_webhook(
            self.store,
            self.audit_key,
            p,
            NewWebhook {
                url,
                events,
                key_id: key.id,
            },
        )
    }

    pub fn get_webhook(&self, p: &Principal, id: &str) -> CoreResult<WebhookRecord> {
        get_webhook(self.store, p, id)
    }

    pub fn list_webhooks(&self, p: &Principal) -> CoreResult<Vec<WebhookRecord>> {
        list_webhooks(self.store, p)
    }

    pub fn delete_webhook(&self, p: &Principal, id: &str) -> CoreResult<()> {
        delete_webhook(self.store, p, id)
    }

    pub fn dead_letters(&self, p: &Principal, id: &str, limit: usize) -> CoreResult<Vec<Delivery>> {
        dead_letters(self.store, p, id, limit)
    }

    pub fn redeliver(&self, p: &Principal, id: &str, delivery: &str) -> CoreResult<()> {
        redeliver(self.store, p, id, delivery)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_then_die() {
        let policy = RetryPolicy {
            base: Duration::from_secs(1),
            max_delay: Duration::from_secs(5),
            max_attempts: 4,
        };
        let now = Utc::now();
        let mut d = Delivery {
            id: "d".into(),
            webhook_id: "w".into(),
            seq: 1,
            kind: FeedKind::MemoryHeld,
            status: DeliveryStatus::Pending,
            attempts: 0,
            next_at: now,
            last_error: None,
            updated_at: now,
        };
        let mut delays = vec![];
        for _ in 0..3 {
            d = failed(d, "http 500", &policy, now);
            delays.push((d.next_at - now).num_seconds());
            assert_eq!(d.status, DeliveryStatus::Pending);
        }
        assert_eq!(delays, vec![1, 2, 4]);
        d = failed(d, "http 500", &policy, now);
        assert_eq!(d.status, DeliveryStatus::Dead);
        assert_eq!(d.attempts, 4);
    }
}
