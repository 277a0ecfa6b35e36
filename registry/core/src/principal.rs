//! The principal: who is asking, on whose behalf, for what.
//!
//! Everything that bounds a principal comes from its API key (tenant, user, groups, roles,
//! projects, purposes, clearance, platform): request headers can only narrow its position inside
//! those bounds (a project it belongs to, a session, a task, a purpose it holds), never widen them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::acl::Acl;
use crate::asset::{AssetMeta, Sensitivity, Trust};
use crate::scope::Scope;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Role {
    Admin,
    Writer,
    Reader,
    Reviewer,
    /// An ingest pipeline: its writes of documents and imports earn verified-fact trust.
    Ingest,
    /// May vote on whether a memory helped (without being a writer).
    Feedback,
    /// Runs a skill version's declared tests and records the results that Test rests on
    /// (never for a version it wrote; never the same user as the version's reviewer).
    Tester,
}

impl Role {
    pub const ALL: [Role; 7] = [
        Role::Admin,
        Role::Writer,
        Role::Reader,
        Role::Reviewer,
        Role::Ingest,
        Role::Feedback,
        Role::Tester,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Role> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// The project membership that stands for every project of the tenant.
pub const ALL_PROJECTS: &str = "*";

/// The purpose grant that stands for every purpose (admin keys).
pub const ALL_PURPOSES: &str = "*";

fn default_clearance() -> Sensitivity {
    Sensitivity::Secret
}

/// A stored API key. Only the sha256 of the secret is kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiKeyRecord {
    pub id: String,
    pub key_hash: String,
    pub tenant: String,
    pub user: String,
    pub groups: Vec<String>,
    pub roles: Vec<Role>,
    /// Issued by the operator for the platform: governs the global scope.
    #[serde(default)]
    pub platform: bool,
    /// Projects of the tenant the key belongs to (`*`: all).
    #[serde(default)]
    pub projects: Vec<String>,
    /// Purposes the key may name in `X-Purpose` (`*`: all); none: no purpose-restricted reads.
    #[serde(default)]
    pub purposes: Vec<String>,
    /// Most sensitive data the key reads.
    pub clearance: Sensitivity,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// An authenticated caller. The tenant and user come from the API key and cannot be chosen by
/// the request; project, session, task and purpose narrow the request's context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub tenant: String,
    pub user: String,
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default)]
    pub roles: Vec<Role>,
    /// A platform principal, issued by the operator's CLI and never by a tenant: the only kind
    /// that writes, moves, reviews or deletes anything in the global scope every tenant reads.
    #[serde(default)]
    pub platform: bool,
    /// Projects of the tenant the key belongs to ([`ALL_PROJECTS`] for every one). A key
    /// without projects has tenant-level access only.
    #[serde(default)]
    pub projects: Vec<String>,
    /// The most sensitive data the key reads (its user's own user-scope memories excepted).
    #[serde(default = "default_clearance")]
    pub clearance: Sensitivity,
    /// Purposes the key may name in `X-Purpose` ([`ALL_PURPOSES`] for every one). A key
    /// without purposes reads no purpose-restricted asset.
    #[serde(default)]
    pub purposes: Vec<String>,
    /// The request's purpose, one of [`Self::purposes`] (checked when the headers are read).
    #[serde(default)]
    pub purpose: Option<String>,
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub session: Option<String>,
    #[serde(default)]
    pub task: Option<String>,
}

impl Principal {
    pub fn new(tenant: impl Into<String>, user: impl Into<String>) -> Self {
        Principal {
            tenant: tenant.into(),
            user: user.into(),
            groups: vec![],
            roles: vec![Role::Writer],
            platform: false,
            projects: vec![],
            clearance: default_clearance(),
            purposes: vec![],
            purpose: None,
            project: None,
            session: None,
            task: None,
        }
    }

    /// The principal of a stored key, before any request narrows it (`X-Project`,
    /// `X-Purpose`). Every door resolves a key through this.
    pub fn of_key(rec: &ApiKeyRecord) -> Self {
        Principal {
            tenant: rec.tenant.clone(),
            user: rec.user.clone(),
            groups: rec.groups.clone(),
            roles: rec.roles.clone(),
            platform: rec.platform,
            projects: rec.projects.clone(),
            purposes: rec.purposes.clone(),
            clearance: rec.clearance,
            purpose: None,
            project: None,
            session: None,
            task: None,
        }
    }

    /// Whether the principal holds `role`; admins hold every role of their tenant.
    pub fn has_role(&self, role: Role) -> bool {
        self.roles.contains(&role) || self.roles.contains(&Role::Admin)
    }

    pub fn is_admin(&self) -> bool {
        self.roles.contains(&Role::Admin)
    }

    pub fn can_write(&self) -> bool {
        self.has_role(Role::Writer)
    }

    /// Whether the key belongs to `project`.
    pub fn member_of(&self, project: &str) -> bool {
        self.projects
            .iter()
            .any(|p| p == project || p == ALL_PROJECTS)
    }

    /// Whether the key may act for `purpose` (name it in `X-Purpose`).
    pub fn holds_purpose(&self, purpose: &str) -> bool {
        self.purposes
            .iter()
            .any(|p| p == purpose || p == ALL_PURPOSES)
    }

