//! Observe after Publish (DESIGN §6, issue 32 item 3): harnesses report the runs of a version
//! by digest; the registry keeps each as an asset and shows, per version, how it fares beside
//! the release it replaced. A released version credibly worse than its predecessor, or failing
//! more often than `skills.max_failure_rate`, goes back to the review queue (flagged once,
//! audited, never yanked).
//!
//! Storage: one asset per run (kind `SkillRun`, `lookup_key` = `run:<version asset id>`), in
//! the version's scope (a global version's runs in the reporter's tenant, so no tenant writes
//! into the global scope or reads another's runs), with a `run_of` edge from the version: the
//! version's deletion purges its runs. The asset id is derived from (tenant, `run_id`), so a
//! retried report finds its first answer in one lookup. The note is never stored: only its
//! sha256 and length (a harness's free text reaches no reader, so it carries no instruction or
//! personal data into a view).

use chrono::{DateTime, Utc};
use registry_core::asset::{AssetKind, AssetMeta, AssetRecord, AssetStatus, SourceKind};
use registry_core::derivation::{ChildStore, DerivationEdge, Relation};
use registry_core::principal::Principal;
use registry_core::store::{AssetQuery, WriteOp};
use registry_core::{AuditAction, ErrorCode, FieldError, FieldReason, Scope};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::Loaded;
pub use crate::model::{ObserveFlag, ObservePolicy};
use crate::publish::{Pointer, step};
use crate::service::{SkillsService, audit, lock_skill, parse_digest};

/// Longest `run_id` and `task`.
pub const MAX_RUN_ID_CHARS: usize = 128;
/// Longest note (hashed, never stored).
pub const MAX_RUN_NOTE_CHARS: usize = 2000;
/// Longest duration a run may report: one day.
pub const MAX_RUN_DURATION_MS: u64 = 86_400_000;
/// Most runs one version keeps per tenant; later reports answer 409 (`details.reason` `limit`).
pub const MAX_RUNS_PER_VERSION: usize = 10_000;
/// Runs one reporter (a tenant user) may keep per version and tenant: a quarter of the
/// version's room, so that no one key fills it and stops every later report (and with them the
/// Observe flag).
pub const MAX_RUNS_PER_REPORTER: usize = MAX_RUNS_PER_VERSION / 4;
/// The 97.5th percentile of the standard normal (a two-sided 95% interval).
pub const WILSON_Z: f64 = 1.959_963_984_540_054;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    Success,
    /// The skill ran and did not meet its acceptance.
    Failure,
    /// The skill broke (an exception, a tool it needs failed).
    Error,
    /// Stopped from outside (the user, a budget): counted, left out of the rates.
    Aborted,
}

/// A harness's report of one run of a version.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RunReport {
    /// The harness's id of the run (1–128 of `A-Za-z0-9._:-`): a retry with the same body gets
    /// the same answer, another body under the same id 409.
    #[schemars(length(min = 1, max = 128), pattern(r"^[A-Za-z0-9._:-]+$"))]
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9._:-]+$")
    )]
    pub run_id: String,
    /// The digest that ran; must be this version's.
    pub digest: String,
    pub outcome: RunOutcome,
    /// Wall time of the run, at most 86,400,000 (one day).
    #[schemars(range(max = 86_400_000))]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 86_400_000))]
    pub duration_ms: u64,
    /// The task the run served (1–128 of `A-Za-z0-9._:-`); the task's deletion purges the run.
    #[serde(default)]
    #[schemars(length(min = 1, max = 128), pattern(r"^[A-Za-z0-9._:-]+$"))]
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9._:-]+$")
    )]
    pub task: Option<String>,
    /// Free text (at most 2,000 characters): only its sha256 and length are kept.
    #[serde(default)]
    #[schemars(length(max = 2000))]
    #[cfg_attr(feature = "openapi", schema(max_length = 2000))]
    pub note: Option<String>,
}

