//! The wire views of skills, shared by every door (HTTP, MCP, the console): discover lists,
//! the select view of a name, a version, the loaded instructions.

use registry_core::principal::Principal;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::lifecycle::LifecycleState;
use crate::load::executable_check;
use crate::model::{
    Deprecation, DiscoverView, Loaded, ObserveFlag, ReviewRecord, ScanOverride, TestRun, TestWaiver,
};
use crate::service::SkillsService;

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DiscoverList {
    pub skills: Vec<DiscoverView>,
    /// Sum of the entries' token counts.
    pub total_tokens: usize,
    /// The tokenizer that counted (the embedding model's WordPiece tokenizer).
    pub tokenizer: String,
}

impl SkillsService {
    /// The discover answer, shared by HTTP and MCP.
    pub fn discover_list(
        &self,
        p: &Principal,
        q: Option<&str>,
        limit: Option<usize>,
    ) -> Result<DiscoverList> {
        let limit = limit.unwrap_or(20).clamp(1, 200);
        let skills = self.discover(p, q, limit)?;
        Ok(DiscoverList {
            total_tokens: skills.iter().map(|e| e.tokens).sum(),
            tokenizer: self.embedder.info().tag(),
            skills,
        })
    }
}

/// A version as the API shows it (no archive bytes).
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VersionView {
    pub id: String,
    pub name: String,
    pub version: String,
    pub digest: String,
    pub state: LifecycleState,
    pub allowed_transitions: Vec<String>,
    pub author: String,
    pub scope: String,
    pub archive_sha256: String,
    pub archive_size: u64,
    /// The SKILL.md front matter, as written.
    #[cfg_attr(feature = "openapi", schema(value_type = HashMap<String, serde_json::Value>))]
    pub frontmatter: serde_json::Value,
    /// The registry manifest kept beside SKILL.md.
    #[cfg_attr(feature = "openapi", schema(value_type = HashMap<String, serde_json::Value>))]
    pub manifest: serde_json::Value,
    /// The canonical file tree: path, executable, size, sha256.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<HashMap<String, serde_json::Value>>))]
    pub files: serde_json::Value,
    pub discover: DiscoverView,
    pub tests: Option<TestRun>,
    pub reviews: Vec<ReviewRecord>,
    pub deprecation: Option<Deprecation>,
    pub yank_reason: Option<String>,
    /// The supply-chain scan run at publish (`null` for versions stored before the scan):
    /// `{verdict: pass|warn|fail, findings: [{rule, severity, file, line, excerpt, message}]}`.
    #[cfg_attr(feature = "openapi", schema(schema_with = scan_report_ref))]
    pub scan: Option<skills_sdk::ScanReport>,
    /// A platform principal's override of a failing scan.
    pub scan_override: Option<ScanOverride>,
    /// The author's own latest results: shown, never enough for Test.
    pub self_reported: Option<TestRun>,
    /// A reviewer's waiver of Test (versions that declare no test).
    pub test_waiver: Option<TestWaiver>,
    /// Set when observed runs put this release back in the review queue.
    pub observe_flag: Option<ObserveFlag>,
}

/// The scan report's schema comes from its JSON Schema derive (the server's document names it
/// `ScanReport`).
#[cfg(feature = "openapi")]
fn scan_report_ref() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::Ref::from_schema_name(
        <skills_sdk::ScanReport as schemars::JsonSchema>::schema_name(),
    )
    .into()
}

