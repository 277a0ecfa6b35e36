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

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use registry_core::asset::{AssetKind, AssetMeta, AssetRecord, AssetStatus, SourceKind, Trust};
use registry_core::audit::{AuditAction, AuditDraft};
use registry_core::principal::Principal;
use registry_core::retrieval::{
    Embedder, IndexKeys, TextDoc, TextIndex, VectorEntry, VectorIndex, VisibilityFilter,
};
use registry_core::store::{AssetQuery, AssetStore, BlobStore, WriteOp};
use registry_core::{CoreError, ErrorCode, FieldError, Scope};
use serde::{Deserialize, Serialize};
use skills_sdk::semver::{Version, VersionReq};
use skills_sdk::{
    ArchiveLimits, DiscoverEntry, FileRecord, Manifest, SkillScope, TreeDigest, ValidationMode,
};

use std::sync::Arc;

use registry_core::deletion::Deleter;
use registry_core::locks::KeyedLocks;

use crate::error::{Error, Result};
pub use crate::lifecycle::LifecycleState;
use crate::lifecycle::{self, Action};

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
    pub(crate) observe: Arc<parking_lot::RwLock<crate::runs::ObservePolicy>>,
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
    pub fn set_observe_policy(&self, policy: crate::runs::ObservePolicy) {
        *self.observe.write() = policy;
    }

    pub fn observe_policy(&self) -> crate::runs::ObservePolicy {
        *self.observe.read()
    }

    /// Checks and stores an uploaded archive as a draft (see [`publish`]).
    pub fn publish(
        &self,
        p: &Principal,
        bytes: &[u8],
        set_version: Option<&str>,
    ) -> Result<Published> {
        publish(self, p, bytes, set_version)
    }

    pub fn record_tests(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: TestResultsRequest,
    ) -> Result<Loaded> {
        crate::proof::record_tests(self, p, name, version, req)
    }

    /// A reviewer's waiver of Test for a version that declares no test (see [`crate::proof`]).
    pub fn record_waiver(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: crate::proof::TestWaiverRequest,
    ) -> Result<Loaded> {
        crate::proof::record_waiver(self, p, name, version, req)
    }

    /// One stored test log of a version (see [`crate::proof`]).
    pub fn test_log(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        log_digest: &str,
    ) -> Result<Vec<u8>> {
        crate::proof::test_log(self, p, name, version, log_digest)
    }

    /// Records a harness's run of a version (see [`crate::runs`]).
    pub fn report_run(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: crate::runs::RunReport,
    ) -> Result<crate::runs::RunView> {
        crate::runs::report(self, p, name, version, req)
    }

    /// The observed figures of a version and its comparison with the release it replaced.
    pub fn run_summary(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
    ) -> Result<crate::runs::RunSummary> {
        crate::runs::summary_view(self, p, name, version)
    }

    /// The newest runs of the version asset `version_asset` the caller may see (at most
    /// `limit`), and whether there were more.
    pub fn recent_runs(
        &self,
        p: &Principal,
        version_asset: &str,
        limit: usize,
    ) -> Result<(Vec<crate::runs::RunView>, bool)> {
        crate::runs::recent_runs(self, p, version_asset, limit)
    }

    pub fn review(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: ReviewRequest,
    ) -> Result<Loaded> {
        review(self, p, name, version, req)
    }

    pub fn promote(&self, p: &Principal, name: &str, version: &str) -> Result<Loaded> {
        promote(self, p, name, version)
    }

    /// Records a platform principal's override of a failing scan (see [`ScanOverride`]).
    pub fn scan_override(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: ScanOverrideRequest,
    ) -> Result<Loaded> {
        scan_override(self, p, name, version, req)
    }

    pub fn deprecate(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: DeprecateRequest,
    ) -> Result<Loaded> {
        deprecate(self, p, name, version, req)
    }

    pub fn yank(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: YankRequest,
    ) -> Result<Loaded> {
        yank(self, p, name, version, req)
    }

    pub fn unyank(&self, p: &Principal, name: &str, version: &str) -> Result<Loaded> {
        unyank(self, p, name, version)
    }

    pub fn rollback(&self, p: &Principal, name: &str, req: RollbackRequest) -> Result<Loaded> {
        rollback(self, p, name, req)
    }

    pub fn delete_version(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        reason: Option<String>,
    ) -> Result<registry_core::deletion::Receipt> {
        delete_version(self, p, name, version, reason)
    }

    /// The versions of `name` the caller sees in the scope that answers for the name (drafts
    /// only to whoever may see them; see [`crate::resolve`]).
    pub fn visible_versions(&self, p: &Principal, name: &str) -> Result<Vec<Loaded>> {
        crate::resolve::visible_versions(self, p, name)
    }

    /// `name@version` as the caller would select it: every door that loads or shows a
    /// version by name asks this (see [`crate::resolve`]).
    pub fn resolve(&self, p: &Principal, name: &str, version: &str) -> Result<Loaded> {
        crate::resolve::version(self, p, name, version)
    }

    /// A version by its tree digest, through the same rules as [`Self::resolve`].
    pub fn resolve_digest(&self, p: &Principal, digest: &str) -> Result<Loaded> {
        crate::resolve::by_digest(self, p, digest)
    }

    pub fn current_release(&self, versions: &[Loaded]) -> Result<Option<ReleaseTarget>> {
        current_release(self, versions)
    }

    /// The current release of `name` as the caller would select it, loaded.
    pub fn current(&self, p: &Principal, name: &str) -> Result<Loaded> {
        crate::resolve::current(self, p, name)
    }

    pub fn discover(
        &self,
        p: &Principal,
        q: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DiscoverView>> {
        discover(self, p, q, limit)
    }

    pub fn reindex(&self) -> Result<usize> {
        reindex(self)
    }

    /// Re-writes the discover entries of the text index only (see [`reindex_with`]).
    pub fn reindex_text(&self) -> Result<usize> {
        reindex_with(self, false)
    }

    pub fn current_index_docs(&self) -> Result<Vec<TextDoc>> {
        current_index_docs(self)
    }

    pub fn archive_bytes(&self, l: &Loaded) -> Result<Vec<u8>> {
        archive_bytes(self, l)
    }

    pub fn archive(&self, l: &Loaded) -> Result<Arc<skills_sdk::SkillArchive>> {
        archive(self, l)
    }

    pub fn instructions(&self, l: &Loaded) -> Result<String> {
        instructions(self, l)
    }

    pub fn file(&self, l: &Loaded, path: &str) -> Result<skills_sdk::ArchivedFile> {
        file(self, l, path)
    }

    pub fn discover_list(
        &self,
        p: &Principal,
        q: Option<&str>,
        limit: Option<usize>,
    ) -> Result<crate::views::DiscoverList> {
        crate::views::discover_list(self, p, q, limit)
    }

    pub fn select_view(
        &self,
        p: &Principal,
        name: &str,
        version: Option<&str>,
        tools: &[String],
        permissions: &[String],
        environment: &[String],
    ) -> Result<crate::views::SelectView> {
        crate::views::select_view(self, p, name, version, tools, permissions, environment)
    }

    pub fn instructions_view(&self, l: &Loaded) -> Result<crate::views::InstructionsView> {
        crate::views::instructions_view(self, l)
    }
}

