//! The evidence Test rests on (DESIGN §6, issue 32 item 2): results recorded by a tester who is
//! neither the version's author nor its reviewer, bound to the digest, with their logs.
//!
//! - A key with the `tester` role in the version's scope records the run that counts
//!   ([`VersionBody::tests`]); a passing run moves the version to `tested`.
//! - The author's own results are kept apart ([`VersionBody::self_reported`]), shown, and never
//!   satisfy Test; the state does not move.
//! - A version that declares no test passes Test only by a reviewer's waiver with a reason
//!   ([`SkillsService::record_waiver`]; never its author).
//! - Each result may carry its log; it is stored as a blob under its digest in the version's
//!   tenant namespace (so one tenant's purge never touches another's), listed in
//!   `blob_digests` (so the version's purge removes it), and read through
//!   [`SkillsService::test_log`] by the scope's reviewers, testers and admins and the author.
//! - Promotion re-checks all of it ([`require_test_evidence`]) and review refuses the tester
//!   ([`require_not_tester`]), so the order of the steps cannot get around author ≠ tester ≠
//!   reviewer.

use std::collections::BTreeSet;

use chrono::Utc;
use registry_core::principal::Principal;
use registry_core::{AuditAction, ErrorCode, FieldError, FieldReason};
use serde::Deserialize;

use crate::error::{Error, Refusal, Result};
use crate::lifecycle::{self, Action, LifecycleState};
pub use crate::model::TestWaiver;
use crate::model::{Decision, Loaded, TestResultsRequest, TestRun, VersionBody};
use crate::publish::{Pointer, step};
use crate::resolve::reload;
use crate::service::{SkillsService, check_note, lock_skill, parse_digest};

pub use crate::model::{MAX_TEST_LOG_CHARS, MAX_TEST_RESULTS};

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TestWaiverRequest {
    /// Why the version may go without a test (at most 1,000 characters).
    #[schemars(
        pattern(registry_core::text::NOT_BLANK),
        length(max = crate::model::MAX_NOTE_CHARS)
    )]
    #[cfg_attr(feature = "openapi", schema(max_length = 1000))]
    pub reason: String,
}

fn missing(b: &VersionBody, why: Refusal) -> Error {
    Error::new(
        ErrorCode::TestEvidenceMissing,
        format!(
            "{}@{}: Test needs a passing run by a tester who is neither its author nor its reviewer ({})",
            b.name,
            b.version,
            why.as_str()
        ),
    )
    .with_details(serde_json::json!({
        "reason": why,
        "state": b.state.as_str(),
        "action": "promote",
        "allowed_transitions": b.state.allowed(),
    }))
}

fn declared_tests(b: &VersionBody) -> BTreeSet<&str> {
    b.manifest
        .iter()
        .flat_map(|m| m.tests.iter().map(|t| t.name.as_str()))
        .collect()
}

/// Whether Test is satisfied on the version's digest (an independent passing run, or a waiver
/// when nothing is declared).
pub fn test_passed(b: &VersionBody) -> bool {
    require_test_evidence(b).is_ok()
}

/// Refuses a promotion (409 `TEST_EVIDENCE_MISSING`, `details.reason`) unless Test is
/// satisfied: a version that declares tests has a passing run on its digest recorded by
/// someone other than its author and its last reviewer; one that declares none has a waiver.
pub fn require_test_evidence(b: &VersionBody) -> Result<()> {
    if declared_tests(b).is_empty() {
        return match &b.test_waiver {
            Some(w) if w.digest == b.digest => Ok(()),
            _ => Err(missing(b, Refusal::NoDeclaredTests)),
        };
    }
    let Some(t) = b.tests.as_ref().filter(|t| t.digest == b.digest) else {
        return Err(missing(
            b,
            if b.self_reported.is_some() {
                Refusal::SelfReportedOnly
            } else {
                Refusal::NoTestRun
            },
        ));
    };
    if t.self_reported || t.recorded_by == b.author {
        return Err(missing(b, Refusal::TesterIsAuthor));
    }
    if !t.passed {
        return Err(missing(b, Refusal::TestsFailed));
    }
    let reviewer = b
        .reviews
        .iter()
        .rev()
        .find(|r| r.decision == Decision::Approve && r.digest == b.digest);
    if reviewer.is_some_and(|r| r.reviewer == t.recorded_by) {
        return Err(missing(b, Refusal::TesterIsReviewer));
    }
    Ok(())
}