    /// Whether the key may restrict an asset it writes to `purposes`: it holds each of them
    /// (a key writes nothing it could not then read for the purpose it names).
    pub fn may_restrict_to(&self, purposes: &[String]) -> bool {
        purposes.iter().all(|p| self.holds_purpose(p))
    }

    /// The principal's own position: tenant / project / user / session / task.
    pub fn scope(&self) -> Scope {
        Scope {
            tenant: Some(self.tenant.clone()),
            project: self.project.clone(),
            user: Some(self.user.clone()),
            session: self.session.clone(),
            task: self.task.clone(),
        }
    }

    /// Scope keys the principal can see: its own scope and every ancestor. The project on
    /// the path is one the key belongs to (checked when the request's headers are read).
    pub fn visible_scope_keys(&self) -> Vec<String> {
        self.scope().path_keys()
    }

    /// Scope keys at or below the principal's own user level: what is the user's own, read
    /// whatever its sensitivity.
    pub fn own_scope_keys(&self) -> Vec<String> {
        let me = self.scope();
        let mut cur = Scope {
            tenant: me.tenant.clone(),
            project: me.project.clone(),
            user: me.user.clone(),
            ..Default::default()
        };
        let mut keys = vec![cur.key()];
        if me.session.is_some() {
            cur.session = me.session.clone();
            keys.push(cur.key());
        }
        if me.task.is_some() {
            cur.task = me.task.clone();
            keys.push(cur.key());
        }
        keys
    }

    /// ACL keys that name this principal.
    pub fn acl_keys(&self) -> Vec<String> {
        let mut keys = vec!["public".to_string(), format!("user:{}", self.user)];
        keys.extend(self.groups.iter().map(|g| format!("group:{g}")));
        keys.extend(self.roles.iter().map(|r| format!("role:{}", r.as_str())));
        keys
    }

    /// The part of the visibility rule that needs no sensitivity or purpose: the scope is on
    /// the principal's path and the ACL admits it.
    pub fn can_see_scope(&self, scope: &Scope, acl: &Acl) -> bool {
        self.visible_scope_keys().contains(&scope.key()) && acl.admits(&self.acl_keys())
    }

    /// Whether a sensitivity level is within the principal's clearance for an asset in
    /// `scope` (the user's own scopes are always readable to the user).
    pub fn cleared_for(&self, scope: &Scope, sensitivity: Sensitivity) -> bool {
        sensitivity <= self.clearance || self.own_scope_keys().contains(&scope.key())
    }

    /// Whether the request's purpose admits an asset restricted to `purposes` (none: any).
    pub fn purpose_admits(&self, purposes: &[String]) -> bool {
        purposes.is_empty()
            || self
                .purpose
                .as_ref()
                .is_some_and(|p| purposes.iter().any(|x| x == p))
    }

    /// The visibility rule (DESIGN §2): the asset's scope is on the principal's path, its ACL
    /// admits the principal, its sensitivity is within the principal's clearance, and where it
    /// names allowed purposes, the request's purpose is one of them.
    pub fn can_see(&self, m: &AssetMeta) -> bool {
        self.can_see_scope(&m.scope, &m.acl)
            && self.cleared_for(&m.scope, m.sensitivity)
            && self.purpose_admits(&m.purposes)
    }

    /// A principal may write into its own tenant (and only into projects it belongs to), not
    /// into another user's scope unless it is an admin, never into another tenant; the global
    /// scope is written by platform principals only.
    pub fn can_write_into(&self, scope: &Scope) -> bool {
        if !self.can_write() {
            return false;
        }
        match &scope.tenant {
            None => self.platform,
            Some(t) if *t != self.tenant => false,
            Some(_) => {
                scope.project.as_ref().is_none_or(|p| self.member_of(p))
                    && (scope.user.as_ref().is_none_or(|u| *u == self.user) || self.is_admin())
            }
        }
    }

    /// Whether the principal governs `scope`: moves lifecycles, reviews and deletes what others
    /// wrote there. Global: platform principals; a tenant scope: the tenant's admins (within
    /// their projects).
    pub fn governs(&self, scope: &Scope) -> bool {
        match &scope.tenant {
            None => self.platform && self.has_role(Role::Admin),
            Some(t) => {
                *t == self.tenant
                    && self.is_admin()
                    && scope.project.as_ref().is_none_or(|p| self.member_of(p))
            }
        }
    }

    /// Whether the principal may review what was written into `scope`: a reviewer of that
    /// tenant (within its projects), or, for the global scope, a platform reviewer.
    pub fn can_review_in(&self, scope: &Scope) -> bool {
        if !self.has_role(Role::Reviewer) {
            return false;
        }
        match &scope.tenant {
            None => self.platform,
            Some(t) => {
                *t == self.tenant && scope.project.as_ref().is_none_or(|p| self.member_of(p))
            }
        }
    }

