//! The one resolver of skill versions (DESIGN §6: "select, load, files, MCP tools and resources
//! resolve a name and version through one resolver: a draft never stands in for a release").
//! Every door that shows, loads or acts on `name@version` or a digest asks here: the HTTP
//! routes, the MCP tools, resources and skills extension, the console, the context pack's
//! references (loaded by digest) and every lifecycle step, so select and load cannot disagree.
//!
//! The rules, in order:
//! 1. a version is visible when its scope, ACL, clearance and purpose admit the caller
//!    ([`Principal::can_see`]) and, if it is a draft (any pre-release state), the caller may
//!    see drafts there ([`may_see_draft`]: its author, a reviewer or tester of its scope, an
//!    admin of its scope);
//! 2. a name is answered by the most specific scope that holds a release, else the most
//!    specific scope with a visible version (the select view);
//! 3. `name@version` is served from a version that a release holds ([`holds_version`]) before
//!    any draft: first in the answering scope, then deepest first; a draft is served only when
//!    no visible release holds that `name@version`;
//! 4. a draft may not be published or promoted at a `name@version` that a release visible to
//!    its author holds in another scope: 409 `CONFLICT`, `details.reason =
//!    "version_held_by_release"` ([`check_not_held`]).

use registry_core::asset::{AssetKind, AssetRecord};
use registry_core::principal::Principal;
use registry_core::store::AssetQuery;
use registry_core::{ErrorCode, FieldError, FieldReason, Scope};
use skills_sdk::semver::VersionReq;

use crate::error::{Error, Result};
use crate::lifecycle::{Action, LifecycleState};
use crate::model::{Loaded, ReleaseTarget};
use crate::service::{RELEASE_PREFIX, SkillsService, parse_digest};

/// Whether `l` was released: published, deprecated, or yanked (a yanked version still resolves
/// from a lockfile, so it keeps its `name@version`).
pub fn holds_version(l: &Loaded) -> bool {
    l.body.state.is_released() || l.body.state == LifecycleState::Yanked
}

/// Whether `p` wrote `l`: the same user in the version's tenant (a platform principal for a
/// global version), so that a tenant user who shares a platform user's name is no author.
pub fn is_author(p: &Principal, l: &Loaded) -> bool {
    l.body.author == p.user
        && match &l.rec.meta.scope.tenant {
            None => p.platform,
            Some(t) => *t == p.tenant,
        }
}

/// Who may see a draft: its author, a reviewer or a tester of its scope, an admin of its scope.
pub fn may_see_draft(p: &Principal, l: &Loaded) -> bool {
    let scope = &l.rec.meta.scope;
    is_author(p, l) || p.can_review_in(scope) || p.can_test_in(scope) || p.governs(scope)
}

/// Rule 1: whether the caller may see this version (the visibility rule already held).
pub(crate) fn admits(p: &Principal, l: &Loaded) -> bool {
    holds_version(l) || may_see_draft(p, l)
}

/// Whether a stored skill version (a record already admitted by [`Principal::can_see`]) may be
/// listed to `p`: the same rule 1 as every load, for doors that list names (the console). A
/// body this release cannot read stays listed to whoever governs its scope, so that an admin
/// learns of it (the skills doors answer its name with an internal error until an operator
/// repairs or purges it); nobody else learns of it.
pub fn may_list(p: &Principal, rec: &AssetRecord) -> bool {
    match Loaded::of(rec.clone()) {
        Ok(l) => admits(p, &l),
        Err(_) => registry_core::access::governs(p, &rec.meta),
    }
}

