//! The skills domain: publishing, the Draft → Test → Review → Published lifecycle, the
//! release pointer per name, and the three disclosure levels (DESIGN §6).
//!
//! Storage model:
//! - every published `name@version` is one asset (kind `SkillVersion`, `lookup_key` = name,
//!   `content_hash` = hex of the canonical tree digest). Each lifecycle step writes the next
//!   asset version with an updated body (state, test results, reviews); the skill content
//!   (archive in the blob store, keyed by the archive's sha256) never changes;
//! - one release pointer per (scope, name) (kind `SkillVersion`, `lookup_key` = `release:NAME`,
//!   a key no skill name can take) names the current release and carries its discover entry.
//!   Only pointers are in the indexes (text and vector: the discover entry's name,
//!   description and applicability, embedded as a stored text), so discovery is one BM25 query
//!   and one vector query, both filtered by visibility before ranking, fused by reciprocal rank,
//!   plus one lookup by id.
//!
//! Every step is one `commit`: the new version, the pointer move (if any) and the audit event.
//! Writes are serialised per (tenant, skill name) by the service's locks, so check-then-write
//! (version immutability, state transitions) cannot interleave; `PutVersion`'s head+1 rule
//! still catches a second process.
//!
//! This module holds the service, its constructor and what every step shares (the per-skill
//! lock, the archive cache, digests, the audit event, the release pointer's read). The steps
//! live by aggregate, each in an `impl SkillsService` block of its own module:
//! [`crate::publish`], [`crate::lifecycle`] (the state machine and the steps on it),
//! [`crate::proof`], [`crate::runs`], [`crate::discovery`], [`crate::load`], [`crate::resolve`]
//! and [`crate::views`]. Those modules import this one and [`crate::model`]; this one imports
//! none of them, so the crate's modules form no cycle.

use std::sync::Arc;

use registry_core::asset::{AssetKind, AssetRecord};
use registry_core::audit::{AuditAction, AuditDraft};
use registry_core::deletion::Deleter;
use registry_core::locks::KeyedLocks;
use registry_core::principal::Principal;
use registry_core::retrieval::{Embedder, TextIndex, VectorIndex};
use registry_core::store::{AssetQuery, AssetStore, BlobStore};
use registry_core::{FieldError, FieldReason, Scope};
use skills_sdk::{ArchiveLimits, TreeDigest};

use crate::error::{Error, Result};
use crate::model::{Loaded, ObservePolicy, ReleaseBody, ReleaseTarget};

/// The skills service over the core's traits. Cheap to clone (handles only).
#[derive(Clone)]
pub struct SkillsService {
    pub(crate) store: Arc<dyn AssetStore>,
    pub(crate) blobs: Arc<dyn BlobStore>,
    pub(crate) text: Arc<dyn TextIndex>,
    pub(crate) vectors: Arc<dyn VectorIndex>,
    pub(crate) embedder: Arc<dyn Embedder>,
    pub(crate) deleter: Arc<dyn Deleter>,
    pub(crate) archives: Arc<ArchiveCache>,
    /// Steps on one skill are serialised per (tenant, name).
    pub(crate) locks: KeyedLocks,
    /// When observed runs flag a release (shared by every clone).
    pub(crate) observe: Arc<parking_lot::RwLock<ObservePolicy>>,
}

impl std::fmt::Debug for SkillsService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillsService").finish_non_exhaustive()
    }
}

impl SkillsService {
    pub fn new(
        store: Arc<dyn AssetStore>,
        blobs: Arc<dyn BlobStore>,
        text: Arc<dyn TextIndex>,
        vectors: Arc<dyn VectorIndex>,
        embedder: Arc<dyn Embedder>,
        deleter: Arc<dyn Deleter>,
    ) -> Self {
        SkillsService {
            store,
            blobs,
            text,
            vectors,
            embedder,
            deleter,
            archives: Arc::new(ArchiveCache::default()),
            locks: KeyedLocks::new(),
            observe: Default::default(),
        }
    }

    /// Sets the policy by which observed runs flag a release (config `skills.*`).
    pub fn set_observe_policy(&self, policy: ObservePolicy) {
        *self.observe.write() = policy;
    }

    pub fn observe_policy(&self) -> ObservePolicy {
        *self.observe.read()
    }

    /// The current release of a name in the principal's view.
    pub fn current_release(&self, versions: &[Loaded]) -> Result<Option<ReleaseTarget>> {
        let Some(first) = versions.first() else {
            return Ok(None);
        };
        Ok(
            load_pointer(self.store.as_ref(), &first.rec.meta.scope, &first.body.name)?
                .and_then(|(_, b)| b.current),
        )
    }
}

/// Lookup-key prefix of release pointers; `:` never occurs in a skill name.
pub const RELEASE_PREFIX: &str = "release:";
/// Index tag of discover entries.
pub const DISCOVER_TAG: &str = "skill:discover";

