//! Storage traits. The embedded SQLite store and the scale-out PostgreSQL store implement
//! these with the same semantics; one contract test suite checks every backend.
//!
//! Invariants every implementation keeps:
//! - `commit` is atomic: all of its operations land, or none do, and an acknowledged commit
//!   survives a crash (`kill -9`) of the process.
//! - `(id, version)` is written once. A body and content hash never change after insert; only
//!   the status of a version moves, and every move is audited by the caller in the same commit.
//! - The audit log is append-only and hash-chained; nothing in this trait edits or removes an
//!   audit event.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::asset::{AssetId, AssetKind, AssetRecord, AssetStatus};
use crate::audit::{AuditDraft, AuditEvent, Checkpoint};
use crate::derivation::DerivationEdge;
use crate::error::CoreResult;
pub use crate::principal::ApiKeyRecord;
pub use crate::text::refuse_nul;

/// One operation inside an atomic commit.
#[derive(Debug, Clone)]
pub enum WriteOp {
    /// A new asset (version 1) or the next version of an existing one (head + 1). Writing a
    /// version that exists already fails with `Conflict`: versions are immutable.
    PutVersion(Box<AssetRecord>),
    /// Moves the status of one version (`None`: the head). With `expect`, fails with
    /// `Conflict` unless the current status is that one (optimistic concurrency).
    SetStatus {
        id: AssetId,
        version: Option<u32>,
        status: AssetStatus,
        expect: Option<AssetStatus>,
    },
    AddEdge(DerivationEdge),
    Audit(AuditDraft),
    /// Remembers the answer to an idempotent request.
    Idempotency {
        tenant: String,
        key: String,
        request_hash: String,
        response: serde_json::Value,
    },
}

/// A filter over stored assets. Empty fields do not restrict.
#[derive(Debug, Clone, Default)]
pub struct AssetQuery {
    pub kind: Option<AssetKind>,
    pub tenant: Option<String>,
    pub scope_keys: Option<Vec<String>>,
    pub statuses: Option<Vec<AssetStatus>>,
    pub lookup_key: Option<String>,
    pub content_hash: Option<String>,
    pub owner: Option<String>,
    pub expires_before: Option<DateTime<Utc>>,
    /// Only versions whose retention (`retain_until`) has passed by this time.
    pub retain_before: Option<DateTime<Utc>>,
    /// Only versions created before this time.
    pub created_before: Option<DateTime<Utc>>,
    /// Only versions created at or after this time.
    pub created_since: Option<DateTime<Utc>>,
    pub ids: Option<Vec<AssetId>>,
    /// Only the current (highest) version of each asset.
    pub heads_only: bool,
    /// Results come in (created_at, id, version) order; this skips every row up to and
    /// including this position, for paging without an offset.
    pub after: Option<(DateTime<Utc>, AssetId, u32)>,
    pub limit: Option<usize>,
}

/// Rows per page of [`pages`] when its query sets no limit.
pub const PAGE: usize = 1000;

/// What `query` matches, a page at a time in [`AssetQuery`]'s order (`query.limit` rows per
/// page, [`PAGE`] when unset): each page starts after the last row of the one before, so the
/// whole set is never held at once. Ends after the first empty page or the first error.
pub fn pages<S: AssetStore + ?Sized>(
    store: &S,
    mut query: AssetQuery,
) -> impl Iterator<Item = CoreResult<Vec<AssetRecord>>> + '_ {
    query.limit = Some(query.limit.unwrap_or(PAGE));
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        match store.find(&query) {
            Ok(page) => {
                let Some(last) = page.last() else {
                    done = true;
                    return None;
                };
                query.after = Some(last.position());
                Some(Ok(page))
            }
            Err(e) => {
                done = true;
                Some(Err(e))
            }
        }
    })
}

/// What a physical purge removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgeCounts {
    pub versions: u64,
    pub edges: u64,
}

