//! Change impact: what a change to one asset reaches. The context manifests that included it
//! (by id, with the version and hashes each held), the assets that cite it or were derived
//! from it (the derivation graph: skills citing a memory, chunks cut from a document), and the
//! runs that loaded it.
//!
//! Everything is shown as the caller may see it: the asset itself answers 404 unless the
//! caller may see it (another tenant's answers like a missing one), manifests are the caller's
//! own (any of the tenant for an admin), and a citing or derived asset is listed only when the
//! caller may see it. Ids, versions and hashes only, never content.

use chrono::{DateTime, Utc};
use registry_context::{Error, Manifest, ReplayItem, Result};
use registry_core::asset::{AssetKind, AssetRecord};
use registry_core::derivation::{ChildStore, Relation};
use registry_core::principal::Principal;
use registry_core::{FieldError, FieldReason};
use serde::{Deserialize, Serialize};

use crate::Services;

/// Most manifests one answer lists (`limit`); `manifests.total` counts them all.
pub const MAX_IMPACT_MANIFESTS: usize = 100;
/// Manifests listed when the request names no `limit`.
pub const DEFAULT_IMPACT_MANIFESTS: usize = 20;
/// Most citing and derived assets one answer lists (a document's chunks, say); `truncated`
/// says when there were more.
pub const MAX_IMPACT_LINKS: usize = 500;
/// Most runs one answer lists, newest first (`truncated` says when there were more).
pub const MAX_IMPACT_RUNS: usize = 100;

/// The asset whose impact is shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImpactSubject {
    pub id: String,
    pub kind: AssetKind,
    pub version: u32,
    pub status: String,
    pub content_hash: String,
    /// `name@version`, for a skill version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
}

/// A manifest that included the asset, and the items that stood for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ManifestUse {
    pub id: String,
    pub principal: String,
    pub created_at: DateTime<Utc>,
    /// Whether the manifest kept its request, so `POST /v1/context/{id}/replay` can replay it.
    pub replayable: bool,
    pub items: Vec<ReplayItem>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ManifestsImpact {
    /// How many of the caller's readable manifests included the asset.
    pub total: usize,
    /// The newest of them, at most `limit`.
    pub recent: Vec<ManifestUse>,
}

/// An asset linked to the subject by a derivation edge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkedAsset {
    pub id: String,
    pub kind: AssetKind,
    /// The edge from the subject: `cites`, `chunk_of`, `summary_of`, …
    pub relation: String,
    pub version: u32,
    pub status: String,
    pub content_hash: String,
    /// `name@version`, for a skill version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
}

/// A harness run that loaded the asset (a skill version's digest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunUse {
    pub run_id: String,
    pub digest: String,
    pub outcome: String,
    pub at: DateTime<Utc>,
}

/// `GET /v1/assets/{id}/impact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Impact {
    pub asset: ImpactSubject,
    pub manifests: ManifestsImpact,
    /// Skills, memories and evaluation cases that cite the asset (`cites` edges): deleting it
    /// flags them.
    pub citing: Vec<LinkedAsset>,
    /// Assets derived from it (a document's chunks, the evidence search serves; summaries).
    pub derived: Vec<LinkedAsset>,
    /// Harness runs reported of it (a skill version), newest first, as the caller may see them.
    pub runs: Vec<RunUse>,
    /// More citing or derived assets than [`MAX_IMPACT_LINKS`], or more runs than
    /// [`MAX_IMPACT_RUNS`], exist.
    pub truncated: bool,
}

fn skill_label(r: &AssetRecord) -> Option<String> {
    (r.meta.kind == AssetKind::SkillVersion).then(|| {
        format!(
            "{}@{}",
            r.body["name"].as_str().unwrap_or("?"),
            r.body["version"].as_str().unwrap_or("?")
        )
    })
}

/// Whether a manifest item stands for `subject`: the asset itself, a chunk cut from it, or the
/// skill version it names.
fn stands_for(
    item: &registry_context::compile::ManifestItem,
    id: &str,
    skill: Option<&str>,
) -> bool {
    item.source_id.as_deref() == Some(id)
        || item.parent_id.as_deref() == Some(id)
        || (item.source_type == "skill" && skill.is_some() && item.source_id.as_deref() == skill)
}

