//! Procedures that become skills: reviewed procedural memories the caller may read become a
//! skill draft (`registry_skills::drafts` writes and publishes it through the normal path, the
//! scan included), citing each memory.
//!
//! A memory qualifies when it is procedural, served (active or confirmed), confirmed by a
//! reviewer or voted helpful by at least [`DraftPolicy::min_helpful`] distinct principals, and
//! voted harmful by none. A draft is readable across its scope, so a memory that is restricted
//! to purposes, above `internal` or in another user's own scope does not qualify, and memories
//! of two projects cannot make one draft. A refusal is 422 `MEMORY_NOT_ELIGIBLE` with `details.field` (`memory_ids[i]`)
//! and `details.reason`; a memory the caller may not read answers 404 like a missing one.

use registry_context::{Error, Result};
use registry_core::access::{self, Action};
use registry_core::asset::{AssetKind, AssetStatus, Sensitivity};
use registry_core::principal::Principal;
use registry_core::{ErrorCode, FieldError, FieldReason, Scope};
use registry_memory::record::{MemoryBody, MemoryClass};
use registry_skills::drafts::{DraftEvidence, DraftFromMemoryRequest, ProcedureSource};
use registry_skills::{Loaded, drafts};
use serde::{Deserialize, Serialize};

use crate::Services;

/// Which procedural memories may become a skill draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DraftPolicy {
    /// Distinct helpful votes that qualify a procedure that no reviewer confirmed.
    pub min_helpful: u64,
}

impl Default for DraftPolicy {
    fn default() -> Self {
        DraftPolicy { min_helpful: 3 }
    }
}

use registry_skills::drafts::MAX_MEMORY_ID_CHARS;

/// A draft made from memories: the version and the evidence it names.
#[derive(Debug)]
pub struct DraftFromMemory {
    pub draft: Loaded,
    pub created: bool,
    pub evidence: Vec<DraftEvidence>,
}

fn not_eligible(i: usize, id: &str, reason: FieldReason, why: String) -> Error {
    Error::new(ErrorCode::MemoryNotEligible, format!("memory {id}: {why}")).with_details(
        FieldError::new(format!("memory_ids[{i}]"))
            .reason(reason)
            .with("memory_id", id),
    )
}

fn invalid(field: &str, why: impl Into<String>) -> Error {
    Error::validation(why).with_details(FieldError::new(field).reason(FieldReason::Invalid))
}

impl Services {
    /// Makes a skill draft from procedural memories `p` may read (see the module doc).
    pub fn draft_from_memory(
        &self,
        p: &Principal,
        req: &DraftFromMemoryRequest,
    ) -> Result<DraftFromMemory> {
        let n = req.memory_ids.len();
        if n == 0 || n > drafts::MAX_DRAFT_SOURCES {
            return Err(invalid(
                "memory_ids",
                format!("name 1-{} memories", drafts::MAX_DRAFT_SOURCES),
            ));
        }
        let mut sources: Vec<ProcedureSource> = Vec::with_capacity(n);
        let mut project: Option<String> = None;
        for (i, id) in req.memory_ids.iter().enumerate() {
            if registry_core::text::over(id, MAX_MEMORY_ID_CHARS).is_some()
                || req.memory_ids[..i].contains(id)
            {
                return Err(invalid(
                    &format!("memory_ids[{i}]"),
                    format!("each memory id once, at most {MAX_MEMORY_ID_CHARS} characters"),
                ));
            }
            let src = self.procedure(p, i, id)?;
            if let Some(pr) = &src.1 {
                if project.as_ref().is_some_and(|x| x != pr) {
                    return Err(not_eligible(
                        i,
                        id,
                        FieldReason::MixedProjects,
                        "the memories belong to two projects; one draft lives in one".into(),
                    ));
                }
                project = Some(pr.clone());
            }
            sources.push(src.0);
        }
        let scope = Scope {
            project,
            ..Scope::tenant(p.tenant.clone())
        };
        let (published, evidence) =
            drafts::draft_from_procedures(&self.skills, p, req, &scope, &sources)?;
        Ok(DraftFromMemory {
            draft: published.version,
            created: published.created,
            evidence,
        })
    }

    /// Memory `id` as a procedure source, with its project, if it qualifies.
    fn procedure(
        &self,
        p: &Principal,
        i: usize,
        id: &str,
    ) -> Result<(ProcedureSource, Option<String>)> {
        let rec = match self.backends.store.get(id)? {
            Some(r)
                if r.meta.kind == AssetKind::Memory && access::may(p, Action::Read, &r.meta) =>
            {
                r
            }
            _ => {
                return Err(Error::not_found(format!("no memory {id}"))
                    .with_details(FieldError::new(format!("memory_ids[{i}]"))));
            }
        };
        let body = MemoryBody::from_record(&rec)
            .ok_or_else(|| Error::internal(format!("memory {id} has a malformed body")))?;
        if body.class != MemoryClass::Procedural {
            return Err(not_eligible(
                i,
                id,
                FieldReason::NotProcedural,
                format!(
                    "a {} memory; only procedures become skills",
                    body.class.as_str()
                ),
            ));
        }
        if !rec.meta.status.is_servable() {
            return Err(not_eligible(
                i,
                id,
                FieldReason::NotConfirmed,
                format!("{} (not served)", rec.meta.status.as_str()),
            ));
        }
        let stats = self
            .backends
            .store
            .stats(std::slice::from_ref(&rec.meta.id))?
            .remove(&rec.meta.id)
            .unwrap_or_default();
        if stats.harmful > 0 {
            return Err(not_eligible(
                i,
                id,
                FieldReason::HarmfulFeedback,
                format!("{} harmful vote(s)", stats.harmful),
            ));
        }
        let min = self.draft_policy.min_helpful;
        if rec.meta.status != AssetStatus::Confirmed && stats.helpful < min {
            return Err(not_eligible(
                i,
                id,
                FieldReason::NotConfirmed,
                format!(
                    "neither confirmed by a reviewer nor voted helpful by {min} principals ({} so far)",
                    stats.helpful
                ),
            ));
        }
        if rec.meta.sensitivity > Sensitivity::Internal {
            return Err(not_eligible(
                i,
                id,
                FieldReason::Sensitivity,
                "above internal; a draft is readable across its scope".into(),
            ));
        }
        if rec.meta.scope.user.as_ref().is_some_and(|u| *u != p.user) {
            return Err(not_eligible(
                i,
                id,
                FieldReason::PrivateScope,
                "another user's own memory; only they may make it a skill".into(),
            ));
        }
        if !rec.meta.purposes.is_empty() {
            return Err(not_eligible(
                i,
                id,
                FieldReason::PurposeRestricted,
                "served only for some purposes; a draft is readable for any".into(),
            ));
        }
        Ok((
            ProcedureSource {
                id: rec.meta.id.clone(),
                version: rec.meta.version,
                content_hash: rec.meta.content_hash.clone(),
                content: body.content,
                applicability: body.applicability,
            },
            rec.meta.scope.project.clone(),
        ))
    }
}
