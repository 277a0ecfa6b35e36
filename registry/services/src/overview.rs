//! Read-only queries across domains that an operator's door (the web console) shows: asset
//! counts, activity per day, the audit events and deletion receipts a principal may read, and
//! the stored context manifests. Each applies the same access rules as the HTTP API does for
//! the same data (the audit: admins only, their tenant and the global scope, their projects;
//! receipts: the asker or the tenant's admins; manifests: the asker or the tenant's admins not
//! bound to some projects).

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use registry_core::access::{self, Action};
use registry_core::asset::{AssetKind, AssetRecord};
use registry_core::audit::{AuditAction, AuditEvent, Verification};
use registry_core::deletion::Receipt;
use registry_core::principal::{ALL_PROJECTS, Principal, Role};
use registry_core::store::{AssetQuery, StoredManifest, pages};
use serde::Serialize;

use crate::{Error, Result, Services};

/// How many current assets [`Services::asset_counts`] walks before it stops counting (the
/// answer then says `truncated`).
pub const MAX_COUNTED: usize = 100_000;

/// How many audit events [`Services::activity`] reads at most.
pub const MAX_ACTIVITY_EVENTS: usize = 200_000;
/// Audit events one audit page examines at most: the log holds every tenant's events, so a
/// page of the events a caller may see is gathered from at most this many, and `next` says
/// where the next page starts.
pub const AUDIT_SCAN: usize = 20_000;

/// A page of the audit events a caller may see.
#[derive(Debug, Clone)]
pub struct AuditPage {
    pub events: Vec<AuditEvent>,
    /// The `after` of the next page; `None` once the log's end was read.
    pub next: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AssetCounts {
    /// (kind, status) → how many current versions `p` may see.
    pub counts: BTreeMap<String, BTreeMap<String, u64>>,
    /// The walk stopped at [`MAX_COUNTED`].
    pub truncated: bool,
}

/// Counts per day and series, over the last `days` days (oldest first).
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub days: Vec<NaiveDate>,
    /// series name → one count per day of `days`.
    pub series: BTreeMap<String, Vec<u64>>,
}

impl Series {
    fn new(days: &[NaiveDate]) -> Series {
        Series {
            days: days.to_vec(),
            series: BTreeMap::new(),
        }
    }

    fn add(&mut self, at: DateTime<Utc>, name: &str) {
        let day = at.date_naive();
        if let Some(i) = self.days.iter().position(|d| *d == day) {
            let n = self.days.len();
            self.series
                .entry(name.to_string())
                .or_insert_with(|| vec![0; n])[i] += 1;
        }
    }
}

/// What the audit log and the manifest store record per day.
#[derive(Debug, Clone, Serialize)]
pub struct Activity {
    /// Memory writes by the gate's decision (audit `memory.write`, reason = decision).
    pub memory_writes: Series,
    /// Context packs compiled (each runs the memory, knowledge and skill searches), from the
    /// stored manifests.
    pub context_packs: Series,
    /// Deletions by action (`deletion.revoke`, `deletion.purge`, `memory.revoke`, …).
    pub deletions: Series,
    /// The audit window was cut at [`MAX_ACTIVITY_EVENTS`].
    pub truncated: bool,
}

fn require_admin(p: &Principal) -> Result<()> {
    if p.has_role(Role::Admin) {
        Ok(())
    } else {
        Err(Error::forbidden("the admin role is required"))
    }
}

/// Whether `p` may see stored record `r` at a door that serves any kind (`/v1/assets`, the
/// impact view, the change feed, the console's derivation page): the access rule, and for a
/// skill version the skills' rule 1 as at every skill door (another author's draft is seen only
/// by its author, the testers, reviewers and admins of its scope).
pub fn may_see(p: &Principal, r: &AssetRecord) -> bool {
    access::may(p, Action::See, &r.meta)
        && (r.meta.kind != AssetKind::SkillVersion
            // Release pointers are the skills domain's bookkeeping, admitted as before.
            || r.lookup_key
                .as_deref()
                .is_some_and(|k| k.starts_with("release:"))
            || registry_skills::resolve::may_list(p, r))
}

impl Services {
    /// The schema version of the store (health checks).
    pub fn schema_version(&self) -> Result<i64> {
        Ok(registry_core::store::Store::schema_version(
            self.backends.store.as_ref(),
        )?)
    }

    /// The current version of asset `id` if `p` may see it; otherwise not found, exactly as for
    /// an id that names nothing (another tenant's asset answers like a missing one).
    pub fn visible_asset(&self, p: &Principal, id: &str) -> Result<AssetRecord> {
        match self.backends.store.get(id)? {
            Some(r) if may_see(p, &r) => Ok(r),
            _ => Err(Error::not_found(format!("no asset {id}"))),
        }
    }