pub trait AssetStore: Send + Sync {
    /// Applies every operation atomically and returns the audit events it sealed.
    fn commit(&self, ops: Vec<WriteOp>) -> CoreResult<Vec<AuditEvent>>;
    /// The head (highest) version.
    fn get(&self, id: &str) -> CoreResult<Option<AssetRecord>>;
    fn get_version(&self, id: &str, version: u32) -> CoreResult<Option<AssetRecord>>;
    /// Every version, oldest first.
    fn history(&self, id: &str) -> CoreResult<Vec<AssetRecord>>;
    fn find(&self, q: &AssetQuery) -> CoreResult<Vec<AssetRecord>>;
    fn edges_from(&self, parent: &str) -> CoreResult<Vec<DerivationEdge>>;
    fn edges_to(&self, child: &str) -> CoreResult<Vec<DerivationEdge>>;
    /// `(request_hash, response)` remembered for an idempotency key.
    fn idempotent_response(
        &self,
        tenant: &str,
        key: &str,
    ) -> CoreResult<Option<(String, serde_json::Value)>>;
    /// Audit events with `seq > after`, in order.
    fn audit_events(&self, after: u64, limit: usize) -> CoreResult<Vec<AuditEvent>>;
    /// Physically removes every version of these assets and their edges (secure delete), and
    /// records `audit` in the same transaction.
    fn purge(&self, ids: &[AssetId], audit: AuditDraft) -> CoreResult<PurgeCounts>;
    /// Signs a checkpoint of the audit chain's head and stores it, when the store has an audit
    /// key and events were appended since the last checkpoint; returns the newest checkpoint.
    fn checkpoint_audit(&self) -> CoreResult<Option<Checkpoint>>;
    /// Every stored checkpoint, oldest first.
    fn audit_checkpoints(&self) -> CoreResult<Vec<Checkpoint>>;
    /// Physically removes the versions of `id` below `version` (secure delete), keeping that
    /// version, any later one and the asset's edges, and records `audit` in the same
    /// transaction. A summary regenerated as a new version of itself loses the versions that
    /// held a deleted parent's content this way. Returns the number of versions removed.
    fn purge_versions_before(&self, id: &str, version: u32, audit: AuditDraft) -> CoreResult<u64>;
    /// How `purge` removes the bytes, when it differs from the embedded store's secure delete:
    /// a deletion receipt carries it beside the store's level.
    fn purge_method(&self) -> Option<&'static str> {
        None
    }
}

pub trait KeyStore: Send + Sync {
    /// Stores a key and audits its creation in one transaction.
    fn create_key(&self, rec: &ApiKeyRecord) -> CoreResult<()>;
    fn find_key(&self, key_hash: &str) -> CoreResult<Option<ApiKeyRecord>>;
    fn list_keys(&self, tenant: Option<&str>) -> CoreResult<Vec<ApiKeyRecord>>;
    fn revoke_key(&self, id: &str, actor: &str) -> CoreResult<bool>;
}

/// The key of `bytes` in `namespace` (a tenant, or `global`): sha256 over the namespace and
/// the bytes' own sha256, so the same bytes in two tenants are two blobs, and deleting one
/// neither depends on nor reveals the other.
pub fn namespaced_blob_key(namespace: &str, content_sha256: &str) -> String {
    crate::hash::sha256_fields([
        b"blob-namespace-v1".as_slice(),
        namespace.as_bytes(),
        content_sha256.as_bytes(),
    ])
}

/// Content-addressed bytes (skill archives, large bodies). Keys are lower-case sha256 hex.
pub trait BlobStore: Send + Sync {
    /// Stores `bytes` durably and returns their sha256; storing the same bytes twice is a no-op.
    fn put(&self, bytes: &[u8]) -> CoreResult<String>;
    /// Stores `bytes` under [`namespaced_blob_key`] and returns that key.
    fn put_in(&self, namespace: &str, bytes: &[u8]) -> CoreResult<String>;
    fn get(&self, digest: &str) -> CoreResult<Option<Vec<u8>>>;
    /// Unlinks the blob; true if it existed.
    fn delete(&self, digest: &str) -> CoreResult<bool>;
}