/// The stored body of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunBody {
    pub run_id: String,
    pub name: String,
    pub version: String,
    pub version_asset: String,
    pub digest: String,
    pub outcome: RunOutcome,
    pub duration_ms: u64,
    pub task: Option<String>,
    pub note_sha256: Option<String>,
    pub note_chars: Option<usize>,
    pub reported_by: String,
    pub at: DateTime<Utc>,
    /// sha256 over the report as sent (with the name and version), for idempotency.
    pub request_sha256: String,
    /// Reported while the version was a draft: kept (and seen only by who may see the draft)
    /// but not counted in its figures or its Observe flag, for anyone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pre_release: bool,
}

/// A recorded run, as every door answers it (a retry gets the same).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunView {
    /// The run's asset id.
    pub id: String,
    pub run_id: String,
    pub name: String,
    pub version: String,
    pub digest: String,
    pub outcome: RunOutcome,
    pub duration_ms: u64,
    pub task: Option<String>,
    /// sha256 (hex) of the note; the note itself is not kept.
    pub note_sha256: Option<String>,
    pub reported_by: String,
    pub at: DateTime<Utc>,
}

/// The observed figures of a version (the runs the caller may see).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunStats {
    pub runs: u64,
    pub successes: u64,
    pub failures: u64,
    pub errors: u64,
    pub aborted: u64,
    /// successes / (runs − aborted); `null` without a completed run.
    pub success_rate: Option<f64>,
    /// The Wilson score 95% interval of the success rate (z = 1.96).
    pub success_low: Option<f64>,
    pub success_high: Option<f64>,
    /// 1 − success rate (failures and errors over completed runs).
    pub failure_rate: Option<f64>,
    /// Nearest-rank percentiles of every run's duration.
    pub duration_p50_ms: Option<u64>,
    pub duration_p95_ms: Option<u64>,
    pub last_used_at: Option<DateTime<Utc>>,
}

impl RunStats {
    fn completed(&self) -> u64 {
        self.runs - self.aborted
    }
}

/// How a version compares with the release it replaced.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunComparison {
    /// The release it replaced (the highest earlier version that was released).
    pub predecessor: String,
    pub predecessor_digest: String,
    pub predecessor_stats: RunStats,
    /// `worse` / `better`: the Wilson intervals of the success rates do not overlap;
    /// `indistinguishable`: they overlap; `insufficient`: a side has no completed run.
    pub verdict: String,
}

/// A version's observed figures, its comparison, and whether it was flagged.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunSummary {
    pub name: String,
    pub version: String,
    pub digest: String,
    pub stats: RunStats,
    pub compared_with: Option<RunComparison>,
    pub observe_flag: Option<ObserveFlag>,
    /// Runs the version's author reported: kept, but not counted in `stats`, the comparison or
    /// the Observe flag (no one grades their own work, as Test keeps the author's results as
    /// `self_reported`).
    pub author_runs: u64,
    /// The policy in force (`skills.max_failure_rate`, `skills.min_runs`).
    pub max_failure_rate: f64,
    pub min_runs: u64,
}

/// The Wilson score interval of `k` successes in `n` trials at `z`.
pub fn wilson(k: u64, n: u64, z: f64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// The nearest-rank percentile `q` (0–1) of sorted values.
fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

pub fn stats(runs: &[RunBody]) -> RunStats {
    let count = |o: RunOutcome| runs.iter().filter(|r| r.outcome == o).count() as u64;
    let (successes, failures, errors, aborted) = (
        count(RunOutcome::Success),
        count(RunOutcome::Failure),
        count(RunOutcome::Error),
        count(RunOutcome::Aborted),
    );
    let completed = runs.len() as u64 - aborted;
    let rate = (completed > 0).then(|| successes as f64 / completed as f64);
    let interval = wilson(successes, completed, WILSON_Z);
    let mut durations: Vec<u64> = runs.iter().map(|r| r.duration_ms).collect();
    durations.sort_unstable();
    RunStats {
        runs: runs.len() as u64,
        successes,
        failures,
        errors,
        aborted,
        success_rate: rate,
        success_low: interval.map(|i| i.0),
        success_high: interval.map(|i| i.1),
        failure_rate: rate.map(|r| 1.0 - r),
        duration_p50_ms: percentile(&durations, 0.5),
        duration_p95_ms: percentile(&durations, 0.95),
        last_used_at: runs.iter().map(|r| r.at).max(),
    }
}

fn verdict(this: &RunStats, pred: &RunStats) -> &'static str {
    match (
        this.success_low.zip(this.success_high),
        pred.success_low.zip(pred.success_high),
    ) {
        (Some((_, hi)), Some((plo, _))) if hi < plo => "worse",
        (Some((lo, _)), Some((_, phi))) if lo > phi => "better",
        (Some(_), Some(_)) => "indistinguishable",
        _ => "insufficient",
    }
}