/// Every version of `name` the principal may see, grouped by scope, deepest scope first, each
/// group oldest first.
fn versions_by_scope(s: &SkillsService, p: &Principal, name: &str) -> Result<Vec<Vec<Loaded>>> {
    let mut recs = s.store.find(&AssetQuery {
        kind: Some(AssetKind::SkillVersion),
        tenant: Some(p.tenant.clone()),
        lookup_key: Some(name.to_string()),
        scope_keys: Some(p.visible_scope_keys()),
        heads_only: true,
        ..Default::default()
    })?;
    recs.extend(s.store.find(&AssetQuery {
        kind: Some(AssetKind::SkillVersion),
        lookup_key: Some(name.to_string()),
        scope_keys: Some(vec![Scope::global().key()]),
        heads_only: true,
        ..Default::default()
    })?);
    recs.retain(|r| p.can_see(&r.meta));
    let mut groups: std::collections::BTreeMap<std::cmp::Reverse<usize>, Vec<Loaded>> =
        Default::default();
    for r in recs {
        let depth = r.meta.scope.path_keys().len();
        let l = Loaded::of(r)?;
        if admits(p, &l) {
            groups.entry(std::cmp::Reverse(depth)).or_default().push(l);
        }
    }
    Ok(groups
        .into_values()
        .map(|mut g| {
            g.sort_by_key(Loaded::semver);
            g
        })
        .collect())
}

/// Rule 2: the index of the group that answers for the name.
fn answering(groups: &[Vec<Loaded>]) -> usize {
    groups
        .iter()
        .position(|g| g.iter().any(|l| l.body.state.is_released()))
        .unwrap_or(0)
}

impl SkillsService {
    /// Every version of `name` the principal may see, from the scope that answers for the name: the
    /// most specific one with a released version (a tenant's own release shadows a global skill
    /// of the same name; a tenant's mere draft does not), else the most specific one. Empty: 404.
    pub fn visible_versions(&self, p: &Principal, name: &str) -> Result<Vec<Loaded>> {
        let mut groups = versions_by_scope(self, p, name)?;
        if groups.is_empty() {
            return Err(Error::not_found(format!("no skill {name}")));
        }
        let i = answering(&groups);
        Ok(groups.swap_remove(i))
    }

    /// Rule 3: `name@version` as the caller would select it: every door that loads or shows a
    /// version by name asks this.
    pub fn resolve(&self, p: &Principal, name: &str, version: &str) -> Result<Loaded> {
        let mut groups = versions_by_scope(self, p, name)?;
        if !groups.is_empty() {
            let first = groups.remove(answering(&groups));
            groups.insert(0, first);
        }
        let candidates: Vec<Loaded> = groups
            .into_iter()
            .flatten()
            .filter(|l| l.body.version == version)
            .collect();
        let held = candidates.iter().position(holds_version);
        candidates
            .into_iter()
            .nth(held.unwrap_or(0))
            .ok_or_else(|| Error::not_found(format!("no skill {name}@{version}")))
    }

    /// The current release of `name` as the caller would select it (the release pointer of the
    /// answering scope), loaded. No release: 404.
    pub fn current(&self, p: &Principal, name: &str) -> Result<Loaded> {
        let versions = self.visible_versions(p, name)?;
        let target: ReleaseTarget = self
            .current_release(&versions)?
            .ok_or_else(|| Error::not_found(format!("{name} has no current release")))?;
        versions
            .into_iter()
            .find(|l| l.rec.meta.id == target.version_asset)
            .ok_or_else(|| Error::not_found(format!("{name} has no current release")))
    }

    /// A version by its tree digest: a version that holds a release before a draft, deepest scope
    /// first; a draft only to whoever may see it, and only where no release holds its
    /// `name@version`.
    pub fn resolve_digest(&self, p: &Principal, digest: &str) -> Result<Loaded> {
        let digest = parse_digest(digest)?;
        let recs = self.store.find(&AssetQuery {
            kind: Some(AssetKind::SkillVersion),
            content_hash: Some(digest.trim_start_matches("sha256:").to_string()),
            heads_only: true,
            ..Default::default()
        })?;
        let mut found = vec![];
        for r in recs {
            let is_version = r
                .lookup_key
                .as_deref()
                .is_some_and(|k| !k.starts_with(RELEASE_PREFIX));
            if is_version && p.can_see(&r.meta) {
                let l = Loaded::of(r)?;
                if admits(p, &l) {
                    found.push(l);
                }
            }
        }
        // A draft answers by its digest only where it would answer by its name and version: never
        // as a stand-in for the release that holds them.
        let mut kept = Vec::with_capacity(found.len());
        for l in found {
            if holds_version(&l)
                || self.resolve(p, &l.body.name, &l.body.version)?.rec.meta.id == l.rec.meta.id
            {
                kept.push(l);
            }
        }
        let mut found = kept;
        found.sort_by_key(|l| {
            (
                std::cmp::Reverse(holds_version(l)),
                std::cmp::Reverse(l.rec.meta.scope.path_keys().len()),
            )
        });
        found
            .into_iter()
            .next()
            .ok_or_else(|| Error::not_found(format!("no skill with digest {digest}")))
    }
}

