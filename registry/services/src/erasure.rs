//! Erasing a subject (a user of a tenant): what is the subject's is purged, down to the bytes
//! — every asset in their user, session and task scopes, the memories they wrote about
//! themselves, their context manifests — and what they shared with others (tenant and project
//! documents, skills, team memories they owned) is kept and re-owned to the tenant, listed in
//! the receipt. Other people's memories about the subject are never purged by an erasure: an
//! admin of their scope gets them as a list to review. The erasure reaches only as far as its
//! caller does (its projects, its clearance).

use registry_core::access::{self, ErasureReach};
use registry_core::asset::{AssetId, AssetKind};
use registry_core::audit::{AuditAction, AuditDraft};
use registry_core::deletion::{DeletionLevel, Receipt};
use registry_core::principal::Principal;
use registry_core::store::{AssetQuery, WriteOp, pages};
use registry_core::{CoreError, Relation};
use serde::Serialize;

use crate::{Result, Services};

/// What erasing a subject does.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErasurePlan {
    pub subject: String,
    /// Purged with everything derived from them.
    pub purge: Vec<AssetId>,
    /// Kept, and re-owned to the tenant.
    pub reown: Vec<AssetId>,
    /// Other people's memories about the subject: kept, for an admin of their scope to review
    /// (listed to such an admin only, never purged by the erasure).
    pub about_subject_for_review: Vec<AssetId>,
    /// Context manifests of the subject's requests, erased.
    pub context_manifests: usize,
}

/// Owner of assets the tenant keeps after their owner was erased.
pub fn tenant_owner(tenant: &str) -> String {
    format!("tenant:{tenant}")
}

impl Services {
    /// What erasing `user` in `p`'s tenant would purge, re-own and leave for review, as far as
    /// `p` reaches ([`access::erasure_reach`]: the subject's own data, within `p`'s projects,
    /// and only what `p` may read). The tenant's heads, page by page.
    pub fn plan_erasure(&self, p: &Principal, user: &str) -> Result<ErasurePlan> {
        let store = &self.backends.store;
        let subject = user.trim().to_lowercase();
        let mut purge = vec![];
        let mut reown = vec![];
        let mut review = vec![];
        let query = AssetQuery {
            tenant: Some(p.tenant.clone()),
            heads_only: true,
            ..Default::default()
        };
        for page in pages(&**store, query) {
            registry_core::deadline::check()?;
            for r in page? {
                let about_subject = r.meta.kind == AssetKind::Memory
                    && r.body
                        .get("subject")
                        .and_then(|v| v.as_str())
                        .is_some_and(|x| x.trim().to_lowercase() == subject);
                match access::erasure_reach(p, user, &r.meta, about_subject) {
                    ErasureReach::Purge => purge.push(r.meta.id),
                    ErasureReach::Reown => reown.push(r.meta.id),
                    ErasureReach::Review => review.push(r.meta.id),
                    ErasureReach::Untouched => {}
                }
            }
        }
        Ok(ErasurePlan {
            subject: user.to_string(),
            purge,
            reown,
            about_subject_for_review: review,
            context_manifests: if access::erasure_reaches_manifests(p, user) {
                store.count_manifests(&p.tenant, user)?
            } else {
                0
            },
        })
    }

    /// Carries out an erasure plan `p` made (the caller checked the right to erase the subject).
    pub fn erase(
        &self,
        p: &Principal,
        plan: ErasurePlan,
        reason: Option<String>,
    ) -> Result<Receipt> {
        let store = &self.backends.store;
        // The subject's context manifests go first, so that the purge's checkpoint takes their
        // pages out of the log too.
        let manifests = if access::erasure_reaches_manifests(p, &plan.subject) {
            store.erase_manifests(&p.tenant, &plan.subject)?
        } else {
            0
        };
        let reowned = self.reown(p, &plan)?;
        if plan.purge.is_empty() {
            if manifests > 0 || !reowned.is_empty() {
                store.checkpoint()?;
            }
            return Err(CoreError::Coded {
                code: registry_core::ErrorCode::NotFound,
                message: format!("no assets of subject {}", plan.subject),
                details: serde_json::json!({
                    "context_manifests_erased": manifests, "reowned": reowned
                }),
            }
            .into());
        }
        let reason = reason.unwrap_or_else(|| "subject erasure".to_string());
        // Each step commits on its own: none starts after the deadline (a retry plans again
        // and finishes what is left).
        registry_core::deadline::check_step()?;
        let mut r = self
            .deletions
            .delete(p, &plan.purge, DeletionLevel::Purged, &reason)?;
        r.reowned = reowned;
        store.put_receipt(&r)?;
        Ok(r)
    }

    /// Each asset's next version names the tenant as owner (a document's chunks with it), with
    /// an audit event.
    fn reown(&self, p: &Principal, plan: &ErasurePlan) -> Result<Vec<AssetId>> {
        let store = &self.backends.store;
        let owner = tenant_owner(&p.tenant);
        let mut done = vec![];
        for id in &plan.reown {
            registry_core::deadline::check_step()?;
            let Some(head) = store.get(id)? else { continue };
            let mut recs = vec![head];
            if recs[0].meta.kind == AssetKind::Document {
                let chunks: Vec<String> = store
                    .edges_from(id)?
                    .into_iter()
                    .filter(|e| e.relation == Relation::ChunkOf)
                    .map(|e| e.child)
                    .collect();
                if !chunks.is_empty() {
                    recs.extend(store.find(&AssetQuery {
                        ids: Some(chunks),
                        heads_only: true,
                        ..Default::default()
                    })?);
                }
            }
            let mut ops = vec![];
            for mut rec in recs {
                let hash = rec.meta.content_hash.clone();
                rec.meta.version += 1;
                rec.meta.owner = owner.clone();
                rec.meta.updated_at = chrono::Utc::now();
                ops.push(WriteOp::Audit(
                    AuditDraft::new(&p.user, AuditAction::AssetReown)
                        .in_scope(&rec.meta.scope)
                        .asset(&rec.meta.id)
                        .hashes(Some(hash.clone()), Some(hash))
                        .reason("owner erased; re-owned to the tenant"),
                ));
                ops.push(WriteOp::PutVersion(Box::new(rec)));
            }
            store.commit(ops)?;
            done.push(id.clone());
        }
        Ok(done)
    }
}