fn lookup_key(version_asset: &str) -> String {
    format!("run:{version_asset}")
}

/// The asset id of `run_id` in `tenant`: stable, so a retry finds the first report.
fn run_asset_id(tenant: &str, run_id: &str) -> String {
    let h = registry_core::hash::sha256_fields([
        b"skill-run-v1".as_slice(),
        tenant.as_bytes(),
        run_id.as_bytes(),
    ]);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Where the runs of `l` reported by `p` live: the version's scope, or for a global version
/// the reporter's tenant.
fn run_scope(p: &Principal, l: &Loaded) -> Scope {
    match &l.rec.meta.scope.tenant {
        Some(_) => l.rec.meta.scope.clone(),
        None => Scope::tenant(p.tenant.clone()),
    }
}

fn invalid(field: &str, reason: FieldReason, msg: impl Into<String>) -> Error {
    Error::validation(msg).with_details(FieldError::new(field).reason(reason))
}

fn check_id(field: &str, v: &str) -> Result<()> {
    let ok = !v.is_empty()
        && v.chars().count() <= MAX_RUN_ID_CHARS
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            field,
            FieldReason::Invalid,
            format!("{field} must be 1–{MAX_RUN_ID_CHARS} characters of A-Za-z0-9._:-"),
        ))
    }
}

fn check_report(r: &RunReport) -> Result<()> {
    check_id("run_id", &r.run_id)?;
    if let Some(t) = &r.task {
        check_id("task", t)?;
    }
    if r.duration_ms > MAX_RUN_DURATION_MS {
        return Err(invalid(
            "duration_ms",
            FieldReason::InvalidValue,
            format!("duration_ms is at most {MAX_RUN_DURATION_MS}"),
        ));
    }
    if r.note
        .as_ref()
        .is_some_and(|n| n.chars().count() > MAX_RUN_NOTE_CHARS)
    {
        return Err(Error::new(
            ErrorCode::PayloadTooLarge,
            format!("a note is at most {MAX_RUN_NOTE_CHARS} characters"),
        )
        .with_details(
            FieldError::new("note")
                .reason(FieldReason::TooLarge)
                .limit(MAX_RUN_NOTE_CHARS),
        ));
    }
    Ok(())
}

fn view(id: &str, b: &RunBody) -> RunView {
    RunView {
        id: id.to_string(),
        run_id: b.run_id.clone(),
        name: b.name.clone(),
        version: b.version.clone(),
        digest: b.digest.clone(),
        outcome: b.outcome,
        duration_ms: b.duration_ms,
        task: b.task.clone(),
        note_sha256: b.note_sha256.clone(),
        reported_by: b.reported_by.clone(),
        at: b.at,
    }
}

fn request_hash(name: &str, version: &str, r: &RunReport, digest: &str) -> String {
    let canonical = serde_json::json!({
        "name": name, "version": version, "run_id": r.run_id, "digest": digest,
        "outcome": r.outcome, "duration_ms": r.duration_ms, "task": r.task, "note": r.note,
    });
    registry_core::hash::sha256_hex(canonical.to_string())
}

