//! Scopes: Global ⊃ Tenant ⊃ Project ⊃ User ⊃ Session ⊃ Task.
//!
//! A scope is a path of named levels. Levels below the tenant are optional (a user scope need
//! not sit inside a project), but the path is always ordered. Each scope has one canonical
//! *key*; a principal sees an asset only if the asset's scope key is one of the keys on the
//! principal's own path. Every store and index keeps the scope key beside each entry, so the
//! filter is a set-membership test applied before any ranking.

use serde::{Deserialize, Serialize};

use crate::error::{CoreError, CoreResult, FieldError};

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ScopeLevel {
    Global,
    Tenant,
    Project,
    User,
    Session,
    Task,
}

impl ScopeLevel {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A position in the scope tree. `tenant` is `None` only for the global scope.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

/// Characters allowed in a scope component: they must never collide with the key separators.
fn valid_component(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
}

impl Scope {
    pub fn global() -> Self {
        Scope::default()
    }

    pub fn tenant(t: impl Into<String>) -> Self {
        Scope {
            tenant: Some(t.into()),
            ..Default::default()
        }
    }

    /// The deepest level present.
    pub fn level(&self) -> ScopeLevel {
        if self.task.is_some() {
            ScopeLevel::Task
        } else if self.session.is_some() {
            ScopeLevel::Session
        } else if self.user.is_some() {
            ScopeLevel::User
        } else if self.project.is_some() {
            ScopeLevel::Project
        } else if self.tenant.is_some() {
            ScopeLevel::Tenant
        } else {
            ScopeLevel::Global
        }
    }

    fn parts(&self) -> [(&'static str, Option<&String>); 5] {
        [
            ("t", self.tenant.as_ref()),
            ("p", self.project.as_ref()),
            ("u", self.user.as_ref()),
            ("s", self.session.as_ref()),
            ("k", self.task.as_ref()),
        ]
    }

    /// Checks that components are well formed and that nothing sits below a missing tenant.
    pub fn validate(&self) -> CoreResult<()> {
        if self.tenant.is_none() && self.level() != ScopeLevel::Global {
            return Err(CoreError::validation(
                "a scope below global must name its tenant",
            ));
        }
        for (name, v) in self.parts() {
            if let Some(v) = v
                && !valid_component(v)
            {
                return Err(CoreError::validation_with(
                    format!("scope component {name}={v:?} must be 1-128 chars of [A-Za-z0-9._@-]"),
                    FieldError::new("scope").with("component", name),
                ));
            }
        }
        Ok(())
    }

    /// Canonical key, e.g. `global`, `t:acme`, `t:acme/p:web/u:ann`.
    pub fn key(&self) -> String {
        let mut out = String::new();
        for (name, v) in self.parts() {
            if let Some(v) = v {
                if !out.is_empty() {
                    out.push('/');
                }
                out.push_str(name);
                out.push(':');
                out.push_str(v);
            }
        }
        if out.is_empty() {
            "global".to_string()
        } else {
            out
        }
    }

    /// Keys of this scope and every ancestor, from global down to this one.
    pub fn path_keys(&self) -> Vec<String> {
        let mut keys = vec!["global".to_string()];
        let mut cur = Scope::default();
        for (name, v) in self.parts() {
            if let Some(v) = v {
                match name {
                    "t" => cur.tenant = Some(v.clone()),
                    "p" => cur.project = Some(v.clone()),
                    "u" => cur.user = Some(v.clone()),
                    "s" => cur.session = Some(v.clone()),
                    _ => cur.task = Some(v.clone()),
                }
                keys.push(cur.key());
            }
        }
        keys
    }

    /// True if `self` is `other` or one of its ancestors.
    pub fn contains(&self, other: &Scope) -> bool {
        other.path_keys().contains(&self.key())
    }

    /// Number of levels between this scope and a descendant (0 for the same scope).
    pub fn distance_to(&self, descendant: &Scope) -> Option<usize> {
        let path = descendant.path_keys();
        let key = self.key();
        path.iter()
            .position(|k| *k == key)
            .map(|i| path.len() - 1 - i)
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: &str, p: Option<&str>, u: Option<&str>) -> Scope {
        Scope {
            tenant: Some(t.into()),
            project: p.map(Into::into),
            user: u.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn keys_and_paths() {
        let sc = s("acme", Some("web"), Some("ann"));
        assert_eq!(sc.key(), "t:acme/p:web/u:ann");
        assert_eq!(
            sc.path_keys(),
            vec!["global", "t:acme", "t:acme/p:web", "t:acme/p:web/u:ann"]
        );
        assert_eq!(Scope::global().key(), "global");
        assert_eq!(sc.level(), ScopeLevel::User);
    }

    #[test]
    fn containment_is_by_path_not_prefix_text() {
        let a = s("acme", None, None);
        let b = s("acme2", None, None);
        assert!(!a.contains(&b));
        assert!(a.contains(&s("acme", Some("x"), None)));
        assert!(Scope::global().contains(&b));
        assert_eq!(a.distance_to(&s("acme", Some("x"), Some("u"))), Some(2));
        assert_eq!(b.distance_to(&a), None);
    }

    #[test]
    fn validation_rejects_separators_and_orphans() {
        assert!(s("a/b", None, None).validate().is_err());
        assert!(s("a:b", None, None).validate().is_err());
        let orphan = Scope {
            user: Some("u".into()),
            ..Default::default()
        };
        assert!(orphan.validate().is_err());
        assert!(s("acme", Some("web"), Some("ann@x.io")).validate().is_ok());
    }
}