/// Lookup-key prefix of release pointers; `:` never occurs in a skill name.
pub const RELEASE_PREFIX: &str = "release:";
/// Index tag of discover entries.
pub const DISCOVER_TAG: &str = "skill:discover";
/// A name the route table uses (`/v1/skills/by-digest/…`), so no skill may take it.
pub const RESERVED_NAMES: &[&str] = &["by-digest"];

/// Longest review comment.
pub const MAX_REVIEW_COMMENT_CHARS: usize = 2000;
/// Most reviews one version may collect (each lifecycle step carries them all).
pub const MAX_REVIEWS: usize = 20;
/// Longest deprecation message and yank reason.
pub const MAX_NOTE_CHARS: usize = 1000;

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
    fn get_or_load(
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TestResult {
    /// Name of a test declared in `skill.toml`.
    pub name: String,
    pub passed: bool,
    pub duration_ms: u64,
    /// `sha256:<hex>` of the captured output.
    pub log_digest: String,
    /// The captured output itself (UTF-8, at most 256 KiB): stored as a blob under
    /// `log_digest` in the version's tenant, readable by the scope's reviewers, testers and
    /// admins, purged with the version. It must hash to `log_digest`.
    #[serde(default, skip_serializing)]
    #[schemars(length(max = 262144))]
    pub log: Option<String>,
    /// Whether the log was uploaded and is stored (answers only).
    #[serde(default)]
    pub log_stored: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TestRun {
    /// The digest the tests ran against; always the version's own digest.
    pub digest: String,
    pub results: Vec<TestResult>,
    pub passed: bool,
    pub recorded_by: String,
    pub at: DateTime<Utc>,
    /// Recorded by the version's own author: kept and shown, never enough for Test.
    #[serde(default)]
    pub self_reported: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Reject,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReviewRecord {
    pub reviewer: String,
    pub decision: Decision,
    pub comment: String,
    pub digest: String,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Deprecation {
    pub message: String,
    pub replacement: Option<String>,
}

/// The discover-level entry of a version, with the real tokenizer's count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DiscoverView {
    pub name: String,
    pub description: String,
    pub applicability: Vec<String>,
    /// Main risks, as short phrases.
    pub risks: Vec<String>,
    pub version: String,
    pub digest: String,
    /// `global`, `tenant` or `project:<name>`.
    pub scope: String,
    pub deprecated: bool,
    /// Tokens of the rendered entry by the embedding model's WordPiece tokenizer.
    pub tokens: usize,
}

/// The body of a skill-version asset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionBody {
    pub name: String,
    pub version: String,
    /// Canonical tree digest, `sha256:<hex>`.
    pub digest: String,
    /// sha256 (hex) of the archive bytes.
    pub archive_sha256: String,
    /// The key of the archive in the blob store, private to the version's tenant (absent in
    /// versions stored before such keys: their blob is keyed by `archive_sha256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_blob: Option<String>,
    pub archive_size: u64,
    pub author: String,
    pub scope: String,
    pub frontmatter: serde_json::Value,
    pub manifest: Option<Manifest>,
    pub files: Vec<FileRecord>,
    pub discover: DiscoverView,
    pub state: LifecycleState,
    #[serde(default)]
    pub tests: Option<TestRun>,
    #[serde(default)]
    pub reviews: Vec<ReviewRecord>,
    #[serde(default)]
    pub deprecation: Option<Deprecation>,
    /// The state a yanked version returns to on unyank.
    #[serde(default)]
    pub yanked_from: Option<LifecycleState>,
    #[serde(default)]
    pub yank_reason: Option<String>,
    #[serde(default)]
    pub published_at: Option<DateTime<Utc>>,
    /// The supply-chain scan run at publish (absent in versions stored before the scan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan: Option<skills_sdk::ScanReport>,
    /// A platform principal's override of a failing scan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan_override: Option<ScanOverride>,
    /// The author's own latest test results (self-reported: never enough for Test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_reported: Option<TestRun>,
    /// A reviewer's waiver of Test for a version that declares no test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_waiver: Option<crate::proof::TestWaiver>,
    /// Blob keys of the uploaded test logs (purged with the version).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blob_digests: Vec<String>,
    /// Set once when observed runs put a released version back in the review queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observe_flag: Option<crate::runs::ObserveFlag>,
}

/// A platform principal's decision to release a version whose scan failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScanOverride {
    pub by: String,
    pub reason: String,
    /// The digest the override was recorded for; always the version's own.
    pub digest: String,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ScanOverrideRequest {
    /// Why the failing scan is overridden (at most 1,000 characters).
    #[schemars(pattern(registry_core::text::NOT_BLANK))]
    pub reason: String,
}

/// Refuses a step on a version whose scan failed and was not overridden: 409 `SCAN_FAILED`
/// with the failing findings in `details.findings`.
fn require_scan(b: &VersionBody, action: &str) -> Result<()> {
    let Some(scan) = &b.scan else { return Ok(()) };
    let overridden = b
        .scan_override
        .as_ref()
        .is_some_and(|o| o.digest == b.digest);
    if !scan.failed() || overridden {
        return Ok(());
    }
    let findings: Vec<&skills_sdk::Finding> = scan
        .findings
        .iter()
        .filter(|f| f.severity == skills_sdk::FindingSeverity::Fail)
        .collect();
    Err(Error::new(
        ErrorCode::ScanFailed,
        format!(
            "{}@{}: the supply-chain scan failed ({} finding(s)); {action} needs a platform override",
            b.name,
            b.version,
            findings.len()
        ),
    )
    .with_details(serde_json::json!({
        "verdict": scan.verdict,
        "findings": findings,
    })))
}

/// The body of a release pointer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleaseBody {
    pub name: String,
    /// `None` when no version is released any more (all yanked).
    pub current: Option<ReleaseTarget>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleaseTarget {
    pub version: String,
    pub digest: String,
    pub version_asset: String,
    /// Set by a rollback: the release stays here until the next promote.
    pub pinned: bool,
    pub entry: DiscoverView,
}

/// A stored version with its parsed body.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub rec: AssetRecord,
    pub body: VersionBody,
}

impl Loaded {
    pub(crate) fn of(rec: AssetRecord) -> Result<Self> {
        let body: VersionBody = serde_json::from_value(rec.body.clone())
            .map_err(|e| Error::internal(format!("corrupt skill body {}: {e}", rec.meta.id)))?;
        Ok(Loaded { rec, body })
    }

    pub fn semver(&self) -> Option<Version> {
        Version::parse(&self.body.version).ok()
    }
}

pub fn limits() -> ArchiveLimits {
    ArchiveLimits::default()
}

fn archive_error(e: skills_sdk::SdkError) -> Error {
    Error::validation(format!("the archive was refused: {e}"))
        .with_details(serde_json::json!({ "code": e.code() }))
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

fn scope_for(p: &Principal, declared: Option<&SkillScope>) -> Scope {
    match declared {
        Some(SkillScope::Global) => Scope::global(),
        Some(SkillScope::Project(proj)) => Scope {
            project: Some(proj.clone()),
            ..Scope::tenant(p.tenant.clone())
        },
        Some(SkillScope::Tenant) | None => Scope::tenant(p.tenant.clone()),
    }
}

fn scope_label(s: &Scope) -> String {
    match (&s.tenant, &s.project) {
        (None, _) => "global".into(),
        (Some(_), Some(p)) => format!("project:{p}"),
        (Some(_), None) => "tenant".into(),
    }
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

/// Versions of `name` in one exact scope, any state.
fn versions_in_scope(store: &dyn AssetStore, scope: &Scope, name: &str) -> Result<Vec<Loaded>> {
    let recs = store.find(&AssetQuery {
        kind: Some(AssetKind::SkillVersion),
        tenant: scope.tenant.clone(),
        scope_keys: Some(vec![scope.key()]),
        lookup_key: Some(name.to_string()),
        heads_only: true,
        ..Default::default()
    })?;
    recs.into_iter().map(Loaded::of).collect()
}

/// The outcome of a publish.
#[derive(Debug)]
pub struct Published {
    pub created: bool,
    pub version: Loaded,
}

/// Checks and stores an uploaded archive as a draft. `set_version` gives plain Agent Skills
/// (no `skill.toml`, no `metadata.version`) their version; it must agree with a declared one.
pub(crate) fn publish(
    s: &SkillsService,
    p: &Principal,
    bytes: &[u8],
    set_version: Option<&str>,
) -> Result<Published> {
    publish_citing(s, p, bytes, set_version, vec![])
}

/// As [`publish`], and a new draft records `cites` (each edge's child is the new version) in
/// the same commit: a draft made from procedures cites them.
pub(crate) fn publish_citing(
    s: &SkillsService,
    p: &Principal,
    bytes: &[u8],
    set_version: Option<&str>,
    cites: Vec<registry_core::derivation::DerivationEdge>,
) -> Result<Published> {
    let archive = skills_sdk::read_archive(bytes, &limits()).map_err(archive_error)?;
    let report = skills_sdk::validate_archive(&archive, ValidationMode::Strict);
    if !report.is_valid() {
        return Err(Error::validation("the skill is invalid").with_details(
            serde_json::json!({ "code": "skill.invalid", "diagnostics": report.diagnostics }),
        ));
    }
    let skill = report
        .skill
        .ok_or_else(|| Error::internal("a valid report without a skill"))?;
    let name = skill.name().to_string();
    if RESERVED_NAMES.contains(&name.as_str()) {
        return Err(
            Error::validation(format!("the skill name {name:?} is reserved"))
                .with_details(FieldError::new("name").with("code", "name.reserved")),
        );
    }
    let given = match set_version {
        None => None,
        Some(v) => Some(Version::parse(v).map_err(|e| {
            Error::validation(format!("version {v:?} is not semver: {e}"))
                .with_details(FieldError::new("version"))
        })?),
    };
    let version = match (skill.version(), given) {
        (Some(a), Some(b)) if a != b => {
            return Err(Error::validation(format!(
                "version {b} disagrees with the skill's own version {a}"
            ))
            .with_details(FieldError::new("version")));
        }
        (Some(v), _) | (None, Some(v)) => v,
        (None, None) => {
            return Err(Error::validation(
                "the skill declares no version: add skill.toml or pass ?version=",
            )
            .with_details(FieldError::new("version").with("code", "version.missing")));
        }
    };
    let scope = scope_for(p, skill.manifest.as_ref().and_then(|m| m.scope.as_ref()));
    if !p.can_write_into(&scope) {
        return Err(Error::forbidden(if scope.tenant.is_none() {
            "only admins may publish global skills"
        } else {
            "the writer role is required to publish"
        }));
    }
    let digest = archive.digest().to_string();
    let _guard = lock_skill(s, p, &name);
    crate::resolve::check_not_held(s, p, &name, &version.to_string(), &scope)?;
    let existing = versions_in_scope(s.store.as_ref(), &scope, &name)?;
    if let Some(prev) = existing
        .iter()
        .find(|l| l.semver().as_ref() == Some(&version))
    {
        if prev.body.digest == digest {
            return Ok(Published {
                created: false,
                version: prev.clone(),
            });
        }
        return Err(Error::new(
            ErrorCode::Conflict,
            format!("{name}@{version} exists with other content; versions are immutable"),
        )
        .with_details(serde_json::json!({"existing_digest": prev.body.digest, "digest": digest})));
    }
    let archive_sha = registry_core::hash::sha256_hex(bytes);
    let namespace = scope.tenant.clone().unwrap_or_else(|| "global".to_string());
    let archive_blob = s.blobs.put_in(&namespace, bytes)?;
    let mut entry = DiscoverEntry::from_skill(&skill, Some(archive.tree()));
    entry.version = Some(version.clone());
    let rendered = entry.render();
    let tokens = s.embedder.count_tokens(&rendered)?;
    let label = scope_label(&scope);
    let discover = DiscoverView {
        name: name.clone(),
        description: entry.description.clone(),
        applicability: entry.applicability.clone(),
        risks: entry
            .risks
            .iter()
            .map(|r| r.describe().to_string())
            .collect(),
        version: version.to_string(),
        digest: digest.clone(),
        scope: label.clone(),
        deprecated: false,
        tokens,
    };
    let body = VersionBody {
        name: name.clone(),
        version: version.to_string(),
        digest: digest.clone(),
        archive_sha256: archive_sha,
        archive_blob: Some(archive_blob),
        archive_size: bytes.len() as u64,
        author: p.user.clone(),
        scope: label,
        frontmatter: serde_json::to_value(&skill.frontmatter).map_err(Error::internal)?,
        manifest: skill.manifest.clone(),
        files: archive.tree().files().to_vec(),
        discover,
        state: LifecycleState::Draft,
        tests: None,
        reviews: vec![],
        deprecation: None,
        yanked_from: None,
        yank_reason: None,
        published_at: None,
        scan: Some(skills_sdk::scan_archive(&archive)),
        scan_override: None,
        self_reported: None,
        test_waiver: None,
        blob_digests: vec![],
        observe_flag: None,
    };
    let mut meta = AssetMeta::new(
        AssetKind::SkillVersion,
        scope,
        p.user.clone(),
        SourceKind::UserStatement,
    );
    meta.trust = Trust::UserStatement;
    meta.content_hash = digest_hex(&digest);
    meta.status = AssetStatus::Draft;
    let rec = AssetRecord {
        meta,
        lookup_key: Some(name),
        body: serde_json::to_value(&body).map_err(Error::internal)?,
    };
    let id = rec.meta.id.clone();
    let mut ops = vec![
        WriteOp::PutVersion(Box::new(rec.clone())),
        WriteOp::Audit(audit(
            p,
            AuditAction::SkillPublish,
            &rec.meta.scope,
            &id,
            None,
            Some(digest_hex(&digest)),
        )),
    ];
    ops.extend(cites.into_iter().map(|e| {
        WriteOp::AddEdge(registry_core::derivation::DerivationEdge {
            child: id.clone(),
            ..e
        })
    }));
    s.store.commit(ops)?;
    Ok(Published {
        created: true,
        version: Loaded { rec, body },
    })
}

/// What a lifecycle step changes, and how the release pointer should follow.
pub(crate) enum Pointer {
    /// Keep the pinned target if still released, else fall back to the highest released.
    Follow,
    /// The just-promoted version becomes current unless a higher one already is.
    Promote,
    /// Pin the release to this version asset.
    Pin(String),
}

/// Writes the next image of `cur` with `body`, moves the release pointer, audits, indexes.
pub(crate) fn step(
    s: &SkillsService,
    p: &Principal,
    cur: &Loaded,
    body: VersionBody,
    action: AuditAction,
    pointer: Pointer,
) -> Result<Loaded> {
    let mut meta = cur.rec.meta.clone();
    meta.version += 1;
    meta.updated_at = Utc::now();
    meta.status = body.state.asset_status();
    let rec = AssetRecord {
        meta,
        lookup_key: cur.rec.lookup_key.clone(),
        body: serde_json::to_value(&body).map_err(Error::internal)?,
    };
    let next = Loaded { rec, body };
    let hash = Some(digest_hex(&next.body.digest));
    let mut ops = vec![
        WriteOp::PutVersion(Box::new(next.rec.clone())),
        WriteOp::Audit(audit(
            p,
            action,
            &next.rec.meta.scope,
            &next.rec.meta.id,
            hash.clone(),
            hash,
        )),
    ];
    let index = release_ops(s, p, &next, pointer, &mut ops)?;
    s.store.commit(ops)?;
    if let Some(op) = index {
        apply_index(s, op)?;
    }
    Ok(next)
}

enum IndexOp {
    Upsert(TextDoc),
    Delete(String),
}

fn apply_index(s: &SkillsService, op: IndexOp) -> Result<()> {
    match op {
        IndexOp::Upsert(d) => upsert_docs(s, &[d])?,
        IndexOp::Delete(id) => {
            s.text.delete(std::slice::from_ref(&id))?;
            s.vectors.delete(&[id])?;
        }
    }
    Ok(())
}

/// Writes discover entries into both indexes: the text as it is, and its embedding.
fn upsert_docs(s: &SkillsService, docs: &[TextDoc]) -> Result<()> {
    let texts: Vec<&str> = docs.iter().map(|d| d.text.as_str()).collect();
    let tag = s.embedder.info().tag();
    let mut entries = Vec::with_capacity(docs.len());
    for (batch, texts) in docs.chunks(32).zip(texts.chunks(32)) {
        let fitted: Vec<&str> = texts
            .iter()
            .map(|t| {
                s.embedder
                    .prefix_within(t, s.embedder.info().max_tokens.saturating_sub(16))
            })
            .collect::<std::result::Result<_, _>>()?;
        for (d, v) in batch.iter().zip(s.embedder.embed(&fitted)?) {
            entries.push(VectorEntry {
                keys: d.keys.clone(),
                vector: v,
                model: tag.clone(),
            });
        }
    }
    s.text.upsert(docs)?;
    s.vectors.upsert(&entries)?;
    Ok(())
}

/// Reciprocal-rank constant of discovery's fusion (the engine's default).
const RRF_K: f32 = 60.0;
/// How far below the best cosine a vector-only hit may be and still be listed.
const DENSE_ONLY_MARGIN: f32 = 0.05;

/// Ids of the discover entries for `q`, best first: the text and vector legs, each filtered by
/// `filter` inside its index, fused by reciprocal rank.
fn discover_ids(
    s: &SkillsService,
    q: &str,
    filter: &VisibilityFilter,
    k: usize,
) -> Result<Vec<String>> {
    let text = s.text.search(q, filter, k)?;
    let qv = s.embedder.embed_query(&[q])?.pop().unwrap_or_default();
    let mut dense = s.vectors.search(&qv, filter, k)?;
    // A vector leg ranks every entry; one the text leg did not find is kept only when it is
    // about as close as the closest, so a query matching nothing does not list everything.
    let best = dense.first().map_or(0.0, |h| h.score);
    dense.retain(|h| {
        h.score >= best - DENSE_ONLY_MARGIN || text.iter().any(|t| t.asset_id == h.asset_id)
    });
    let mut fused: std::collections::HashMap<String, f32> = Default::default();
    for leg in [&text, &dense] {
        for (rank, h) in leg.iter().enumerate() {
            *fused.entry(h.asset_id.clone()).or_default() += 1.0 / (RRF_K + rank as f32 + 1.0);
        }
    }
    let mut ids: Vec<(String, f32)> = fused.into_iter().collect();
    ids.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(ids.into_iter().map(|(id, _)| id).collect())
}

fn discover_text(e: &DiscoverView) -> String {
    format!(
        "{} {} {}",
        e.name.replace('-', " "),
        e.description,
        e.applicability.join(" ")
    )
}

fn index_doc(rec: &AssetRecord, entry: &DiscoverView) -> TextDoc {
    TextDoc {
        keys: IndexKeys::of(
            &rec.meta,
            AssetKind::SkillVersion,
            vec![DISCOVER_TAG.to_string()],
        ),
        text: discover_text(entry),
    }
}

/// The discover entries of every current release, as the text index should hold them.
pub(crate) fn current_index_docs(s: &SkillsService) -> Result<Vec<TextDoc>> {
    let recs = s.store.find(&AssetQuery {
        kind: Some(AssetKind::SkillVersion),
        heads_only: true,
        statuses: Some(vec![AssetStatus::Active]),
        ..Default::default()
    })?;
    let mut docs = vec![];
    for r in recs {
        if !r
            .lookup_key
            .as_deref()
            .is_some_and(|k| k.starts_with(RELEASE_PREFIX))
        {
            continue;
        }
        let b: ReleaseBody = serde_json::from_value(r.body.clone()).map_err(Error::internal)?;
        if let Some(t) = b.current {
            docs.push(index_doc(&r, &t.entry));
        }
    }
    Ok(docs)
}

fn load_pointer(
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

/// Adds the pointer move (if the current release changes) to `ops`; returns the index change.
fn release_ops(
    s: &SkillsService,
    p: &Principal,
    changed: &Loaded,
    pointer: Pointer,
    ops: &mut Vec<WriteOp>,
) -> Result<Option<IndexOp>> {
    let scope = changed.rec.meta.scope.clone();
    let name = changed.body.name.clone();
    let mut all = versions_in_scope(s.store.as_ref(), &scope, &name)?;
    for l in &mut all {
        if l.rec.meta.id == changed.rec.meta.id {
            *l = changed.clone();
        }
    }
    let released = |id: &str| {
        all.iter()
            .find(|l| l.rec.meta.id == id && l.body.state.is_released())
    };
    let highest = all
        .iter()
        .filter(|l| l.body.state.is_released())
        .max_by_key(|l| (l.body.state == LifecycleState::Published, l.semver()));
    let old = load_pointer(s.store.as_ref(), &scope, &name)?;
    let old_target = old.as_ref().and_then(|(_, b)| b.current.clone());
    let old_current = old_target.as_ref().and_then(|t| released(&t.version_asset));
    let (target, pinned) = match pointer {
        Pointer::Pin(id) => (released(&id), true),
        Pointer::Promote => match old_current {
            Some(c) if c.semver() > changed.semver() => {
                (Some(c), old_target.as_ref().is_some_and(|t| t.pinned))
            }
            _ => (released(&changed.rec.meta.id), false),
        },
        Pointer::Follow => match (old_current, old_target.as_ref()) {
            (Some(c), Some(t)) if t.pinned => (Some(c), true),
            _ => (highest, false),
        },
    };
    let new_target = target.map(|l| {
        let mut entry = l.body.discover.clone();
        entry.deprecated = l.body.state == LifecycleState::Deprecated;
        ReleaseTarget {
            version: l.body.version.clone(),
            digest: l.body.digest.clone(),
            version_asset: l.rec.meta.id.clone(),
            pinned,
            entry,
        }
    });
    if new_target == old_target {
        return Ok(None);
    }
    let body = ReleaseBody {
        name: name.clone(),
        current: new_target.clone(),
    };
    let body_json = serde_json::to_value(&body).map_err(Error::internal)?;
    let after = registry_core::hash::sha256_hex(body_json.to_string());
    let (meta, before) = match old {
        Some((r, _)) => {
            let mut m = r.meta.clone();
            let before = Some(m.content_hash.clone());
            m.version += 1;
            m.updated_at = Utc::now();
            (m, before)
        }
        None => {
            let m = AssetMeta::new(
                AssetKind::SkillVersion,
                scope,
                p.user.clone(),
                SourceKind::System,
            );
            (m, None)
        }
    };
    let mut meta = meta;
    meta.content_hash = after.clone();
    meta.status = if new_target.is_some() {
        AssetStatus::Active
    } else {
        AssetStatus::Yanked
    };
    let rec = AssetRecord {
        meta,
        lookup_key: Some(format!("{RELEASE_PREFIX}{name}")),
        body: body_json,
    };
    let id = rec.meta.id.clone();
    ops.push(WriteOp::Audit(audit(
        p,
        AuditAction::SkillRelease,
        &rec.meta.scope,
        &id,
        before,
        Some(after),
    )));
    ops.insert(0, WriteOp::PutVersion(Box::new(rec.clone())));
    Ok(Some(match &new_target {
        Some(t) => IndexOp::Upsert(index_doc(&rec, &t.entry)),
        None => IndexOp::Delete(id),
    }))
}

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
                    .reason("invalid")
                    .limit(MAX_NOTE_CHARS),
            ))
        }
        _ => Ok(()),
    }
}