    /// Whether the principal may test what was written into `scope` (see [`Role::Tester`]): a
    /// tester of that tenant (within its projects), or, for the global scope, a platform tester.
    pub fn can_test_in(&self, scope: &Scope) -> bool {
        if !self.has_role(Role::Tester) {
            return false;
        }
        match &scope.tenant {
            None => self.platform,
            Some(t) => {
                *t == self.tenant && scope.project.as_ref().is_none_or(|p| self.member_of(p))
            }
        }
    }

    /// The highest trust this principal's writes can earn, whatever source they declare:
    /// trust comes from who writes and through which channel, never from the request body.
    pub fn trust_ceiling(&self) -> Trust {
        if self.platform {
            Trust::PlatformRule
        } else if self.is_admin() {
            Trust::AuthoritativeSystem
        } else if self.roles.contains(&Role::Ingest) {
            Trust::VerifiedFact
        } else {
            Trust::UserStatement
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::AclEntry;
    use crate::asset::{AssetKind, SourceKind};

    fn meta(scope: Scope, acl: Acl, sensitivity: Sensitivity) -> AssetMeta {
        let mut m = AssetMeta::new(AssetKind::Memory, scope, "x", SourceKind::UserStatement);
        m.acl = acl;
        m.sensitivity = sensitivity;
        m
    }

    #[test]
    fn visibility_needs_scope_path_and_acl() {
        let mut p = Principal::new("acme", "ann");
        p.groups = vec!["legal".into()];
        let tenant = Scope::tenant("acme");
        let other = Scope::tenant("globex");
        assert!(p.can_see_scope(&tenant, &Acl::public()));
        assert!(!p.can_see_scope(&other, &Acl::public()));
        assert!(p.can_see_scope(&Scope::global(), &Acl::public()));
        let legal = Acl::new(vec![AclEntry::Group("legal".into())]).unwrap();
        let hr = Acl::new(vec![AclEntry::Group("hr".into())]).unwrap();
        assert!(p.can_see_scope(&tenant, &legal));
        assert!(!p.can_see_scope(&tenant, &hr));
        let bobs = Scope {
            user: Some("bob".into()),
            ..Scope::tenant("acme")
        };
        assert!(!p.can_see_scope(&bobs, &Acl::public()));
    }

    #[test]
    fn clearance_and_purpose_filter_what_the_path_admits() {
        let mut p = Principal::new("acme", "ann");
        p.clearance = Sensitivity::Internal;
        let tenant = Scope::tenant("acme");
        let own = Scope {
            user: Some("ann".into()),
            ..Scope::tenant("acme")
        };
        assert!(p.can_see(&meta(tenant.clone(), Acl::public(), Sensitivity::Internal)));
        assert!(!p.can_see(&meta(
            tenant.clone(),
            Acl::public(),
            Sensitivity::Confidential
        )));
        // A user always reads their own user-scope memories.
        assert!(p.can_see(&meta(own, Acl::public(), Sensitivity::Secret)));
        let mut hr_only = meta(tenant, Acl::public(), Sensitivity::Public);
        hr_only.purposes = vec!["hr".into()];
        assert!(!p.can_see(&hr_only));
        p.purpose = Some("support".into());
        assert!(!p.can_see(&hr_only));
        p.purpose = Some("hr".into());
        assert!(p.can_see(&hr_only));
    }

    #[test]
    fn writes_stay_in_tenant_own_user_and_own_projects() {
        let mut p = Principal::new("acme", "ann");
        assert!(p.can_write_into(&Scope::tenant("acme")));
        assert!(!p.can_write_into(&Scope::tenant("globex")));
        assert!(!p.can_write_into(&Scope::global()));
        let bobs = Scope {
            user: Some("bob".into()),
            ..Scope::tenant("acme")
        };
        assert!(!p.can_write_into(&bobs));
        let web = Scope {
            project: Some("web".into()),
            ..Scope::tenant("acme")
        };
        assert!(!p.can_write_into(&web));
        p.projects = vec!["web".into()];
        assert!(p.can_write_into(&web));
        let mut reader = Principal::new("acme", "ann");
        reader.roles = vec![Role::Reader];
        assert!(!reader.can_write_into(&Scope::tenant("acme")));
    }

    #[test]
    fn only_platform_principals_govern_the_global_scope() {
        let mut admin = Principal::new("acme", "root");
        admin.roles = vec![Role::Admin];
        assert!(!admin.can_write_into(&Scope::global()));
        assert!(!admin.governs(&Scope::global()));
        assert!(!admin.can_review_in(&Scope::global()));
        assert!(admin.governs(&Scope::tenant("acme")));
        assert!(!admin.governs(&Scope::tenant("globex")));
        let mut ops = Principal::new("platform", "ops");
        ops.roles = vec![Role::Admin];
        ops.platform = true;
        assert!(ops.can_write_into(&Scope::global()));
        assert!(ops.governs(&Scope::global()));
        assert!(ops.can_review_in(&Scope::global()));
        assert_eq!(ops.trust_ceiling(), Trust::PlatformRule);
        assert_eq!(admin.trust_ceiling(), Trust::AuthoritativeSystem);
        assert_eq!(
            Principal::new("a", "b").trust_ceiling(),
            Trust::UserStatement
        );
    }
}