/// The version a lifecycle step acts on. Steps have their own permission checks and serve
/// nothing, so where several scopes hold `name@version` (a draft published before a release
/// it cannot see), a step acts on the one the caller may act on: among the visible versions at
/// `name@version` whose scope the caller may write or review in, answering scope first, then
/// deepest first, the first from which `action` is legal; when none, the one
/// [`SkillsService::resolve`] gives (and the step's own checks refuse it as they would refuse it
/// anywhere). A deletion (`action` `None`) takes only a version the caller wrote or governs, so
/// an author can still remove a draft that a release's `name@version` hides from every load.
pub(crate) fn for_step(
    s: &SkillsService,
    p: &Principal,
    name: &str,
    v: &str,
    action: Option<Action>,
) -> Result<Loaded> {
    let mut groups = versions_by_scope(s, p, name)?;
    if !groups.is_empty() {
        let first = groups.remove(answering(&groups));
        groups.insert(0, first);
    }
    let actionable: Vec<Loaded> = groups
        .into_iter()
        .flatten()
        .filter(|l| {
            let scope = &l.rec.meta.scope;
            l.body.version == v
                && match action {
                    Some(_) => {
                        p.can_write_into(scope) || p.can_review_in(scope) || p.can_test_in(scope)
                    }
                    None => p.can_write_into(scope) && (is_author(p, l) || p.governs(scope)),
                }
        })
        .collect();
    let chosen = match action {
        Some(a) => actionable
            .into_iter()
            .find(|l| l.body.state.actions().contains(&a)),
        None => actionable.into_iter().next(),
    };
    match chosen {
        Some(l) => Ok(l),
        None => s.resolve(p, name, v),
    }
}

/// Re-reads the version under the write lock so a step never acts on a stale image; through
/// the resolver ([`for_step`]).
pub(crate) fn reload(
    s: &SkillsService,
    p: &Principal,
    name: &str,
    version: &str,
    action: Action,
) -> Result<Loaded> {
    for_step(s, p, name, version, Some(action))
}