pub(crate) fn require_write(p: &Principal, l: &Loaded) -> Result<()> {
    if p.can_write_into(&l.rec.meta.scope) {
        Ok(())
    } else {
        Err(Error::forbidden(
            "the writer role in the skill's scope is required (admin for global skills)",
        ))
    }
}

/// The governance of a released version (yank, unyank, deprecate, rollback): the writer role
/// in its scope (platform keys for global skills) and, besides, its author or an admin of its
/// scope (a platform admin for global skills). Every door calls the service steps that ask it.
pub fn require_release_governance(p: &Principal, l: &Loaded) -> Result<()> {
    require_write(p, l)?;
    if crate::resolve::is_author(p, l) || p.governs(&l.rec.meta.scope) {
        Ok(())
    } else {
        Err(Error::forbidden(format!(
            "{}@{} is governed by its author or an admin of its scope",
            l.body.name, l.body.version
        ))
        .with_details(serde_json::json!({"reason": "not_release_governor"})))
    }
}

/// Re-reads the version under the write lock so a step never acts on a stale image; through
/// the resolver ([`crate::resolve::for_step`]).
pub(crate) fn reload(
    s: &SkillsService,
    p: &Principal,
    name: &str,
    version: &str,
    action: Action,
) -> Result<Loaded> {
    crate::resolve::for_step(s, p, name, version, Some(action))
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TestResultsRequest {
    /// The digest the tests ran against; must be the version's digest.
    pub digest: String,
    #[serde(deserialize_with = "registry_core::wire::objects")]
    pub results: Vec<TestResult>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReviewRequest {
    pub decision: Decision,
    #[serde(default)]
    pub comment: String,
}

pub(crate) fn review(
    s: &SkillsService,
    p: &Principal,
    name: &str,
    version: &str,
    req: ReviewRequest,
) -> Result<Loaded> {
    let _guard = lock_skill(s, p, name);
    let cur = reload(s, p, name, version, Action::Review)?;
    if !p.can_review_in(&cur.rec.meta.scope) {
        return Err(Error::forbidden(if cur.rec.meta.scope.tenant.is_none() {
            "reviewing a global skill needs a platform reviewer"
        } else {
            "the reviewer role in the skill's tenant is required"
        }));
    }
    if req.comment.chars().count() > MAX_REVIEW_COMMENT_CHARS {
        return Err(Error::new(
            ErrorCode::PayloadTooLarge,
            format!("a review comment is at most {MAX_REVIEW_COMMENT_CHARS} characters"),
        )
        .with_details(
            FieldError::new("comment")
                .reason("too_large")
                .limit(MAX_REVIEW_COMMENT_CHARS),
        ));
    }
    if cur.body.reviews.len() >= MAX_REVIEWS {
        return Err(Error::new(
            ErrorCode::Conflict,
            format!("{name}@{version} has {MAX_REVIEWS} reviews already; publish a new version"),
        )
        .with_details(
            FieldError::new("reviews")
                .reason("limit")
                .limit(MAX_REVIEWS),
        ));
    }
    if cur.body.author == p.user {
        return Err(
            Error::forbidden("the author may not review their own skill")
                .with_details(serde_json::json!({"reason": "self_review"})),
        );
    }
    crate::proof::require_not_tester(p, &cur)?;
    lifecycle::check(cur.body.state, Action::Review)?;
    if req.decision == Decision::Approve {
        require_scan(&cur.body, "approval")?;
    }
    let mut body = cur.body.clone();
    body.reviews.push(ReviewRecord {
        reviewer: p.user.clone(),
        decision: req.decision,
        comment: req.comment,
        digest: cur.body.digest.clone(),
        at: Utc::now(),
    });
    body.state = match req.decision {
        Decision::Approve => LifecycleState::Approved,
        Decision::Reject => LifecycleState::Rejected,
    };
    step(s, p, &cur, body, AuditAction::SkillReview, Pointer::Follow)
}

pub(crate) fn promote(
    s: &SkillsService,
    p: &Principal,
    name: &str,
    version: &str,
) -> Result<Loaded> {
    let _guard = lock_skill(s, p, name);
    let cur = reload(s, p, name, version, Action::Promote)?;
    require_write(p, &cur)?;
    // Before the state machine: a version short of Test evidence is told which evidence, and
    // one whose scan failed is told so with the findings, whatever step it stands at.
    if !crate::resolve::holds_version(&cur) {
        crate::proof::require_test_evidence(&cur.body)?;
        require_scan(&cur.body, "promotion")?;
    }
    lifecycle::check(cur.body.state, Action::Promote)?;
    crate::resolve::check_not_held(s, p, name, version, &cur.rec.meta.scope)?;
    let b = &cur.body;
    let tested = crate::proof::test_passed(b);
    let approved = b.reviews.last().is_some_and(|r| {
        r.decision == Decision::Approve && r.digest == b.digest && r.reviewer != b.author
    });
    if !tested || !approved {
        return Err(lifecycle::invalid(b.state, "promote").into());
    }
    require_scan(b, "promotion")?;
    let mut body = cur.body.clone();
    body.state = LifecycleState::Published;
    body.published_at = Some(Utc::now());
    step(
        s,
        p,
        &cur,
        body,
        AuditAction::SkillPromote,
        Pointer::Promote,
    )
}

/// A platform principal overrides a failing scan so the version can be approved and promoted.
/// The reason stays in the version; the audit event (`skill.scan_override`) holds ids and the
/// digest only.
pub(crate) fn scan_override(
    s: &SkillsService,
    p: &Principal,
    name: &str,
    version: &str,
    req: ScanOverrideRequest,
) -> Result<Loaded> {
    let _guard = lock_skill(s, p, name);
    let cur = reload(s, p, name, version, Action::Review)?;
    if !p.platform {
        return Err(Error::forbidden(
            "only a platform principal may override a failing scan",
        ));
    }
    if registry_core::text::is_blank(&req.reason) {
        return Err(Error::validation("an override needs a reason")
            .with_details(FieldError::new("reason").reason("empty")));
    }
    check_note("reason", Some(&req.reason))?;
    if !cur.body.scan.as_ref().is_some_and(|r| r.failed()) {
        return Err(Error::new(
            ErrorCode::Conflict,
            format!("{name}@{version}: the scan did not fail; there is nothing to override"),
        ));
    }
    let mut body = cur.body.clone();
    body.scan_override = Some(ScanOverride {
        by: p.user.clone(),
        reason: req.reason,
        digest: cur.body.digest.clone(),
        at: Utc::now(),
    });
    step(
        s,
        p,
        &cur,
        body,
        AuditAction::SkillScanOverride,
        Pointer::Follow,
    )
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DeprecateRequest {
    #[schemars(pattern(registry_core::text::NOT_BLANK))]
    pub message: String,
    #[serde(default)]
    pub replacement: Option<String>,
}

pub(crate) fn deprecate(
    s: &SkillsService,
    p: &Principal,
    name: &str,
    version: &str,
    req: DeprecateRequest,
) -> Result<Loaded> {
    let _guard = lock_skill(s, p, name);
    let cur = reload(s, p, name, version, Action::Deprecate)?;
    require_release_governance(p, &cur)?;
    lifecycle::check(cur.body.state, Action::Deprecate)?;
    if registry_core::text::is_blank(&req.message) {
        return Err(Error::validation("a deprecation needs a message")
            .with_details(FieldError::new("message").reason("empty")));
    }
    check_note("message", Some(&req.message))?;
    check_note("replacement", req.replacement.as_deref())?;
    let mut body = cur.body.clone();
    body.state = LifecycleState::Deprecated;
    body.deprecation = Some(Deprecation {
        message: req.message,
        replacement: req.replacement,
    });
    body.discover.deprecated = true;
    step(
        s,
        p,
        &cur,
        body,
        AuditAction::SkillDeprecate,
        Pointer::Follow,
    )
}

#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct YankRequest {
    #[serde(default)]
    pub reason: Option<String>,
}

pub(crate) fn yank(
    s: &SkillsService,
    p: &Principal,
    name: &str,
    version: &str,
    req: YankRequest,
) -> Result<Loaded> {
    let _guard = lock_skill(s, p, name);
    let cur = reload(s, p, name, version, Action::Yank)?;
    require_release_governance(p, &cur)?;
    lifecycle::check(cur.body.state, Action::Yank)?;
    check_note("reason", req.reason.as_deref())?;
    let mut body = cur.body.clone();
    body.yanked_from = Some(cur.body.state);
    body.yank_reason = req.reason;
    body.state = LifecycleState::Yanked;
    step(s, p, &cur, body, AuditAction::SkillYank, Pointer::Follow)
}

/// Deletes a version (every lifecycle record of it, and its archive unless another version
/// shares the bytes) down to the purged level. Drafts (any pre-release state) and yanked
/// versions may be deleted by a writer; a released version only by an admin with a reason, and
/// never while it is the current release (yank or roll back first).
pub(crate) fn delete_version(
    s: &SkillsService,
    p: &Principal,
    name: &str,
    version: &str,
    reason: Option<String>,
) -> Result<registry_core::deletion::Receipt> {
    let _guard = lock_skill(s, p, name);
    let cur = crate::resolve::for_step(s, p, name, version, None)?;
    require_write(p, &cur)?;
    let governs = p.governs(&cur.rec.meta.scope);
    if !crate::resolve::is_author(p, &cur) && !governs {
        return Err(Error::forbidden(
            "only its author or an admin of its scope deletes a version",
        ));
    }
    let deletable = !cur.body.state.is_released() && cur.body.state != LifecycleState::Published;
    if !deletable {
        let admin = governs;
        if !admin || reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
            return Err(CoreError::InvalidTransition {
                from: cur.body.state.as_str().into(),
                action: "delete".into(),
                allowed: cur
                    .body
                    .state
                    .allowed()
                    .iter()
                    .map(|a| a.to_string())
                    .collect(),
            }
            .into());
        }
        let versions = crate::resolve::visible_versions(s, p, name)?;
        if current_release(s, &versions)?.is_some_and(|t| t.version_asset == cur.rec.meta.id) {
            return Err(Error::new(
                registry_core::ErrorCode::Conflict,
                format!("{name}@{version} is the current release: yank it or roll back first"),
            ));
        }
    }
    let reason = registry_core::deletion::check_reason(reason)?
        .unwrap_or_else(|| format!("skill version {name}@{version} deleted"));
    let receipt = s.deleter.delete(
        &p.user,
        &reason,
        std::slice::from_ref(&cur.rec.meta.id),
        registry_core::deletion::DeletionLevel::Purged,
    )?;
    s.archives.forget(blob_key(&cur));
    Ok(receipt)
}

pub(crate) fn unyank(
    s: &SkillsService,
    p: &Principal,
    name: &str,
    version: &str,
) -> Result<Loaded> {
    let _guard = lock_skill(s, p, name);
    let cur = reload(s, p, name, version, Action::Unyank)?;
    require_release_governance(p, &cur)?;
    lifecycle::check(cur.body.state, Action::Unyank)?;
    let mut body = cur.body.clone();
    body.state = cur.body.yanked_from.unwrap_or(LifecycleState::Published);
    body.yanked_from = None;
    body.yank_reason = None;
    step(s, p, &cur, body, AuditAction::SkillUnyank, Pointer::Follow)
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RollbackRequest {
    /// The earlier version to make current (or give `digest`).
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub digest: Option<String>,
}

/// Points the release of `name` back to an earlier released version; later promotes move it on.
pub(crate) fn rollback(
    s: &SkillsService,
    p: &Principal,
    name: &str,
    req: RollbackRequest,
) -> Result<Loaded> {
    let _guard = lock_skill(s, p, name);
    let all = crate::resolve::visible_versions(s, p, name)?;
    let digest = req.digest.as_deref().map(parse_digest).transpose()?;
    let target = all
        .iter()
        .rev()
        .find(|l| {
            req.version.as_deref().is_none_or(|v| l.body.version == v)
                && digest.as_deref().is_none_or(|d| l.body.digest == d)
        })
        .filter(|_| req.version.is_some() || digest.is_some())
        .ok_or_else(|| Error::not_found(format!("no such version of {name}")))?;
    require_release_governance(p, target)?;
    if !target.body.state.is_released() {
        return Err(CoreError::InvalidTransition {
            from: target.body.state.as_str().into(),
            action: "rollback".into(),
            allowed: vec![],
        }
        .into());
    }
    let current =
        load_pointer(s.store.as_ref(), &target.rec.meta.scope, name)?.and_then(|(_, b)| b.current);
    if let Some(c) = &current
        && Version::parse(&c.version).ok() <= target.semver()
    {
        return Err(Error::new(
            ErrorCode::InvalidTransition,
            format!(
                "rollback must go to an earlier version than the current {}",
                c.version
            ),
        )
        .with_details(serde_json::json!({
            "state": target.body.state.as_str(), "action": "rollback",
            "allowed_transitions": target.body.state.allowed(), "current": c.version,
        })));
    }
    // A rollback displaces the current release: whoever moves it must govern that one too.
    if let Some(c) = &current
        && let Some(displaced) = all.iter().find(|l| l.rec.meta.id == c.version_asset)
    {
        require_release_governance(p, displaced)?;
    }
    let mut ops = vec![];
    let index = release_ops(
        s,
        p,
        target,
        Pointer::Pin(target.rec.meta.id.clone()),
        &mut ops,
    )?;
    if let Some(WriteOp::Audit(a)) = ops.iter_mut().find(|o| matches!(o, WriteOp::Audit(_))) {
        a.action = AuditAction::SkillRollback.into();
    }
    if !ops.is_empty() {
        s.store.commit(ops)?;
    }
    if let Some(op) = index {
        apply_index(s, op)?;
    }
    Ok(target.clone())
}

/// The current release of a name in the principal's view.
pub(crate) fn current_release(
    s: &SkillsService,
    versions: &[Loaded],
) -> Result<Option<ReleaseTarget>> {
    let Some(first) = versions.first() else {
        return Ok(None);
    };
    Ok(
        load_pointer(s.store.as_ref(), &first.rec.meta.scope, &first.body.name)?
            .and_then(|(_, b)| b.current),
    )
}

/// Discovery: BM25 and dense vectors over the current releases the principal may see.
pub(crate) fn discover(
    s: &SkillsService,
    p: &Principal,
    q: Option<&str>,
    limit: usize,
) -> Result<Vec<DiscoverView>> {
    let filter = VisibilityFilter::for_principal(p, &[AssetKind::SkillVersion])
        .with_tags(vec![DISCOVER_TAG.into()]);
    let recs = match q.map(str::trim).filter(|q| !q.is_empty()) {
        Some(q) => {
            let ids = discover_ids(s, q, &filter, limit * 2)?;
            let mut recs = s.store.find(&AssetQuery {
                ids: Some(ids.clone()),
                heads_only: true,
                ..Default::default()
            })?;
            recs.sort_by_key(|r| ids.iter().position(|i| *i == r.meta.id));
            recs
        }
        None => {
            let mut recs = s.store.find(&AssetQuery {
                kind: Some(AssetKind::SkillVersion),
                scope_keys: Some(p.visible_scope_keys()),
                statuses: Some(vec![AssetStatus::Active]),
                heads_only: true,
                ..Default::default()
            })?;
            recs.retain(|r| {
                r.lookup_key
                    .as_deref()
                    .is_some_and(|k| k.starts_with(RELEASE_PREFIX))
            });
            recs.sort_by(|a, b| a.lookup_key.cmp(&b.lookup_key));
            recs
        }
    };
    let mut seen = BTreeSet::new();
    let mut out = vec![];
    // Deepest scope first, so a tenant's skill shadows a global one of the same name.
    let recs: Vec<_> = recs.into_iter().filter(|r| p.can_see(&r.meta)).collect();
    // A name is answered by its most specific scope's release: keep, per name, only the
    // pointer of the deepest scope.
    let deepest: std::collections::HashMap<String, usize> =
        recs.iter().fold(Default::default(), |mut m, r| {
            let name = r.lookup_key.clone().unwrap_or_default();
            let d = r.meta.scope.path_keys().len();
            let e = m.entry(name).or_insert(d);
            *e = (*e).max(d);
            m
        });
    let recs = recs.into_iter().filter(|r| {
        deepest.get(&r.lookup_key.clone().unwrap_or_default())
            == Some(&r.meta.scope.path_keys().len())
    });
    for r in recs {
        let Ok(b) = serde_json::from_value::<ReleaseBody>(r.body) else {
            continue;
        };
        if let Some(t) = b.current
            && seen.insert(b.name.clone())
        {
            out.push(t.entry);
        }
    }
    if q.is_none() {
        out.sort_by(|a, b| a.name.cmp(&b.name));
    }
    out.truncate(limit);
    Ok(out)
}

/// Rebuilds the discover index from the stored release pointers (after a crash between a commit
/// and its index write, or a lost index directory).
pub(crate) fn reindex(s: &SkillsService) -> Result<usize> {
    reindex_with(s, true)
}

/// Like [`reindex`] with `embed`; without it, only the text index is written (a node following
/// a shared vector index, which the writing node filled).
pub(crate) fn reindex_with(s: &SkillsService, embed: bool) -> Result<usize> {
    let recs = s.store.find(&AssetQuery {
        kind: Some(AssetKind::SkillVersion),
        heads_only: true,
        ..Default::default()
    })?;
    let mut docs = vec![];
    let mut gone = vec![];
    for r in recs {
        if !r
            .lookup_key
            .as_deref()
            .is_some_and(|k| k.starts_with(RELEASE_PREFIX))
        {
            continue;
        }
        let b: ReleaseBody = serde_json::from_value(r.body.clone()).map_err(Error::internal)?;
        match b.current {
            Some(t) => docs.push(index_doc(&r, &t.entry)),
            None => gone.push(r.meta.id.clone()),
        }
    }
    for chunk in docs.chunks(256) {
        if embed {
            upsert_docs(s, chunk)?;
        } else {
            s.text.upsert(chunk)?;
        }
    }
    s.text.delete(&gone)?;
    if embed {
        s.vectors.delete(&gone)?;
    }
    Ok(docs.len())
}

/// Checks a manifest's requirements against what the caller declares it has.
pub fn executable_check(
    l: &Loaded,
    tools: &[String],
    permissions: &[String],
    environment: &[String],
) -> (bool, Vec<String>) {
    let norm_tool = |t: &str| t.split('(').next().unwrap_or(t).trim().to_lowercase();
    let have_tools: BTreeSet<String> = tools.iter().map(|t| norm_tool(t)).collect();
    let have_perms: BTreeSet<String> = permissions.iter().map(|t| t.to_lowercase()).collect();
    let have_env: BTreeSet<&str> = environment.iter().map(String::as_str).collect();
    let mut reasons = vec![];
    let fm_tools: Vec<String> = l
        .body
        .frontmatter
        .get("allowed-tools")
        .or_else(|| l.body.frontmatter.get("allowed_tools"))
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|x| x.as_str()).map(norm_tool).collect())
        .unwrap_or_default();
    let mut need_tools: BTreeSet<String> = fm_tools.into_iter().collect();
    if let Some(m) = &l.body.manifest {
        need_tools.extend(m.requires.tools.iter().map(|t| norm_tool(t)));
        for perm in &m.requires.permissions {
            if !have_perms.contains(&perm.to_lowercase()) {
                reasons.push(format!("missing permission: {perm}"));
            }
        }
        for e in &m.requires.environment {
            if !have_env.contains(e.as_str()) {
                reasons.push(format!("missing environment variable: {e}"));
            }
        }
    }
    for t in &need_tools {
        if !have_tools.contains(t) {
            reasons.push(format!("missing tool: {t}"));
        }
    }
    reasons.sort();
    (reasons.is_empty(), reasons)
}