impl SkillsService {
    /// Records a run of `name@version` by a principal who may load it (the one resolver decides);
    /// idempotent by `run_id` within the tenant.
    pub fn report_run(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: RunReport,
    ) -> Result<RunView> {
        check_report(&req)?;
        let l = self.resolve(p, name, version)?;
        let digest = parse_digest(&req.digest)?;
        if digest != l.body.digest {
            return Err(Error::new(
                ErrorCode::Conflict,
                format!("{name}@{version} does not have the digest {digest}"),
            )
            .with_details(
                FieldError::new("digest")
                    .reason(FieldReason::DigestMismatch)
                    .with("expected", &l.body.digest),
            ));
        }
        let hash = request_hash(name, version, &req, &digest);
        let id = run_asset_id(&p.tenant, &req.run_id);
        let _guard = self.locks.lock(&format!("{}|run|{}", p.tenant, req.run_id));
        if let Some(prev) = self.store.get(&id)? {
            let b: RunBody = serde_json::from_value(prev.body).map_err(Error::internal)?;
            if b.request_sha256 == hash && prev.meta.status == AssetStatus::Active {
                return Ok(view(&id, &b));
            }
            return Err(Error::new(
                ErrorCode::Conflict,
                format!("run_id {} was reported with another body", req.run_id),
            )
            .with_details(FieldError::new("run_id").reason(FieldReason::RunIdReused)));
        }
        let scope = run_scope(p, &l);
        let existing = runs_of(self, &scope, &l.rec.meta.id)?;
        check_room(&existing, &p.user, &format!("{name}@{version}"))?;
        let body = RunBody {
            run_id: req.run_id.clone(),
            name: l.body.name.clone(),
            version: l.body.version.clone(),
            version_asset: l.rec.meta.id.clone(),
            digest,
            outcome: req.outcome,
            duration_ms: req.duration_ms,
            task: req.task.clone(),
            note_sha256: req
                .note
                .as_ref()
                .map(|n| registry_core::hash::sha256_hex(n.as_bytes())),
            note_chars: req.note.as_ref().map(|n| n.chars().count()),
            reported_by: p.user.clone(),
            at: Utc::now(),
            request_sha256: hash.clone(),
            pre_release: !crate::resolve::holds_version(&l),
        };
        let mut meta = AssetMeta::new(
            AssetKind::SkillRun,
            scope,
            p.user.clone(),
            SourceKind::ToolResult,
        );
        meta.id = id.clone();
        meta.content_hash = hash.clone();
        meta.status = AssetStatus::Active;
        // A run of a draft is seen by whoever may see the draft (its author, the reporter,
        // reviewers, testers and admins), not by every reader of the scope: its lookup key
        // names the draft's id.
        if !crate::resolve::holds_version(&l) {
            use registry_core::AclEntry::{Role, User};
            meta.acl = registry_core::Acl::new(vec![
                User(l.body.author.clone()),
                User(p.user.clone()),
                Role("reviewer".into()),
                Role("tester".into()),
                Role("admin".into()),
            ])?;
        }
        let rec = AssetRecord {
            meta,
            lookup_key: Some(lookup_key(&l.rec.meta.id)),
            body: serde_json::to_value(&body).map_err(Error::internal)?,
        };
        let mut ops = vec![
            WriteOp::PutVersion(Box::new(rec.clone())),
            WriteOp::AddEdge(DerivationEdge {
                parent: l.rec.meta.id.clone(),
                child: id.clone(),
                relation: Relation::RunOf,
                child_store: ChildStore::Assets,
            }),
        ];
        // A run reported for a registry task the reporter may see is derived from that task
        // too, whether or not the report came with the task's `X-Session` (a session task is
        // seen only under it; the project and user boundaries still hold): deleting the task,
        // by any door (its route, retention, an erasure), reaches the run. The answer is the
        // same either way.
        if let Some(task) = req.task.as_deref()
            && let Some(t) = self.store.get(task)?
            && t.meta.kind == AssetKind::Task
            && {
                let mut in_session = p.clone();
                in_session.session = t.meta.scope.session.clone();
                registry_core::access::may(&in_session, registry_core::access::Action::See, &t.meta)
            }
        {
            ops.push(WriteOp::AddEdge(DerivationEdge {
                parent: t.meta.id.clone(),
                child: id.clone(),
                relation: Relation::RunOf,
                child_store: ChildStore::Assets,
            }));
        }
        ops.push(WriteOp::Audit(audit(
            p,
            AuditAction::SkillRunReport,
            &rec.meta.scope,
            &id,
            None,
            Some(hash),
        )));
        self.store.commit(ops)?;
        drop(_guard);
        // The author's own runs and a draft's are not counted: its report changes no figure.
        if !by_author(&l, &body) && !body.pre_release {
            let mut all = existing;
            all.push(body.clone());
            flag_if_regressing(self, p, &l, &all)?;
        }
        Ok(view(&id, &body))
    }

