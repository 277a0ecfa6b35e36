//! One answer to "may this principal do this to this asset", asked by every door (HTTP, MCP,
//! console, CLI, jobs) before it reads, lists, replaces, deletes or erases an asset.
//!
//! The visibility rule of DESIGN §2 ([`Principal::can_see`]) is the floor; on top of it a
//! memory record that is not served (held for review, conflicting, revoked, superseded,
//! expired) is seen only by those who must judge it: its writer, and the reviewers and
//! governors of its scope while it is pending; afterwards its governors, without content.
//! Listing, auditing and drawing the derivation graph show exactly what a read would.

use crate::asset::{AssetKind, AssetMeta, AssetStatus};
use crate::error::{CoreError, CoreResult};
use crate::principal::Principal;
use crate::scope::Scope;

/// What a principal does to an asset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Know that it exists: its id and governance metadata (listings, audit, derivation).
    See,
    /// Read its content.
    Read,
    /// Make a new version of it (a document's re-ingest).
    Replace,
    /// Revoke or delete it.
    Delete,
}

/// How much of an asset a principal may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sight {
    /// Nothing: the asset answers like a missing one.
    None,
    /// Its governance metadata without content (nor the subject and attribute of a fact).
    Metadata,
    /// Everything.
    Full,
}

/// Memory statuses held for a reviewer.
pub const PENDING_MEMORY: [AssetStatus; 3] = [
    AssetStatus::Candidate,
    AssetStatus::Quarantined,
    AssetStatus::ConflictPending,
];

/// How much of the asset `m` the principal `p` may read.
pub fn sight(p: &Principal, m: &AssetMeta) -> Sight {
    if !p.can_see(m) {
        return if answers_for(p, m) {
            Sight::Metadata
        } else {
            Sight::None
        };
    }
    if m.kind != AssetKind::Memory || m.status.is_servable() {
        return Sight::Full;
    }
    let judges = m.owner == p.user || p.can_review_in(&m.scope) || p.governs(&m.scope);
    if PENDING_MEMORY.contains(&m.status) && judges {
        Sight::Full
    } else if p.governs(&m.scope) {
        Sight::Metadata
    } else {
        Sight::None
    }
}

/// Whether `p` answers for an asset its ACL or purposes keep it from reading: the asset is on
/// `p`'s path and within its clearance, and `p` owns or governs it, so it may replace and delete
/// it (a document an admin's ingest pipeline files under `acl: ["group:hr"]`). Such a principal
/// knows the asset exists, without its content, at every door that lists, replaces or deletes.
fn answers_for(p: &Principal, m: &AssetMeta) -> bool {
    p.visible_scope_keys().contains(&m.scope.key())
        && p.cleared_for(&m.scope, m.sensitivity)
        && (owns(p, m) || governs(p, m))
}

/// Whether the principal governs the asset: an admin of its scope (within the key's projects)
/// who is cleared for its sensitivity.
pub fn governs(p: &Principal, m: &AssetMeta) -> bool {
    p.governs(&m.scope) && p.cleared_for(&m.scope, m.sensitivity)
}

/// Whether the principal wrote the asset and may still write where it lives.
pub fn owns(p: &Principal, m: &AssetMeta) -> bool {
    m.owner == p.user && p.can_write_into(&m.scope)
}

/// The answer to "may `p` do `action` to `m`". Replacing and deleting need the asset's owner
/// or whoever governs its scope; the door has already answered "not found" for an asset the
/// principal may not see.
pub fn may(p: &Principal, action: Action, m: &AssetMeta) -> bool {
    match action {
        Action::See => sight(p, m) >= Sight::Metadata,
        Action::Read => sight(p, m) == Sight::Full,
        Action::Replace | Action::Delete => owns(p, m) || governs(p, m),
    }
}

/// As [`may`], as a refusal the door maps to 403.
pub fn require(p: &Principal, action: Action, m: &AssetMeta) -> CoreResult<()> {
    if may(p, action, m) {
        return Ok(());
    }
    let what = match action {
        Action::See | Action::Read => "read",
        Action::Replace => "make a new version of",
        Action::Delete => "delete",
    };
    Err(CoreError::Forbidden(format!(
        "only its owner or an admin of its scope may {what} this {}",
        m.kind.as_str()
    )))
}