impl Services {
    /// The impact of changing asset `id`, as `p` may see it (see the module doc). `limit`
    /// bounds the manifests listed (1..=100, default 20).
    pub fn impact(&self, p: &Principal, id: &str, limit: Option<usize>) -> Result<Impact> {
        let limit = limit.unwrap_or(DEFAULT_IMPACT_MANIFESTS);
        if limit == 0 || limit > MAX_IMPACT_MANIFESTS {
            return Err(
                Error::validation(format!("limit must be 1..={MAX_IMPACT_MANIFESTS}"))
                    .with_details(FieldError::new("limit").reason(FieldReason::Invalid)),
            );
        }
        let rec = match self.backends.store.get(id)? {
            Some(r) if crate::overview::may_see(p, &r) => r,
            _ => return Err(Error::not_found(format!("no asset {id}"))),
        };
        let skill = skill_label(&rec);
        let (total, manifests) = self.context.manifests_with_asset(p, id, limit)?;
        let recent = manifests
            .into_iter()
            .map(|(m, replayable)| manifest_use(m, replayable, id, skill.as_deref()))
            .collect();
        let (citing, derived, truncated) = self.linked(p, id)?;
        let (runs, more_runs) = self.runs_that_loaded(p, &rec)?;
        Ok(Impact {
            asset: ImpactSubject {
                id: rec.meta.id.clone(),
                kind: rec.meta.kind,
                version: rec.meta.version,
                status: rec.meta.status.as_str().to_string(),
                content_hash: rec.meta.content_hash.clone(),
                skill,
            },
            manifests: ManifestsImpact { total, recent },
            citing,
            derived,
            runs,
            truncated: truncated || more_runs,
        })
    }

    /// The runs harnesses reported of asset `id` (a skill version) that `p` may see, newest
    /// first, at most `MAX_IMPACT_RUNS`, and whether there were more. Another asset kind has
    /// no runs.
    pub fn runs_that_loaded(
        &self,
        p: &Principal,
        rec: &AssetRecord,
    ) -> Result<(Vec<RunUse>, bool)> {
        if rec.meta.kind != AssetKind::SkillVersion {
            return Ok((vec![], false));
        }
        let (runs, more) = self.skills.recent_runs(p, &rec.meta.id, MAX_IMPACT_RUNS)?;
        let runs = runs
            .into_iter()
            .map(|r| RunUse {
                run_id: r.run_id,
                digest: r.digest,
                outcome: serde_json::to_value(r.outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                at: r.at,
            })
            .collect();
        Ok((runs, more))
    }

    /// The assets linked to `id` by its outgoing edges that `p` may see: citing ones (`cites`)
    /// and derived ones (the rest), each list bounded.
    fn linked(
        &self,
        p: &Principal,
        id: &str,
    ) -> Result<(Vec<LinkedAsset>, Vec<LinkedAsset>, bool)> {
        let edges = self.backends.store.edges_from(id)?;
        let mut citing = vec![];
        let mut derived = vec![];
        let mut truncated = false;
        for e in edges
            .iter()
            .filter(|e| e.child_store == ChildStore::Assets && e.relation != Relation::Supersedes)
        {
            if citing.len() + derived.len() >= MAX_IMPACT_LINKS {
                truncated = true;
                break;
            }
            registry_core::deadline::check()?;
            let Some(child) = self.backends.store.get(&e.child)? else {
                continue;
            };
            if !crate::overview::may_see(p, &child) {
                continue;
            }
            let link = LinkedAsset {
                id: child.meta.id.clone(),
                kind: child.meta.kind,
                relation: e.relation.as_str().to_string(),
                version: child.meta.version,
                status: child.meta.status.as_str().to_string(),
                content_hash: child.meta.content_hash.clone(),
                skill: skill_label(&child),
            };
            if e.relation == Relation::Cites {
                citing.push(link);
            } else {
                derived.push(link);
            }
        }
        Ok((citing, derived, truncated))
    }
}

fn manifest_use(m: Manifest, replayable: bool, id: &str, skill: Option<&str>) -> ManifestUse {
    ManifestUse {
        items: m
            .items
            .iter()
            .filter(|i| stands_for(i, id, skill))
            .map(ReplayItem::of)
            .collect(),
        id: m.id,
        principal: m.principal,
        created_at: m.created_at,
        replayable,
    }
}