    /// The newest runs of the version asset `version_asset` that `p` may see, newest first, at
    /// most `limit`, and whether there were more (the runs part of a change's impact).
    pub fn recent_runs(
        &self,
        p: &Principal,
        version_asset: &str,
        limit: usize,
    ) -> Result<(Vec<RunView>, bool)> {
        let recs = self.store.find(&AssetQuery {
            kind: Some(AssetKind::SkillRun),
            tenant: Some(p.tenant.clone()),
            scope_keys: Some(p.visible_scope_keys()),
            lookup_key: Some(lookup_key(version_asset)),
            statuses: Some(vec![AssetStatus::Active]),
            heads_only: true,
            ..Default::default()
        })?;
        let mut runs = vec![];
        for (i, r) in recs.into_iter().filter(|r| p.can_see(&r.meta)).enumerate() {
            if i % 1024 == 0 {
                registry_core::deadline::check()?;
            }
            let b: RunBody = serde_json::from_value(r.body).map_err(Error::internal)?;
            runs.push(view(&r.meta.id, &b));
        }
        runs.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.id.cmp(&b.id)));
        let more = runs.len() > limit;
        runs.truncate(limit);
        Ok((runs, more))
    }

    /// The observed figures of the version `name@version` as the caller sees them, and its
    /// comparison with the release it replaced.
    pub fn run_summary(&self, p: &Principal, name: &str, version: &str) -> Result<RunSummary> {
        let l = self.resolve(p, name, version)?;
        let all = visible_runs(self, p, &l)?;
        let author_runs = all.iter().filter(|r| by_author(&l, r)).count() as u64;
        let stats = stats(&counted(&l, all));
        let compared_with = match predecessor(self, p, &l)? {
            Some(pred) => {
                let ps = self::stats(&counted(&pred, visible_runs(self, p, &pred)?));
                Some(RunComparison {
                    predecessor: pred.body.version.clone(),
                    predecessor_digest: pred.body.digest.clone(),
                    verdict: verdict(&stats, &ps).to_string(),
                    predecessor_stats: ps,
                })
            }
            None => None,
        };
        let policy = self.observe_policy();
        Ok(RunSummary {
            name: l.body.name.clone(),
            version: l.body.version.clone(),
            digest: l.body.digest.clone(),
            stats,
            compared_with,
            observe_flag: l.body.observe_flag.clone(),
            author_runs,
            max_failure_rate: policy.max_failure_rate,
            min_runs: policy.min_runs,
        })
    }
}

/// Every active run of the version `version_asset` in `scope`, oldest first.
fn runs_of(s: &SkillsService, scope: &Scope, version_asset: &str) -> Result<Vec<RunBody>> {
    let recs = s.store.find(&AssetQuery {
        kind: Some(AssetKind::SkillRun),
        tenant: scope.tenant.clone(),
        scope_keys: Some(vec![scope.key()]),
        lookup_key: Some(lookup_key(version_asset)),
        statuses: Some(vec![AssetStatus::Active]),
        heads_only: true,
        ..Default::default()
    })?;
    parse_runs(recs)
}

fn parse_runs(recs: Vec<AssetRecord>) -> Result<Vec<RunBody>> {
    let mut out = Vec::with_capacity(recs.len());
    for (i, r) in recs.into_iter().enumerate() {
        if i % 1024 == 0 {
            registry_core::deadline::check()?;
        }
        out.push(serde_json::from_value(r.body).map_err(Error::internal)?);
    }
    Ok(out)
}

