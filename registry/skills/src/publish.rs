//! Publishing: an uploaded archive checked (limits, validation, the reserved names, the version,
//! the scan) and stored as a draft, and the one write path every later step takes (`step`):
//! the version's next image, the release pointer's move (`Pointer`) and the audit event in
//! one commit, then the discover index.

use chrono::Utc;
use registry_core::asset::{AssetKind, AssetMeta, AssetRecord, AssetStatus, SourceKind, Trust};
use registry_core::audit::AuditAction;
use registry_core::principal::Principal;
use registry_core::store::{AssetQuery, AssetStore, WriteOp};
use registry_core::{ErrorCode, FieldError, Scope};
use skills_sdk::semver::Version;
use skills_sdk::{DiscoverEntry, SkillScope, ValidationMode};

use crate::discovery::{IndexOp, apply_index, index_doc};
use crate::error::{Error, Result};
use crate::lifecycle::LifecycleState;
use crate::model::{DiscoverView, Loaded, Published, ReleaseBody, ReleaseTarget, VersionBody};
use crate::service::{
    RELEASE_PREFIX, SkillsService, audit, digest_hex, limits, load_pointer, lock_skill,
};

/// A name the route table uses (`/v1/skills/by-digest/…`), so no skill may take it.
pub const RESERVED_NAMES: &[&str] = &["by-digest"];

impl SkillsService {
    /// Checks and stores an uploaded archive as a draft. `set_version` gives plain Agent Skills
    /// (no `skill.toml`, no `metadata.version`) their version; it must agree with a declared one.
    pub fn publish(
        &self,
        p: &Principal,
        bytes: &[u8],
        set_version: Option<&str>,
    ) -> Result<Published> {
        self.publish_citing(p, bytes, set_version, vec![])
    }

    /// As [`Self::publish`], and a new draft records `cites` (each edge's child is the new
    /// version) in the same commit: a draft made from procedures cites them.
    pub(crate) fn publish_citing(
        &self,
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
        let _guard = lock_skill(self, p, &name);
        crate::resolve::check_not_held(self, p, &name, &version.to_string(), &scope)?;
        let existing = versions_in_scope(self.store.as_ref(), &scope, &name)?;
        if let Some(prev) = existing
            .iter()
            .find(|l| l.semver().as_ref() == Some(&version))
        {
            // Another author's draft the caller may not see (rule 1) still holds its
            // `name@version` in the scope, but answers a bare conflict: neither its view nor
            // its digest (which would confirm guessed bytes) reaches the caller.
            if !(p.can_see(&prev.rec.meta) && crate::resolve::admits(p, prev)) {
                return Err(Error::new(
                    ErrorCode::Conflict,
                    format!("{name}@{version} exists; versions are immutable"),
                )
                .with_details(serde_json::json!({"digest": digest})));
            }
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
            .with_details(
                serde_json::json!({"existing_digest": prev.body.digest, "digest": digest}),
            ));
        }
        let archive_sha = registry_core::hash::sha256_hex(bytes);
        let namespace = scope.tenant.clone().unwrap_or_else(|| "global".to_string());
        let archive_blob = self.blobs.put_in(&namespace, bytes)?;
        let mut entry = DiscoverEntry::from_skill(&skill, Some(archive.tree()));
        entry.version = Some(version.clone());
        let rendered = entry.render();
        let tokens = self.embedder.count_tokens(&rendered)?;
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
        self.store.commit(ops)?;
        Ok(Published {
            created: true,
            version: Loaded { rec, body },
        })
    }
}

fn archive_error(e: skills_sdk::SdkError) -> Error {
    Error::validation(format!("the archive was refused: {e}"))
        .with_details(serde_json::json!({ "code": e.code() }))
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

/// Adds the pointer move (if the current release changes) to `ops`; returns the index change.
pub(crate) fn release_ops(
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