/// Who reads a deletion receipt: whoever asked for the deletion, or whoever governs its
/// tenant (for the global scope, the platform).
pub fn may_read_receipt(p: &Principal, r: &crate::deletion::Receipt) -> bool {
    match r.tenant.as_deref() {
        None => p.platform,
        Some(t) => t == p.tenant && (r.actor == p.user || p.is_admin()),
    }
}

/// Whether the key's projects admit `scope` (a tenant-level scope: any key of the tenant).
pub fn within_projects(p: &Principal, scope: &Scope) -> bool {
    scope.project.as_ref().is_none_or(|x| p.member_of(x))
}

/// Whether `p` reads every stored context manifest of its tenant, not only its own. Manifests
/// name no project (one pack draws on several), so only an admin whose key is not bound to some
/// of the tenant's projects does.
pub fn reads_tenant_manifests(p: &Principal) -> bool {
    p.is_admin() && (p.projects.is_empty() || p.member_of(crate::principal::ALL_PROJECTS))
}

/// Whether `p` reads the stored context manifest that `principal` of `tenant` compiled.
pub fn may_read_manifest(p: &Principal, tenant: &str, principal: &str) -> bool {
    tenant == p.tenant && (principal == p.user || reads_tenant_manifests(p))
}

/// Whether erasing `subject` reaches its context manifests: the subject themself, or whoever
/// reads every manifest of the tenant ([`reads_tenant_manifests`]).
pub fn erasure_reaches_manifests(p: &Principal, subject: &str) -> bool {
    p.user == subject || reads_tenant_manifests(p)
}

/// What erasing `subject` does to the asset `m` when `p` asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErasureReach {
    /// The subject's own: purged.
    Purge,
    /// Shared by the subject: kept and re-owned to the tenant.
    Reown,
    /// Another's record about the subject: kept, listed for a governor to review.
    Review,
    /// Beyond the caller's reach, or none of the subject's business: untouched and unlisted.
    Untouched,
}