    /// Current versions `p` may see, counted per kind and status.
    pub fn asset_counts(&self, p: &Principal) -> Result<AssetCounts> {
        let store = &self.backends.store;
        let mut counts: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let mut seen = 0usize;
        let mut truncated = false;
        let query = AssetQuery {
            scope_keys: Some(p.visible_scope_keys()),
            heads_only: true,
            ..Default::default()
        };
        for page in pages(&**store, query) {
            let page = page?;
            for r in page.iter().filter(|r| may_see(p, r)) {
                // Release pointers are bookkeeping of the skills domain, not assets of their own.
                if r.meta.kind == AssetKind::SkillVersion
                    && r.lookup_key
                        .as_deref()
                        .is_some_and(|k| k.starts_with("release:"))
                {
                    continue;
                }
                *counts
                    .entry(r.meta.kind.as_str().to_string())
                    .or_default()
                    .entry(r.meta.status.as_str().to_string())
                    .or_default() += 1;
            }
            seen += page.len();
            if seen >= MAX_COUNTED {
                truncated = true;
                break;
            }
        }
        Ok(AssetCounts { counts, truncated })
    }

    /// Current versions `p` may see, newest last in the store's order, paged by the id of the
    /// last asset of the previous page (as `GET /v1/assets`); returns the page and the cursor
    /// of the next one.
    pub fn list_assets(
        &self,
        p: &Principal,
        kind: Option<AssetKind>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<AssetRecord>, Option<String>)> {
        let store = &self.backends.store;
        let limit = limit.clamp(1, 1000);
        // A cursor the caller cannot see answers 404, like the asset itself.
        let cursor = match after {
            None => None,
            Some(id) => {
                let r = self.visible_asset(p, id)?;
                Some((r.meta.created_at, r.meta.id.clone(), u32::MAX))
            }
        };
        let mut out = vec![];
        let query = AssetQuery {
            kind,
            scope_keys: Some(p.visible_scope_keys()),
            heads_only: true,
            after: cursor,
            limit: Some(limit.max(50) + 1),
            ..Default::default()
        };
        for page in pages(&**store, query) {
            for r in page?.into_iter().filter(|r| may_see(p, r)) {
                if out.len() == limit {
                    let next = out.last().map(|r: &AssetRecord| r.meta.id.clone());
                    return Ok((out, next));
                }
                out.push(r);
            }
        }
        Ok((out, None))
    }

    /// The names of the skills `p` may see a version of, sorted.
    pub fn skill_names(&self, p: &Principal) -> Result<Vec<String>> {
        let mut names = std::collections::BTreeSet::new();
        let query = AssetQuery {
            kind: Some(AssetKind::SkillVersion),
            scope_keys: Some(p.visible_scope_keys()),
            heads_only: true,
            ..Default::default()
        };
        for page in pages(&*self.backends.store, query) {
            let page = page?;
            for r in page.iter().filter(|r| may_see(p, r)) {
                if let Some(k) = r
                    .lookup_key
                    .as_deref()
                    .filter(|k| !k.starts_with("release:"))
                {
                    names.insert(k.to_string());
                }
            }
            if names.len() >= MAX_COUNTED {
                break;
            }
        }
        Ok(names.into_iter().collect())
    }

    /// Audit events after `after` that `p` may read, at most `limit`, oldest first, gathered
    /// from at most [`AUDIT_SCAN`] events of the log (under the request's deadline): admins
    /// only; a tenant's admins see their tenant's events, within the projects their key names
    /// (a purged asset's only when it names none), and the events of the global assets they
    /// may see (no platform draft); a platform admin sees every event.
    pub fn audit_events(&self, p: &Principal, after: u64, limit: usize) -> Result<AuditPage> {
        require_admin(p)?;
        let store = &self.backends.store;
        let mut events = vec![];
        let mut after = after;
        let mut scanned = 0usize;
        loop {
            registry_core::deadline::check()?;
            let batch = store.audit_events(after, 1000)?;
            if batch.is_empty() {
                return Ok(AuditPage { events, next: None });
            }
            for e in batch {
                after = e.seq;
                scanned += 1;
                if self.audit_shows(p, &e)? {
                    events.push(e);
                    if events.len() >= limit {
                        return Ok(AuditPage {
                            events,
                            next: Some(after),
                        });
                    }
                }
            }
            if scanned >= AUDIT_SCAN {
                return Ok(AuditPage {
                    events,
                    next: Some(after),
                });
            }
        }
    }