/// The user who recorded the counted test run may not also review the version: 403
/// `tester_is_reviewer` (a waiver is a reviewer's own call, so its reviewer may approve).
pub(crate) fn require_not_tester(p: &Principal, l: &Loaded) -> Result<()> {
    let tested_by_p = l
        .body
        .tests
        .as_ref()
        .is_some_and(|t| !t.self_reported && t.recorded_by == p.user);
    if tested_by_p {
        return Err(
            Error::forbidden("the tester of a version may not also review it")
                .with_details(serde_json::json!({"reason": Refusal::TesterIsReviewer})),
        );
    }
    Ok(())
}

/// The blob namespace of a version: its tenant, or `global`.
fn namespace(l: &Loaded) -> String {
    l.rec
        .meta
        .scope
        .tenant
        .clone()
        .unwrap_or_else(|| "global".to_string())
}

fn bad_result(i: usize, field: &str, why: FieldReason, msg: String) -> Error {
    Error::validation(msg)
        .with_details(FieldError::new(format!("results[{i}].{field}")).reason(why))
}

/// Checks the results against the declared tests and stores their logs; returns the run.
fn take_results(
    s: &SkillsService,
    cur: &Loaded,
    p: &Principal,
    req: TestResultsRequest,
    self_reported: bool,
    blob_keys: &mut Vec<String>,
) -> Result<TestRun> {
    let digest = parse_digest(&req.digest)?;
    if digest != cur.body.digest {
        return Err(Error::new(
            ErrorCode::Conflict,
            "the tests ran against another digest than this version's",
        )
        .with_details(serde_json::json!({"expected": cur.body.digest, "got": digest})));
    }
    if req.results.len() > MAX_TEST_RESULTS {
        return Err(Error::new(
            ErrorCode::PayloadTooLarge,
            format!("at most {MAX_TEST_RESULTS} results"),
        )
        .with_details(
            FieldError::new("results")
                .reason(FieldReason::TooLarge)
                .limit(MAX_TEST_RESULTS),
        ));
    }
    let declared = declared_tests(&cur.body);
    if declared.is_empty() {
        return Err(missing(&cur.body, Refusal::NoDeclaredTests));
    }
    let got: BTreeSet<&str> = req.results.iter().map(|r| r.name.as_str()).collect();
    if declared != got || got.len() != req.results.len() {
        return Err(
            Error::validation("results must name each declared test exactly once").with_details(
                FieldError::new("results").with("declared", declared).with(
                    "got",
                    req.results.iter().map(|r| &r.name).collect::<Vec<_>>(),
                ),
            ),
        );
    }
    let mut results = req.results;
    let ns = namespace(cur);
    for (i, r) in results.iter_mut().enumerate() {
        let d = parse_digest(&r.log_digest)?;
        r.log_stored = false;
        let Some(log) = r.log.take() else { continue };
        if let Some(len) = registry_core::text::over(&log, MAX_TEST_LOG_CHARS) {
            return Err(Error::new(
                ErrorCode::PayloadTooLarge,
                format!("a test log is at most {MAX_TEST_LOG_CHARS} characters"),
            )
            .with_details(
                FieldError::new(format!("results[{i}].log"))
                    .reason(FieldReason::TooLarge)
                    .len(len)
                    .limit(MAX_TEST_LOG_CHARS),
            ));
        }
        let hex = registry_core::hash::sha256_hex(log.as_bytes());
        if d != format!("sha256:{hex}") {
            return Err(bad_result(
                i,
                "log_digest",
                FieldReason::DigestMismatch,
                "the log does not hash to log_digest".into(),
            ));
        }
        r.log_digest = d;
        blob_keys.push(s.blobs.put_in(&ns, log.as_bytes())?);
        r.log_stored = true;
    }
    let passed = results.iter().all(|r| r.passed);
    Ok(TestRun {
        digest,
        results,
        passed,
        recorded_by: p.user.clone(),
        at: Utc::now(),
        self_reported,
    })
}