impl VersionView {
    pub fn of(l: &Loaded) -> Self {
        let b = &l.body;
        VersionView {
            id: l.rec.meta.id.clone(),
            name: b.name.clone(),
            version: b.version.clone(),
            digest: b.digest.clone(),
            state: b.state,
            allowed_transitions: b.state.allowed().iter().map(|s| s.to_string()).collect(),
            author: b.author.clone(),
            scope: b.scope.clone(),
            archive_sha256: b.archive_sha256.clone(),
            archive_size: b.archive_size,
            frontmatter: b.frontmatter.clone(),
            manifest: serde_json::to_value(&b.manifest).unwrap_or_default(),
            files: serde_json::to_value(&b.files).unwrap_or_default(),
            discover: b.discover.clone(),
            tests: b.tests.clone(),
            reviews: b.reviews.clone(),
            deprecation: b.deprecation.clone(),
            yank_reason: b.yank_reason.clone(),
            scan: b.scan.clone(),
            scan_override: b.scan_override.clone(),
            self_reported: b.self_reported.clone(),
            test_waiver: b.test_waiver.clone(),
            observe_flag: b.observe_flag.clone(),
        }
    }
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VersionSummary {
    pub version: String,
    pub digest: String,
    pub state: LifecycleState,
    pub yanked: bool,
    /// The version's scan verdict: `pass`, `warn` or `fail` (`null` before the scan existed).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub scan: Option<skills_sdk::ScanVerdict>,
    /// A failing scan was overridden by a platform principal.
    pub scan_overridden: bool,
    /// Observed runs (the caller's tenant), for versions that were released.
    pub runs: Option<crate::runs::RunStats>,
    /// Observed runs put this release back in the review queue.
    pub flagged: bool,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SelectView {
    pub name: String,
    /// The current release, if any version is released.
    pub current: Option<String>,
    /// Every version, oldest first (drafts and yanked included, with their state).
    pub versions: Vec<VersionSummary>,
    /// The version shown: `?version=`, else the current release, else the newest.
    pub selected: VersionView,
    /// Whether the caller's declared tools, permissions and environment cover the skill's.
    pub executable: bool,
    pub reasons: Vec<String>,
}

impl SkillsService {
    /// The select answer, shared by HTTP and MCP.
    pub fn select_view(
        &self,
        p: &Principal,
        name: &str,
        version: Option<&str>,
        tools: &[String],
        permissions: &[String],
        environment: &[String],
    ) -> Result<SelectView> {
        let versions = self.visible_versions(p, name)?;
        let current = self.current_release(&versions)?;
        // The version shown is the one every load door serves under that name.
        let selected = match (version, &current) {
            (Some(v), _) => self.resolve(p, name, v)?,
            (None, Some(c)) => versions
                .iter()
                .find(|l| l.rec.meta.id == c.version_asset)
                .cloned()
                .ok_or_else(|| Error::not_found(format!("no such version of {name}")))?,
            (None, None) => match versions.last() {
                Some(l) => self.resolve(p, name, &l.body.version)?,
                None => return Err(Error::not_found(format!("no such version of {name}"))),
            },
        };
        let selected = &selected;
        let (executable, reasons) = executable_check(selected, tools, permissions, environment);
        let mut summaries = Vec::with_capacity(versions.len());
        for l in &versions {
            let runs = if crate::resolve::holds_version(l) {
                Some(crate::runs::stats_for(self, p, l)?)
            } else {
                None
            };
            summaries.push(VersionSummary {
                version: l.body.version.clone(),
                digest: l.body.digest.clone(),
                state: l.body.state,
                yanked: l.body.state == LifecycleState::Yanked,
                scan: l.body.scan.as_ref().map(|r| r.verdict),
                scan_overridden: l.body.scan_override.is_some(),
                runs,
                flagged: l.body.observe_flag.is_some(),
            });
        }
        Ok(SelectView {
            name: name.to_string(),
            current: current.map(|c| c.version),
            versions: summaries,
            selected: VersionView::of(selected),
            executable,
            reasons,
        })
    }
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstructionsView {
    pub name: String,
    pub version: String,
    pub digest: String,
    /// The Markdown body of `SKILL.md`.
    pub instructions: String,
    pub tokens: usize,
}

impl SkillsService {
    /// The load answer, shared by HTTP and MCP.
    pub fn instructions_view(&self, l: &Loaded) -> Result<InstructionsView> {
        let text = self.instructions(l)?;
        let tokens = self.embedder.count_tokens(&text)?;
        Ok(InstructionsView {
            name: l.body.name.clone(),
            version: l.body.version.clone(),
            digest: l.body.digest.clone(),
            instructions: text,
            tokens,
        })
    }
}