/// Erasure reaches what the subject owns and what the caller governs, within the caller's
/// projects: the subject's user scopes and the memories it wrote about itself are purged, what
/// else it owns is re-owned, and another's memory about it (`about_subject`) only goes to a
/// governor's review list, never purged by the erasure itself.
pub fn erasure_reach(
    p: &Principal,
    subject: &str,
    m: &AssetMeta,
    about_subject: bool,
) -> ErasureReach {
    if m.scope.tenant.as_deref() != Some(p.tenant.as_str()) || !within_projects(p, &m.scope) {
        return ErasureReach::Untouched;
    }
    let own_data = m.scope.user.as_deref() == Some(subject);
    let owned = m.owner == subject;
    let is_self = p.user == subject;
    // A governor reaches only what it is cleared to read: the plan never lists an id its
    // caller could not read.
    if !((is_self && (own_data || owned)) || governs(p, m)) {
        return ErasureReach::Untouched;
    }
    // A reported skill run is the reporter's own activity record: it goes with them.
    if own_data || (about_subject && owned) || (owned && m.kind == AssetKind::SkillRun) {
        ErasureReach::Purge
    } else if about_subject {
        if governs(p, m) {
            ErasureReach::Review
        } else {
            ErasureReach::Untouched
        }
    } else if owned && m.kind != AssetKind::Chunk {
        // Chunks follow their document: re-owning it re-owns them.
        ErasureReach::Reown
    } else {
        ErasureReach::Untouched
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;
    use crate::asset::{Sensitivity, SourceKind};

    fn memory(scope: Scope, owner: &str, status: AssetStatus) -> AssetMeta {
        let mut m = AssetMeta::new(AssetKind::Memory, scope, owner, SourceKind::UserStatement);
        m.status = status;
        m
    }

    #[test]
    fn held_memories_are_seen_by_their_judges_only() {
        let reader = {
            let mut p = Principal::new("acme", "rita");
            p.roles = vec![Role::Reader];
            p
        };
        let mut admin = Principal::new("acme", "root");
        admin.roles = vec![Role::Admin];
        let held = memory(Scope::tenant("acme"), "ann", AssetStatus::ConflictPending);
        assert_eq!(sight(&reader, &held), Sight::None);
        assert!(!may(&reader, Action::See, &held));
        assert_eq!(sight(&Principal::new("acme", "ann"), &held), Sight::Full);
        assert_eq!(sight(&admin, &held), Sight::Full);
        let revoked = memory(Scope::tenant("acme"), "ann", AssetStatus::Revoked);
        assert_eq!(sight(&Principal::new("acme", "ann"), &revoked), Sight::None);
        assert_eq!(sight(&admin, &revoked), Sight::Metadata);
        let active = memory(Scope::tenant("acme"), "ann", AssetStatus::Active);
        assert!(may(&reader, Action::Read, &active));
    }

    #[test]
    fn a_document_outside_its_acl_is_known_without_content_to_who_answers_for_it() {
        let mut doc = AssetMeta::new(
            AssetKind::Document,
            Scope::tenant("acme"),
            "pipeline",
            SourceKind::Document,
        );
        doc.acl =
            crate::acl::Acl::new(vec![crate::acl::AclEntry::parse("group:hr").unwrap()]).unwrap();
        let role = |user: &str, tenant: &str, r: Role| {
            let mut p = Principal::new(tenant, user);
            p.roles = vec![r];
            p
        };
        let admin = role("root", "acme", Role::Admin);
        let owner = role("pipeline", "acme", Role::Writer);
        // Its owner and its tenant's admins may replace and delete it, so they know it exists,
        // but its ACL still keeps its content from them.
        for p in [&admin, &owner] {
            assert_eq!(sight(p, &doc), Sight::Metadata, "{}", p.user);
            assert!(may(p, Action::See, &doc) && !may(p, Action::Read, &doc));
            assert!(may(p, Action::Replace, &doc) && may(p, Action::Delete, &doc));
        }
        // Anyone else outside the ACL, another tenant's admin, and an admin not cleared for
        // its sensitivity: nothing, as for a missing asset.
        let mut uncleared = admin.clone();
        uncleared.clearance = Sensitivity::Public;
        for p in [
            &role("ann", "acme", Role::Writer),
            &role("root", "globex", Role::Admin),
            &uncleared,
        ] {
            assert_eq!(sight(p, &doc), Sight::None, "{}/{}", p.tenant, p.user);
        }
        let mut hr = role("hana", "acme", Role::Reader);
        hr.groups = vec!["hr".into()];
        assert_eq!(sight(&hr, &doc), Sight::Full);
    }

    #[test]
    fn replacing_and_deleting_need_the_owner_or_a_cleared_governor() {
        let doc = AssetMeta::new(
            AssetKind::Document,
            Scope::tenant("acme"),
            "pipeline",
            SourceKind::Document,
        );
        assert!(!may(&Principal::new("acme", "ann"), Action::Replace, &doc));
        assert!(!may(&Principal::new("acme", "ann"), Action::Delete, &doc));
        assert!(may(
            &Principal::new("acme", "pipeline"),
            Action::Delete,
            &doc
        ));
        let mut admin = Principal::new("acme", "root");
        admin.roles = vec![Role::Admin];
        assert!(may(&admin, Action::Replace, &doc));
        admin.clearance = Sensitivity::Public;
        assert!(!may(&admin, Action::Replace, &doc));
    }

    #[test]
    fn erasure_reaches_the_subjects_own_and_lists_others_for_review() {
        let ann = Principal::new("acme", "ann");
        let mine = memory(
            Scope {
                user: Some("ann".into()),
                ..Scope::tenant("acme")
            },
            "ann",
            AssetStatus::Active,
        );
        let about_me = memory(Scope::tenant("acme"), "bob", AssetStatus::Active);
        assert_eq!(
            erasure_reach(&ann, "ann", &mine, false),
            ErasureReach::Purge
        );
        assert_eq!(
            erasure_reach(&ann, "ann", &about_me, true),
            ErasureReach::Untouched
        );
        let mut admin = Principal::new("acme", "root");
        admin.roles = vec![Role::Admin];
        assert_eq!(
            erasure_reach(&admin, "ann", &about_me, true),
            ErasureReach::Review
        );
        let web = memory(
            Scope {
                project: Some("web".into()),
                user: Some("ann".into()),
                ..Scope::tenant("acme")
            },
            "ann",
            AssetStatus::Active,
        );
        admin.projects = vec!["app".into()];
        assert_eq!(
            erasure_reach(&admin, "ann", &web, false),
            ErasureReach::Untouched
        );
    }
}