/// Holds the lock for steps on `name` by `p`'s tenant: check-then-write sequences
/// (immutability, transitions, the release pointer) never interleave for one skill, and steps
/// on other skills never wait. Only platform principals change global skills, and they share
/// the platform's tenant, so this also serialises every step on a global skill.
pub(crate) fn lock_skill(
    s: &SkillsService,
    p: &Principal,
    name: &str,
) -> registry_core::locks::KeyGuard {
    s.locks.lock(&format!("{}|{name}", p.tenant))
}

/// Parsed archives by blob key, so serving one file of a version does not unpack the whole
/// archive again; bounded by the archives' total size.
#[derive(Default)]
pub struct ArchiveCache {
    inner: parking_lot::Mutex<ArchiveCacheInner>,
}

#[derive(Default)]
struct ArchiveCacheInner {
    entries:
        std::collections::HashMap<String, (std::sync::Arc<skills_sdk::SkillArchive>, usize, u64)>,
    bytes: usize,
    tick: u64,
}

/// Archive bytes the cache keeps at most (least recently used ones go first).
const ARCHIVE_CACHE_BYTES: usize = 64 * 1024 * 1024;

impl ArchiveCache {
    pub(crate) fn get_or_load(
        &self,
        key: &str,
        load: impl FnOnce() -> Result<(skills_sdk::SkillArchive, usize)>,
    ) -> Result<std::sync::Arc<skills_sdk::SkillArchive>> {
        {
            let mut c = self.inner.lock();
            c.tick += 1;
            let tick = c.tick;
            if let Some(e) = c.entries.get_mut(key) {
                e.2 = tick;
                return Ok(e.0.clone());
            }
        }
        let (archive, size) = load()?;
        let archive = std::sync::Arc::new(archive);
        let mut c = self.inner.lock();
        while c.bytes + size > ARCHIVE_CACHE_BYTES && !c.entries.is_empty() {
            let oldest = c
                .entries
                .iter()
                .min_by_key(|(_, e)| e.2)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest
                && let Some(e) = c.entries.remove(&k)
            {
                c.bytes -= e.1;
            }
        }
        if size <= ARCHIVE_CACHE_BYTES {
            c.tick += 1;
            let tick = c.tick;
            c.bytes += size;
            c.entries
                .insert(key.to_string(), (archive.clone(), size, tick));
        }
        Ok(archive)
    }

    /// Drops an archive whose blob was deleted.
    pub fn forget(&self, key: &str) {
        let mut c = self.inner.lock();
        if let Some(e) = c.entries.remove(key) {
            c.bytes -= e.1;
        }
    }
}

pub fn limits() -> ArchiveLimits {
    ArchiveLimits::default()
}

/// Parses `sha256:<hex>` or bare hex into the canonical `sha256:<hex>` form.
pub fn parse_digest(s: &str) -> Result<String> {
    let full = if s.starts_with("sha256:") {
        s.to_string()
    } else {
        format!("sha256:{s}")
    };
    full.parse::<TreeDigest>()
        .map(|d| d.to_string())
        .map_err(|_| {
            Error::validation(format!("invalid digest {s:?}: expected sha256:<64 hex>"))
                .with_details(FieldError::new("digest"))
        })
}

/// An event about an asset in `scope`: filed under the scope's tenant (none for the global
/// scope, whose events every tenant's audit shows).
pub(crate) fn audit(
    p: &Principal,
    action: AuditAction,
    scope: &Scope,
    asset: &str,
    before: Option<String>,
    after: Option<String>,
) -> AuditDraft {
    AuditDraft::new(p.user.clone(), action)
        .in_scope(scope)
        .asset(asset.to_string())
        .hashes(before, after)
}

pub(crate) fn digest_hex(d: &str) -> String {
    d.trim_start_matches("sha256:").to_string()
}

pub use crate::model::MAX_NOTE_CHARS;

/// Free text on a lifecycle step: bounded, one line.
pub(crate) fn check_note(field: &str, v: Option<&str>) -> Result<()> {
    match v {
        Some(t)
            if t.chars().count() > MAX_NOTE_CHARS
                || t.chars().any(|c| c.is_control() && c != '\n') =>
        {
            Err(Error::validation(format!(
                "{field} must be at most {MAX_NOTE_CHARS} characters"
            ))
            .with_details(
                FieldError::new(field)
                    .reason(FieldReason::Invalid)
                    .limit(MAX_NOTE_CHARS),
            ))
        }
        _ => Ok(()),
    }
}

/// The release pointer of `name` in exactly `scope`, with its body.
pub(crate) fn load_pointer(
    store: &dyn AssetStore,
    scope: &Scope,
    name: &str,
) -> Result<Option<(AssetRecord, ReleaseBody)>> {
    let recs = store.find(&AssetQuery {
        kind: Some(AssetKind::SkillVersion),
        tenant: scope.tenant.clone(),
        scope_keys: Some(vec![scope.key()]),
        lookup_key: Some(format!("{RELEASE_PREFIX}{name}")),
        heads_only: true,
        ..Default::default()
    })?;
    match recs.into_iter().next() {
        None => Ok(None),
        Some(r) => {
            let b: ReleaseBody = serde_json::from_value(r.body.clone()).map_err(Error::internal)?;
            Ok(Some((r, b)))
        }
    }
}
