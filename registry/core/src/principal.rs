//! The principal: who is asking, on whose behalf, for what.

use serde::{Deserialize, Serialize};

use crate::acl::Acl;
use crate::scope::Scope;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Admin,
    Writer,
    Reader,
    Reviewer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Writer => "writer",
            Role::Reader => "reader",
            Role::Reviewer => "reviewer",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "admin" => Some(Role::Admin),
            "writer" => Some(Role::Writer),
            "reader" => Some(Role::Reader),
            "reviewer" => Some(Role::Reviewer),
            _ => None,
        }
    }
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
            purpose: None,
            project: None,
            session: None,
            task: None,
        }
    }

    pub fn has_role(&self, role: Role) -> bool {
        self.roles.contains(&role) || self.roles.contains(&Role::Admin)
    }

    pub fn can_write(&self) -> bool {
        self.has_role(Role::Writer)
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

    /// Scope keys the principal can see: its own scope and every ancestor.
    pub fn visible_scope_keys(&self) -> Vec<String> {
        self.scope().path_keys()
    }

    /// ACL keys that name this principal.
    pub fn acl_keys(&self) -> Vec<String> {
        let mut keys = vec!["public".to_string(), format!("user:{}", self.user)];
        keys.extend(self.groups.iter().map(|g| format!("group:{g}")));
        keys.extend(self.roles.iter().map(|r| format!("role:{}", r.as_str())));
        keys
    }

    /// The visibility rule: the asset's scope is on the principal's path and its ACL admits it.
    pub fn can_see(&self, scope: &Scope, acl: &Acl) -> bool {
        self.visible_scope_keys().contains(&scope.key()) && acl.admits(&self.acl_keys())
    }

    /// A principal may write into any scope of its own tenant that is not another user's
    /// (admins may), and never into another tenant; the global scope is for admins only.
    pub fn can_write_into(&self, scope: &Scope) -> bool {
        if !self.can_write() {
            return false;
        }
        match &scope.tenant {
            None => self.has_role(Role::Admin),
            Some(t) if *t != self.tenant => false,
            Some(_) => {
                scope.user.as_ref().is_none_or(|u| *u == self.user) || self.has_role(Role::Admin)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::AclEntry;

    #[test]
    fn visibility_needs_scope_path_and_acl() {
        let mut p = Principal::new("acme", "ann");
        p.groups = vec!["legal".into()];
        let tenant = Scope::tenant("acme");
        let other = Scope::tenant("globex");
        assert!(p.can_see(&tenant, &Acl::public()));
        assert!(!p.can_see(&other, &Acl::public()));
        assert!(p.can_see(&Scope::global(), &Acl::public()));
        let legal = Acl::new(vec![AclEntry::Group("legal".into())]).unwrap();
        let hr = Acl::new(vec![AclEntry::Group("hr".into())]).unwrap();
        assert!(p.can_see(&tenant, &legal));
        assert!(!p.can_see(&tenant, &hr));
        let bobs = Scope {
            user: Some("bob".into()),
            ..Scope::tenant("acme")
        };
        assert!(!p.can_see(&bobs, &Acl::public()));
    }

    #[test]
    fn writes_stay_in_tenant_and_own_user() {
        let p = Principal::new("acme", "ann");
        assert!(p.can_write_into(&Scope::tenant("acme")));
        assert!(!p.can_write_into(&Scope::tenant("globex")));
        assert!(!p.can_write_into(&Scope::global()));
        let bobs = Scope {
            user: Some("bob".into()),
            ..Scope::tenant("acme")
        };
        assert!(!p.can_write_into(&bobs));
        let mut reader = Principal::new("acme", "ann");
        reader.roles = vec![Role::Reader];
        assert!(!reader.can_write_into(&Scope::tenant("acme")));
    }
}
