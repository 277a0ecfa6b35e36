//! The steps on a version besides publishing and Test ([`crate::proof`]): review, promote, the
//! scan override, deprecate, yank and unyank, rollback of the release, and deletion. Each holds
//! the skill's lock, reads the version through the resolver, asks who may act
//! ([`require_release_governance`] for a released version) and the transition table
//! ([`super::check`]), and writes through `publish::step` (a rollback moves only the
//! release pointer; a deletion goes through the deleter).

use chrono::Utc;
use registry_core::audit::AuditAction;
use registry_core::principal::Principal;
use registry_core::store::WriteOp;
use registry_core::{CoreError, ErrorCode, FieldError, FieldReason};
use skills_sdk::semver::Version;

use crate::discovery::apply_index;
use crate::error::{Error, Result};
use crate::lifecycle::{self, Action, LifecycleState};
use crate::load::blob_key;
use crate::model::{
    Decision, DeprecateRequest, Deprecation, Loaded, ReviewRecord, ReviewRequest, RollbackRequest,
    ScanOverride, ScanOverrideRequest, VersionBody, YankRequest,
};
use crate::publish::{Pointer, release_ops, step};
use crate::resolve::reload;
use crate::service::{SkillsService, check_note, load_pointer, lock_skill, parse_digest};

pub use crate::model::MAX_REVIEW_COMMENT_CHARS;
/// Most reviews one version may collect (each lifecycle step carries them all).
pub const MAX_REVIEWS: usize = 20;

