//! The stored bodies and the wire types of skills: a version's body and what it carries
//! (test runs, reviews, the deprecation, the scan override, the waiver, the observe flag), the
//! release pointer's body, a loaded version, and the requests of the lifecycle steps. Every
//! other module of the crate reads these; this one reads none of them.

use chrono::{DateTime, Utc};
use registry_core::asset::AssetRecord;
use serde::{Deserialize, Serialize};
use skills_sdk::semver::Version;
use skills_sdk::{FileRecord, Manifest};

use crate::error::{Error, Result};
use crate::lifecycle::LifecycleState;

/// Longest note of a lifecycle step (a waiver's or an override's reason, a deprecation's
/// message and replacement, a yank's reason), in characters.
pub const MAX_NOTE_CHARS: usize = 1000;
/// Longest review comment, in characters.
pub const MAX_REVIEW_COMMENT_CHARS: usize = 2000;

/// Largest test log one result may carry, in characters (256 Ki).
pub const MAX_TEST_LOG_CHARS: usize = 256 * 1024;
/// Most results one test run may carry (one per declared test).
pub const MAX_TEST_RESULTS: usize = 100;

// utoipa's `max_length`/`max_items` take literals: the document's figures above are these.
const _: () = assert!(
    MAX_NOTE_CHARS == 1000
        && MAX_REVIEW_COMMENT_CHARS == 2000
        && MAX_TEST_LOG_CHARS == 262_144
        && MAX_TEST_RESULTS == 100
);

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
    /// The captured output itself (UTF-8, at most 256 Ki characters): stored as a blob under
    /// `log_digest` in the version's tenant, readable by the scope's reviewers, testers and
    /// admins, purged with the version. It must hash to `log_digest`.
    #[serde(default, skip_serializing)]
    #[schemars(length(max = MAX_TEST_LOG_CHARS))]
    #[cfg_attr(feature = "openapi", schema(max_length = 262144))]
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
    pub test_waiver: Option<TestWaiver>,
    /// Blob keys of the uploaded test logs (purged with the version).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blob_digests: Vec<String>,
    /// Set once when observed runs put a released version back in the review queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observe_flag: Option<ObserveFlag>,
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
    #[schemars(pattern(registry_core::text::NOT_BLANK), length(max = MAX_NOTE_CHARS))]
    #[cfg_attr(feature = "openapi", schema(max_length = 1000))]
    pub reason: String,
}

/// A reviewer's decision that a version which declares no test may pass Test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TestWaiver {
    pub by: String,
    pub reason: String,
    /// The digest the waiver was recorded for; always the version's own.
    pub digest: String,
    pub at: DateTime<Utc>,
}

/// Why observed runs put a release back in the review queue (set once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ObserveFlag {
    /// `worse_than_predecessor` or `above_max_failure_rate`.
    pub reason: String,
    pub at: DateTime<Utc>,
    pub runs: u64,
    pub failure_rate: f64,
    /// The release it was compared with, for `worse_than_predecessor`.
    pub predecessor: Option<String>,
}

/// When observed runs flag a release (config `skills.max_failure_rate`, `skills.min_runs`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ObservePolicy {
    /// A failure rate above this flags the version (once it has `min_runs` completed runs).
    pub max_failure_rate: f64,
    /// Completed runs a version (and its predecessor, for the comparison) needs before either
    /// rule may flag it.
    pub min_runs: u64,
}

impl Default for ObservePolicy {
    fn default() -> Self {
        ObservePolicy {
            max_failure_rate: 0.5,
            min_runs: 20,
        }
    }
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

/// The outcome of a publish.
#[derive(Debug)]
pub struct Published {
    pub created: bool,
    pub version: Loaded,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TestResultsRequest {
    /// The digest the tests ran against; must be the version's digest.
    pub digest: String,
    #[serde(deserialize_with = "registry_core::wire::objects")]
    #[schemars(length(max = MAX_TEST_RESULTS))]
    #[cfg_attr(feature = "openapi", schema(max_items = 100))]
    pub results: Vec<TestResult>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReviewRequest {
    pub decision: Decision,
    #[serde(default)]
    #[schemars(length(max = MAX_REVIEW_COMMENT_CHARS))]
    #[cfg_attr(feature = "openapi", schema(max_length = 2000))]
    pub comment: String,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DeprecateRequest {
    #[schemars(pattern(registry_core::text::NOT_BLANK), length(max = MAX_NOTE_CHARS))]
    #[cfg_attr(feature = "openapi", schema(max_length = 1000))]
    pub message: String,
    #[serde(default)]
    #[schemars(length(max = MAX_NOTE_CHARS))]
    #[cfg_attr(feature = "openapi", schema(max_length = 1000))]
    pub replacement: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct YankRequest {
    #[serde(default)]
    #[schemars(length(max = MAX_NOTE_CHARS))]
    #[cfg_attr(feature = "openapi", schema(max_length = 1000))]
    pub reason: Option<String>,
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