/// The runs of `l` the caller may see.
fn visible_runs(s: &SkillsService, p: &Principal, l: &Loaded) -> Result<Vec<RunBody>> {
    let recs = s.store.find(&AssetQuery {
        kind: Some(AssetKind::SkillRun),
        tenant: Some(p.tenant.clone()),
        scope_keys: Some(p.visible_scope_keys()),
        lookup_key: Some(lookup_key(&l.rec.meta.id)),
        statuses: Some(vec![AssetStatus::Active]),
        heads_only: true,
        ..Default::default()
    })?;
    parse_runs(recs.into_iter().filter(|r| p.can_see(&r.meta)).collect())
}

/// The release `l` replaced: the highest earlier version of the same name and scope that was
/// released (published, deprecated or yanked since).
fn predecessor(s: &SkillsService, p: &Principal, l: &Loaded) -> Result<Option<Loaded>> {
    let versions = s.visible_versions(p, &l.body.name)?;
    Ok(versions
        .into_iter()
        .filter(|v| v.rec.meta.scope == l.rec.meta.scope && crate::resolve::holds_version(v))
        .filter(|v| v.semver() < l.semver())
        .max_by_key(Loaded::semver))
}

/// The figures of a released version shown in the select view (the caller's runs).
pub(crate) fn stats_for(s: &SkillsService, p: &Principal, l: &Loaded) -> Result<RunStats> {
    Ok(stats(&counted(l, visible_runs(s, p, l)?)))
}

/// Whether `r` was reported by the author of `l` (a tenant version's: runs of a global
/// version are reported in tenants, by users who are not its platform author).
fn by_author(l: &Loaded, r: &RunBody) -> bool {
    l.rec.meta.scope.tenant.is_some() && r.reported_by == l.body.author
}

/// The runs of `l` that count in its figures: every one but its author's and those reported
/// before its release (whose ACL keeps them from most readers: counting them would make the
/// flag disagree with the figures a reader is shown).
fn counted(l: &Loaded, runs: Vec<RunBody>) -> Vec<RunBody> {
    runs.into_iter()
        .filter(|r| !by_author(l, r) && !r.pre_release)
        .collect()
}

/// Refuses a report when the version's runs (in the reporter's view scope) or the reporter's
/// own runs of it are at their limit: 409 `CONFLICT`, `details.reason = "limit"`.
fn check_room(existing: &[RunBody], reporter: &str, what: &str) -> Result<()> {
    let full = |limit: usize, msg: String| {
        Err(Error::new(ErrorCode::Conflict, msg).with_details(
            FieldError::new("run_id")
                .reason(FieldReason::Limit)
                .limit(limit),
        ))
    };
    if existing.len() >= MAX_RUNS_PER_VERSION {
        return full(
            MAX_RUNS_PER_VERSION,
            format!("{what} keeps at most {MAX_RUNS_PER_VERSION} runs"),
        );
    }
    let mine = existing
        .iter()
        .filter(|r| r.reported_by == reporter)
        .count();
    if mine >= MAX_RUNS_PER_REPORTER {
        return full(
            MAX_RUNS_PER_REPORTER,
            format!("{what} keeps at most {MAX_RUNS_PER_REPORTER} runs of one reporter"),
        );
    }
    Ok(())
}