impl SkillsService {
    pub fn review(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: ReviewRequest,
    ) -> Result<Loaded> {
        let _guard = lock_skill(self, p, name);
        let cur = reload(self, p, name, version, Action::Review)?;
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
                    .reason(FieldReason::TooLarge)
                    .limit(MAX_REVIEW_COMMENT_CHARS),
            ));
        }
        if cur.body.reviews.len() >= MAX_REVIEWS {
            return Err(Error::new(
                ErrorCode::Conflict,
                format!(
                    "{name}@{version} has {MAX_REVIEWS} reviews already; publish a new version"
                ),
            )
            .with_details(
                FieldError::new("reviews")
                    .reason(FieldReason::Limit)
                    .limit(MAX_REVIEWS),
            ));
        }
        if cur.body.author == p.user {
            return Err(
                Error::forbidden("the author may not review their own skill")
                    .with_details(serde_json::json!({"reason": crate::error::Refusal::SelfReview})),
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
        step(
            self,
            p,
            &cur,
            body,
            AuditAction::SkillReview,
            Pointer::Follow,
        )
    }

    pub fn promote(&self, p: &Principal, name: &str, version: &str) -> Result<Loaded> {
        let _guard = lock_skill(self, p, name);
        let cur = reload(self, p, name, version, Action::Promote)?;
        // Releasing a version is moving a release: its author or an admin of its scope, as
        // for yank, deprecate and rollback (found: any writer promoted another author's
        // approved version and moved the current release).
        require_release_governance(p, &cur)?;
        // Before the state machine: a version short of Test evidence is told which evidence, and
        // one whose scan failed is told so with the findings, whatever step it stands at.
        if !crate::resolve::holds_version(&cur) {
            crate::proof::require_test_evidence(&cur.body)?;
            require_scan(&cur.body, "promotion")?;
        }
        lifecycle::check(cur.body.state, Action::Promote)?;
        crate::resolve::check_not_held(self, p, name, version, &cur.rec.meta.scope)?;
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
            self,
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
    pub fn scan_override(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: ScanOverrideRequest,
    ) -> Result<Loaded> {
        let _guard = lock_skill(self, p, name);
        let cur = reload(self, p, name, version, Action::Review)?;
        if !p.platform {
            return Err(Error::forbidden(
                "only a platform principal may override a failing scan",
            ));
        }
        if registry_core::text::is_blank(&req.reason) {
            return Err(Error::validation("an override needs a reason")
                .with_details(FieldError::new("reason").reason(FieldReason::Empty)));
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
            self,
            p,
            &cur,
            body,
            AuditAction::SkillScanOverride,
            Pointer::Follow,
        )
    }

    pub fn deprecate(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: DeprecateRequest,
    ) -> Result<Loaded> {
        let _guard = lock_skill(self, p, name);
        let cur = reload(self, p, name, version, Action::Deprecate)?;
        require_release_governance(p, &cur)?;
        lifecycle::check(cur.body.state, Action::Deprecate)?;
        if registry_core::text::is_blank(&req.message) {
            return Err(Error::validation("a deprecation needs a message")
                .with_details(FieldError::new("message").reason(FieldReason::Empty)));
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
            self,
            p,
            &cur,
            body,
            AuditAction::SkillDeprecate,
            Pointer::Follow,
        )
    }

    pub fn yank(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: YankRequest,
    ) -> Result<Loaded> {
        let _guard = lock_skill(self, p, name);
        let cur = reload(self, p, name, version, Action::Yank)?;
        require_release_governance(p, &cur)?;
        lifecycle::check(cur.body.state, Action::Yank)?;
        check_note("reason", req.reason.as_deref())?;
        let mut body = cur.body.clone();
        body.yanked_from = Some(cur.body.state);
        body.yank_reason = req.reason;
        body.state = LifecycleState::Yanked;
        step(self, p, &cur, body, AuditAction::SkillYank, Pointer::Follow)
    }

    /// Deletes a version (every lifecycle record of it, and its archive unless another version
    /// shares the bytes) down to the purged level. Drafts (any pre-release state) and yanked
    /// versions may be deleted by a writer; a released version only by an admin with a reason, and
    /// never while it is the current release (yank or roll back first).
    pub fn delete_version(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        reason: Option<String>,
    ) -> Result<registry_core::deletion::Receipt> {
        let _guard = lock_skill(self, p, name);
        let cur = crate::resolve::for_step(self, p, name, version, None)?;
        require_write(p, &cur)?;
        let governs = p.governs(&cur.rec.meta.scope);
        if !crate::resolve::is_author(p, &cur) && !governs {
            return Err(Error::forbidden(
                "only its author or an admin of its scope deletes a version",
            ));
        }
        let deletable =
            !cur.body.state.is_released() && cur.body.state != LifecycleState::Published;
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
            // The release pointer of the version's own scope, whatever scope the request's
            // headers answer the name from (an `X-Project` with its own release of the name
            // would otherwise hide the tenant's).
            if load_pointer(self.store.as_ref(), &cur.rec.meta.scope, name)?
                .and_then(|(_, b)| b.current)
                .is_some_and(|t| t.version_asset == cur.rec.meta.id)
            {
                return Err(Error::new(
                    registry_core::ErrorCode::Conflict,
                    format!("{name}@{version} is the current release: yank it or roll back first"),
                ));
            }
        }
        let reason = registry_core::deletion::check_reason(reason)?
            .unwrap_or_else(|| format!("skill version {name}@{version} deleted"));
        let receipt = self.deleter.delete(
            &p.user,
            &reason,
            std::slice::from_ref(&cur.rec.meta.id),
            registry_core::deletion::DeletionLevel::Purged,
        )?;
        self.archives.forget(blob_key(&cur));
        Ok(receipt)
    }

    pub fn unyank(&self, p: &Principal, name: &str, version: &str) -> Result<Loaded> {
        let _guard = lock_skill(self, p, name);
        let cur = reload(self, p, name, version, Action::Unyank)?;
        require_release_governance(p, &cur)?;
        lifecycle::check(cur.body.state, Action::Unyank)?;
        let mut body = cur.body.clone();
        body.state = cur.body.yanked_from.unwrap_or(LifecycleState::Published);
        body.yanked_from = None;
        body.yank_reason = None;
        step(
            self,
            p,
            &cur,
            body,
            AuditAction::SkillUnyank,
            Pointer::Follow,
        )
    }

    /// Points the release of `name` back to an earlier released version; later promotes move it on.
    pub fn rollback(&self, p: &Principal, name: &str, req: RollbackRequest) -> Result<Loaded> {
        let _guard = lock_skill(self, p, name);
        let all = self.visible_versions(p, name)?;
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
        let current = load_pointer(self.store.as_ref(), &target.rec.meta.scope, name)?
            .and_then(|(_, b)| b.current);
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
            self,
            p,
            target,
            Pointer::Pin(target.rec.meta.id.clone()),
            &mut ops,
        )?;
        if let Some(WriteOp::Audit(a)) = ops.iter_mut().find(|o| matches!(o, WriteOp::Audit(_))) {
            a.action = AuditAction::SkillRollback.into();
        }
        if !ops.is_empty() {
            self.store.commit(ops)?;
        }
        if let Some(op) = index {
            apply_index(self, op)?;
        }
        Ok(target.clone())
    }
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
        .with_details(serde_json::json!({"reason": crate::error::Refusal::NotReleaseGovernor})))
    }
}