fn blob_key(l: &Loaded) -> &str {
    l.body
        .archive_blob
        .as_deref()
        .unwrap_or(&l.body.archive_sha256)
}

/// The archive bytes of a version.
pub(crate) fn archive_bytes(s: &SkillsService, l: &Loaded) -> Result<Vec<u8>> {
    s.blobs
        .get(blob_key(l))?
        .ok_or_else(|| Error::internal(format!("archive blob of {} is missing", l.body.digest)))
}

/// The parsed archive of a version, from the cache when it is there.
pub(crate) fn archive(
    s: &SkillsService,
    l: &Loaded,
) -> Result<std::sync::Arc<skills_sdk::SkillArchive>> {
    s.archives.get_or_load(blob_key(l), || {
        let bytes = archive_bytes(s, l)?;
        let size = bytes.len();
        let parsed = skills_sdk::read_archive(&bytes, &limits()).map_err(Error::internal)?;
        let unpacked: u64 = parsed.tree().files().iter().map(|f| f.size).sum();
        Ok((parsed, size.max(unpacked as usize)))
    })
}

/// The `SKILL.md` body of a version.
pub(crate) fn instructions(s: &SkillsService, l: &Loaded) -> Result<String> {
    let archive = archive(s, l)?;
    let report = skills_sdk::validate_archive(&archive, ValidationMode::Lenient);
    report
        .skill
        .map(|sk| sk.instructions)
        .ok_or_else(|| Error::internal("a stored skill no longer parses"))
}

pub(crate) fn file(s: &SkillsService, l: &Loaded, path: &str) -> Result<skills_sdk::ArchivedFile> {
    archive(s, l)?
        .file(path)
        .ok_or_else(|| Error::not_found(format!("no file {path:?} in {}", l.body.digest)))
}

/// Does `req` (a semver range) match any released, non-yanked version? Used by lock
/// resolution clients; here for the service tests and the bench.
pub fn resolve(versions: &[Loaded], req: &VersionReq) -> Option<Loaded> {
    versions
        .iter()
        .filter(|l| l.body.state.is_released())
        .filter(|l| l.semver().is_some_and(|v| req.matches(&v)))
        .max_by_key(|l| l.semver())
        .cloned()
}