/// Puts a released, tenant-scoped version back in the review queue once, when its runs (in
/// its own scope) fail above the policy's rate or credibly worse than its predecessor's.
fn flag_if_regressing(
    s: &SkillsService,
    p: &Principal,
    l: &Loaded,
    runs: &[RunBody],
) -> Result<()> {
    let released = l.body.state.is_released();
    if !released || l.body.observe_flag.is_some() || l.rec.meta.scope.tenant.is_none() {
        return Ok(());
    }
    let policy = s.observe_policy();
    let st = stats(&counted(l, runs.to_vec()));
    if st.completed() < policy.min_runs {
        return Ok(());
    }
    let failure_rate = st.failure_rate.unwrap_or(0.0);
    let mut flag = None;
    if let Some(pred) = predecessor(s, p, l)? {
        let ps = stats(&counted(
            &pred,
            runs_of(s, &l.rec.meta.scope, &pred.rec.meta.id)?,
        ));
        if ps.completed() >= policy.min_runs && verdict(&st, &ps) == "worse" {
            flag = Some(("worse_than_predecessor", Some(pred.body.version.clone())));
        }
    }
    if flag.is_none() && failure_rate > policy.max_failure_rate {
        flag = Some(("above_max_failure_rate", None));
    }
    let Some((reason, predecessor)) = flag else {
        return Ok(());
    };
    let _guard = lock_skill(s, p, &l.body.name);
    // The image under the lock: another report may have flagged it meanwhile.
    let Some(head) = s.store.get(&l.rec.meta.id)? else {
        return Ok(());
    };
    let cur = Loaded::of(head)?;
    if cur.body.observe_flag.is_some() || !cur.body.state.is_released() {
        return Ok(());
    }
    let mut body = cur.body.clone();
    body.observe_flag = Some(ObserveFlag {
        reason: reason.to_string(),
        at: Utc::now(),
        runs: st.runs,
        failure_rate,
        predecessor,
    });
    step(
        s,
        p,
        &cur,
        body,
        AuditAction::SkillObserveFlag,
        Pointer::Follow,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_the_textbook_values() {
        // 81 of 263: the example of Wilson (1927) as tabulated by Newcombe (1998): 0.2553–0.3662.
        let (lo, hi) = wilson(81, 263, WILSON_Z).unwrap();
        assert!((lo - 0.2553).abs() < 5e-4, "{lo}");
        assert!((hi - 0.3662).abs() < 5e-4, "{hi}");
        assert_eq!(wilson(0, 0, WILSON_Z), None);
        let (lo, hi) = wilson(10, 10, WILSON_Z).unwrap();
        assert!(hi <= 1.0 && lo > 0.69 && lo < 0.73, "{lo}");
    }

    fn body(reporter: &str, i: usize) -> RunBody {
        RunBody {
            run_id: format!("r-{i}"),
            name: "tally".into(),
            version: "1.0.0".into(),
            version_asset: "v".into(),
            digest: String::new(),
            outcome: RunOutcome::Success,
            duration_ms: 1,
            task: None,
            note_sha256: None,
            note_chars: None,
            reported_by: reporter.into(),
            at: Utc::now(),
            request_sha256: String::new(),
            pre_release: false,
        }
    }

    #[test]
    fn no_reporter_fills_a_versions_room_alone() {
        let mut runs: Vec<RunBody> = (0..MAX_RUNS_PER_REPORTER).map(|i| body("bot", i)).collect();
        let e = check_room(&runs, "bot", "tally@1.0.0").unwrap_err();
        assert_eq!(e.code, ErrorCode::Conflict);
        assert_eq!(e.details["reason"], "limit", "{}", e.details);
        assert!(e.to_string().contains("of one reporter"), "{e}");
        // Another reporter still has room, until the version's own limit.
        check_room(&runs, "ann", "tally@1.0.0").unwrap();
        for (i, who) in ["ann", "cy", "dee"].iter().enumerate() {
            let n = if i == 2 {
                MAX_RUNS_PER_REPORTER - 1
            } else {
                MAX_RUNS_PER_REPORTER
            };
            runs.extend((0..n).map(|j| body(who, j)));
        }
        check_room(&runs, "eve", "tally@1.0.0").unwrap();
        runs.push(body("eve", 0));
        let e = check_room(&runs, "fay", "tally@1.0.0").unwrap_err();
        assert!(e.to_string().contains("at most 10000 runs"), "{e}");
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=20).collect();
        assert_eq!(percentile(&v, 0.5), Some(10));
        assert_eq!(percentile(&v, 0.95), Some(19));
        assert_eq!(percentile(&[7], 0.95), Some(7));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