impl SkillsService {
    /// Records a test run: a tester's counts (and moves the state), the author's is kept as
    /// self-reported (the state stays). Anyone else: 403.
    pub fn record_tests(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: TestResultsRequest,
    ) -> Result<Loaded> {
        let _guard = lock_skill(self, p, name);
        let cur = reload(self, p, name, version, Action::Test)?;
        let author = crate::resolve::is_author(p, &cur);
        let scope = &cur.rec.meta.scope;
        if !author && !p.can_test_in(scope) {
            return Err(Error::forbidden(
                "the tester role in the skill's scope is required to record its test results",
            )
            .with_details(serde_json::json!({"reason": Refusal::TesterRoleRequired})));
        }
        if author && !p.can_write_into(scope) {
            return Err(Error::forbidden(
                "the writer role in the skill's scope is required",
            ));
        }
        lifecycle::check(cur.body.state, Action::Test)?;
        let mut keys = vec![];
        let run = take_results(self, &cur, p, req, author, &mut keys)?;
        let mut body = cur.body.clone();
        for k in keys {
            if !body.blob_digests.contains(&k) {
                body.blob_digests.push(k);
            }
        }
        if author {
            body.self_reported = Some(run);
            return step(
                self,
                p,
                &cur,
                body,
                AuditAction::SkillTestSelfReported,
                Pointer::Follow,
            );
        }
        let passed = run.passed;
        body.tests = Some(run);
        body.reviews.clear();
        body.state = if passed {
            LifecycleState::Tested
        } else {
            LifecycleState::Draft
        };
        step(self, p, &cur, body, AuditAction::SkillTest, Pointer::Follow)
    }

    /// A reviewer of the version's scope (not its author) waives Test for a version that
    /// declares no test; audited as `skill.test_waiver` (ids and the digest; the reason stays in
    /// the version).
    pub fn record_waiver(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        req: TestWaiverRequest,
    ) -> Result<Loaded> {
        let _guard = lock_skill(self, p, name);
        let cur = reload(self, p, name, version, Action::Test)?;
        if !p.can_review_in(&cur.rec.meta.scope) {
            return Err(Error::forbidden(
                "the reviewer role in the skill's scope is required to waive its tests",
            ));
        }
        if crate::resolve::is_author(p, &cur) {
            return Err(
                Error::forbidden("the author may not waive their own skill's tests")
                    .with_details(serde_json::json!({"reason": Refusal::SelfWaiver})),
            );
        }
        if registry_core::text::is_blank(&req.reason) {
            return Err(Error::validation("a waiver needs a reason")
                .with_details(FieldError::new("reason").reason(FieldReason::Empty)));
        }
        check_note("reason", Some(&req.reason))?;
        lifecycle::check(cur.body.state, Action::Test)?;
        if !declared_tests(&cur.body).is_empty() {
            return Err(Error::new(
                ErrorCode::Conflict,
                format!("{name}@{version} declares tests: a tester runs them, they are not waived"),
            )
            .with_details(serde_json::json!({"reason": Refusal::TestsDeclared})));
        }
        let mut body = cur.body.clone();
        body.test_waiver = Some(TestWaiver {
            by: p.user.clone(),
            reason: req.reason,
            digest: cur.body.digest.clone(),
            at: Utc::now(),
        });
        body.reviews.clear();
        body.state = LifecycleState::Tested;
        step(
            self,
            p,
            &cur,
            body,
            AuditAction::SkillTestWaiver,
            Pointer::Follow,
        )
    }

    /// The stored log `log_digest` of a version's test results (counted or self-reported), as
    /// bytes. Not one of its logs: 404; not a reader of logs: 403.
    pub fn test_log(
        &self,
        p: &Principal,
        name: &str,
        version: &str,
        log_digest: &str,
    ) -> Result<Vec<u8>> {
        let l = self.resolve(p, name, version)?;
        if !may_read_logs(p, &l) {
            return Err(Error::forbidden(
                "test logs are read by the scope's reviewers, testers and admins and the author",
            ));
        }
        let d = parse_digest(log_digest)?;
        let hex = crate::service::digest_hex(&d);
        let key = registry_core::store::namespaced_blob_key(&namespace(&l), &hex);
        let listed = l.body.blob_digests.contains(&key)
            && [&l.body.tests, &l.body.self_reported]
                .into_iter()
                .flatten()
                .any(|t| t.results.iter().any(|r| r.log_stored && r.log_digest == d));
        let not_found = || Error::not_found(format!("no test log {d} for {name}@{version}"));
        if !listed {
            return Err(not_found());
        }
        self.blobs.get(&key)?.ok_or_else(not_found)
    }
}

/// Whether `p` may read the test logs of `l`: its author, a reviewer, tester or admin of its
/// scope. Another tenant never gets here (the resolver answered 404).
fn may_read_logs(p: &Principal, l: &Loaded) -> bool {
    let scope = &l.rec.meta.scope;
    crate::resolve::is_author(p, l)
        || p.can_review_in(scope)
        || p.can_test_in(scope)
        || p.governs(scope)
}