/// One run of a maintenance job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRun {
    pub id: i64,
    pub name: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// `running` (still, or killed midway), `ok` or `failed`.
    pub outcome: String,
    pub counts: serde_json::Value,
    pub error: Option<String>,
}

/// The record of job runs. A run killed midway stays `running`; the next run of the same job
/// starts from the last run that finished `ok`.
pub trait JobRunStore: Send + Sync {
    fn start_run(&self, name: &str, at: DateTime<Utc>) -> CoreResult<i64>;
    fn finish_run(
        &self,
        id: i64,
        at: DateTime<Utc>,
        outcome: &str,
        counts: &serde_json::Value,
        error: Option<&str>,
    ) -> CoreResult<()>;
    /// Start time of the newest run of `name` that finished `ok`.
    fn last_ok_start(&self, name: &str) -> CoreResult<Option<DateTime<Utc>>>;
    /// The newest runs, newest first (of one job, or of all).
    fn recent_runs(&self, name: Option<&str>, limit: usize) -> CoreResult<Vec<JobRun>>;
}

/// A stored context manifest: who asked, and the manifest itself (ids, hashes, counts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredManifest {
    pub id: String,
    pub tenant: String,
    pub principal: String,
    pub created_at: DateTime<Utc>,
    pub manifest: serde_json::Value,
    /// The request the pack was compiled from, kept so the pack can be replayed against the
    /// registry as it is later (`None` for manifests stored before requests were kept). It
    /// holds the caller's text: never served, erased with the manifest.
    #[serde(default)]
    pub request: Option<serde_json::Value>,
    /// Every asset the pack included (items and the assets they were cut from, such as a
    /// chunk's document): the index that answers "which manifests included this asset".
    #[serde(default)]
    pub assets: Vec<String>,
}

/// Context manifests: written once, never rewritten, erased with their principal.
pub trait ManifestStore: Send + Sync {
    fn put_manifest(&self, m: &StoredManifest) -> CoreResult<()>;
    fn get_manifest(&self, id: &str) -> CoreResult<Option<StoredManifest>>;
    /// A tenant's manifests (of one principal, or all), newest first, before `before` (an id).
    fn list_manifests(
        &self,
        tenant: &str,
        principal: Option<&str>,
        limit: usize,
    ) -> CoreResult<Vec<StoredManifest>>;
    fn count_manifests(&self, tenant: &str, principal: &str) -> CoreResult<usize>;
    /// Deletes a principal's manifests, and their entries in the asset index; returns how many.
    fn erase_manifests(&self, tenant: &str, principal: &str) -> CoreResult<usize>;
    /// A tenant's manifests (of one principal, or all) that included `asset`, newest first,
    /// at most `limit`, with how many there are in all.
    fn manifests_with_asset(
        &self,
        tenant: &str,
        principal: Option<&str>,
        asset: &str,
        limit: usize,
    ) -> CoreResult<(usize, Vec<StoredManifest>)>;
}

/// Everything a registry keeps in its store, behind one object: a backend implements every
/// part with the same semantics (one contract suite checks them all).
pub trait Store:
    AssetStore
    + KeyStore
    + crate::deletion::ReceiptStore
    + JobRunStore
    + ManifestStore
    + crate::usage::UsageStore
    + crate::feed::FeedStore
    + crate::task::TaskLogStore
{
    /// Makes every committed change durable in the main files and drops earlier images of
    /// overwritten pages (after a purge, no deleted byte may survive in a log). Returns whether
    /// it completed; `false` when a reader held pages back (call again).
    fn checkpoint(&self) -> CoreResult<bool>;
    /// The schema version the store is migrated to.
    fn schema_version(&self) -> CoreResult<i64>;
    /// The change log, when several nodes share this store (PostgreSQL); `None` for a store
    /// that one process owns (SQLite).
    fn cluster(&self) -> Option<&dyn crate::cluster::Cluster> {
        None
    }
}