/// Rule 4: refuses a draft at `name@version` in `scope` when a release the caller may see holds
/// that `name@version` in another scope.
pub(crate) fn check_not_held(
    s: &SkillsService,
    p: &Principal,
    name: &str,
    v: &str,
    scope: &Scope,
) -> Result<()> {
    let holder = versions_by_scope(s, p, name)?
        .into_iter()
        .flatten()
        .find(|l| l.body.version == v && holds_version(l) && l.rec.meta.scope != *scope);
    match holder {
        None => Ok(()),
        Some(l) => Err(Error::new(
            ErrorCode::Conflict,
            format!(
                "{name}@{v} is held by a release in the {} scope; publish another version",
                l.body.scope
            ),
        )
        .with_details(
            FieldError::new("version")
                .reason(FieldReason::VersionHeldByRelease)
                .with(
                    "held_by",
                    serde_json::json!({
                        "scope": l.body.scope, "digest": l.body.digest, "state": l.body.state.as_str(),
                    }),
                ),
        )),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DiscoverView, VersionBody};
    use registry_core::asset::{AssetMeta, SourceKind};
    use registry_core::principal::Role;

    fn version_in(scope: Scope, author: &str, state: LifecycleState) -> Loaded {
        let discover = DiscoverView {
            name: "invoice-tool".into(),
            description: String::new(),
            applicability: vec![],
            risks: vec![],
            version: "1.0.0".into(),
            digest: String::new(),
            scope: String::new(),
            deprecated: false,
            tokens: 0,
        };
        let body = VersionBody {
            name: "invoice-tool".into(),
            version: "1.0.0".into(),
            digest: String::new(),
            archive_sha256: String::new(),
            archive_blob: None,
            archive_size: 0,
            author: author.into(),
            scope: String::new(),
            frontmatter: serde_json::Value::Null,
            manifest: None,
            files: vec![],
            discover,
            state,
            tests: None,
            reviews: vec![],
            deprecation: None,
            yanked_from: None,
            yank_reason: None,
            published_at: None,
            scan: None,
            scan_override: None,
            self_reported: None,
            test_waiver: None,
            blob_digests: vec![],
            observe_flag: None,
        };
        let meta = AssetMeta::new(
            AssetKind::SkillVersion,
            scope,
            author.to_string(),
            SourceKind::UserStatement,
        );
        Loaded {
            rec: AssetRecord {
                meta,
                lookup_key: Some("invoice-tool".into()),
                body: serde_json::Value::Null,
            },
            body,
        }
    }

    fn key(tenant: &str, user: &str, roles: &[Role], platform: bool) -> Principal {
        let mut p = Principal::new(tenant, user);
        p.roles = roles.to_vec();
        p.platform = platform;
        p
    }

    #[test]
    fn an_unreadable_body_is_listed_to_its_scopes_admins_only() {
        let mut rec = version_in(Scope::tenant("acme"), "ann", LifecycleState::Published).rec;
        rec.body = serde_json::json!({"state": 17});
        assert!(Loaded::of(rec.clone()).is_err());
        assert!(may_list(&key("acme", "root", &[Role::Admin], false), &rec));
        assert!(!may_list(&key("acme", "ann", &[Role::Writer], false), &rec));
        assert!(!may_list(&key("acme", "rob", &[Role::Reader], false), &rec));
    }

    #[test]
    fn a_draft_is_seen_by_its_author_reviewers_and_admins_only() {
        let draft = version_in(Scope::tenant("acme"), "ann", LifecycleState::Draft);
        assert!(may_see_draft(
            &key("acme", "ann", &[Role::Writer], false),
            &draft
        ));
        assert!(may_see_draft(
            &key("acme", "rita", &[Role::Reviewer], false),
            &draft
        ));
        assert!(may_see_draft(
            &key("acme", "root", &[Role::Admin], false),
            &draft
        ));
        assert!(!may_see_draft(
            &key("acme", "bob", &[Role::Writer], false),
            &draft
        ));
        assert!(!may_see_draft(
            &key("acme", "rob", &[Role::Reader], false),
            &draft
        ));
        // Another tenant's user of the same name is not its author.
        assert!(!may_see_draft(
            &key("globex", "ann", &[Role::Admin], false),
            &draft
        ));
        // A global draft: a tenant user named like its platform author is not its author.
        let global = version_in(Scope::global(), "ops", LifecycleState::Tested);
        assert!(!may_see_draft(
            &key("acme", "ops", &[Role::Admin], false),
            &global
        ));
        assert!(may_see_draft(
            &key("platform", "ops", &[Role::Writer], true),
            &global
        ));
    }

    #[test]
    fn released_and_yanked_versions_hold_their_name_and_version() {
        use LifecycleState::*;
        for (state, holds) in [
            (Draft, false),
            (Tested, false),
            (Approved, false),
            (Rejected, false),
            (Published, true),
            (Deprecated, true),
            (Yanked, true),
        ] {
            let l = version_in(Scope::global(), "ops", state);
            assert_eq!(holds_version(&l), holds, "{state:?}");
            assert_eq!(
                admits(&key("acme", "rob", &[Role::Reader], false), &l),
                holds,
                "{state:?}"
            );
        }
    }
}