    fn audit_shows(&self, p: &Principal, e: &AuditEvent) -> Result<bool> {
        if p.platform {
            return Ok(true);
        }
        if e.draft.tenant.as_deref().is_some_and(|t| t != p.tenant) {
            return Ok(false);
        }
        let global = e.draft.tenant.is_none();
        let unbound = p.member_of(ALL_PROJECTS);
        if unbound && !global {
            return Ok(true);
        }
        let Some(id) = &e.draft.asset_id else {
            return Ok(true);
        };
        Ok(match self.backends.store.get(id)? {
            // A global asset's events: whoever may see it (a platform draft is seen by no
            // tenant, rule 1).
            Some(r) if global => may_see(p, &r),
            Some(r) => r.meta.scope.project.as_ref().is_none_or(|x| p.member_of(x)),
            // A receipt, a key or a webhook (never in the asset store): as before, to the
            // admins this door admits.
            None if e
                .draft
                .audit_action()
                .is_some_and(AuditAction::names_no_asset) =>
            {
                true
            }
            // Purged: its project and state are gone with it, so only the tenant's unbound
            // admins (answered above) see its events; the event names no project.
            None => false,
        })
    }

    /// Verifies the audit chain as `p` may (admins; a tenant admin sees its tenant's view).
    pub fn verify_audit(&self, p: &Principal) -> Result<Verification> {
        require_admin(p)?;
        let tenant = (!p.platform).then_some(p.tenant.as_str());
        Ok(self.audit.verify(tenant)?)
    }

    /// Per day, over the last `days` days up to `now`: memory writes by decision, context packs
    /// compiled and deletions. Audit-based series need the admin role (as the audit does); for
    /// other principals they are absent and only their own context packs are counted.
    pub fn activity(&self, p: &Principal, days: u32, now: DateTime<Utc>) -> Result<Activity> {
        let days = days.clamp(1, 366);
        let today = now.date_naive();
        let range: Vec<NaiveDate> = (0..days)
            .rev()
            .map(|d| today - Duration::days(i64::from(d)))
            .collect();
        let start = range[0];
        let mut writes = Series::new(&range);
        let mut deletions = Series::new(&range);
        let mut packs = Series::new(&range);
        let mut truncated = false;
        if p.has_role(Role::Admin) {
            let mut after = 0;
            let mut read = 0usize;
            loop {
                registry_core::deadline::check()?;
                let batch = self.backends.store.audit_events(after, 1000)?;
                let Some(last) = batch.last() else { break };
                after = last.seq;
                read += batch.len();
                for e in batch.iter().filter(|e| e.at.date_naive() >= start) {
                    let Some(a) = e.draft.audit_action() else {
                        continue;
                    };
                    let write = a == AuditAction::MemoryWrite;
                    let counted = write || a.is_revocation() || a.is_deletion();
                    if !counted || !self.audit_shows(p, e)? {
                        continue;
                    }
                    if write {
                        writes.add(e.at, e.draft.reason.as_deref().unwrap_or("unknown"));
                    } else {
                        deletions.add(e.at, a.as_str());
                    }
                }
                if read >= MAX_ACTIVITY_EVENTS {
                    truncated = true;
                    break;
                }
            }
        }
        let who = (!access::reads_tenant_manifests(p)).then_some(p.user.as_str());
        for m in self.backends.store.list_manifests(&p.tenant, who, 10_000)? {
            packs.add(m.created_at, "context packs");
        }
        Ok(Activity {
            memory_writes: writes,
            context_packs: packs,
            deletions,
            truncated,
        })
    }

    /// Deletion receipts `p` may read, newest first: its tenant's (the asker's own, or all of
    /// them for an admin) and, for a platform principal, the global scope's.
    pub fn recent_receipts(&self, p: &Principal, limit: usize) -> Result<Vec<Receipt>> {
        let store = &self.backends.store;
        let mut out: Vec<Receipt> = store
            .recent_receipts(Some(&p.tenant), limit.saturating_mul(4).max(limit))?
            .into_iter()
            .filter(|r| r.actor == p.user || p.is_admin())
            .collect();
        if p.platform {
            out.extend(store.recent_receipts(None, limit)?);
        }
        out.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(b.id.cmp(&a.id)));
        out.truncate(limit);
        Ok(out)
    }

    /// Stored context manifests `p` may read (its own; an admin not bound to some projects: the
    /// tenant's), newest first.
    pub fn recent_manifests(&self, p: &Principal, limit: usize) -> Result<Vec<StoredManifest>> {
        let who = (!access::reads_tenant_manifests(p)).then_some(p.user.as_str());
        Ok(self.backends.store.list_manifests(&p.tenant, who, limit)?)
    }
}
