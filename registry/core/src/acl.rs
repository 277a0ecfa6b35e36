//! Access control lists. An ACL is a set of entries; a principal is admitted if any entry names
//! it. Entries are flattened into string keys (`public`, `user:ann`, `group:legal`,
//! `role:reviewer`) that every index stores beside the entry, so admission is a set test.

use serde::{Deserialize, Serialize};

use crate::error::{CoreError, CoreResult, FieldError};

#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AclEntry {
    /// Anyone who can see the asset's scope.
    Public,
    User(String),
    Group(String),
    Role(String),
}

impl AclEntry {
    pub fn key(&self) -> String {
        match self {
            AclEntry::Public => "public".into(),
            AclEntry::User(u) => format!("user:{u}"),
            AclEntry::Group(g) => format!("group:{g}"),
            AclEntry::Role(r) => format!("role:{r}"),
        }
    }

    /// Parses the key form (`public`, `user:x`, `group:x`, `role:x`).
    pub fn parse(s: &str) -> CoreResult<Self> {
        let bad = || CoreError::validation(format!("unknown ACL entry {s:?}"));
        if s == "public" {
            return Ok(AclEntry::Public);
        }
        let (kind, name) = s.split_once(':').ok_or_else(bad)?;
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(bad());
        }
        match kind {
            "user" => Ok(AclEntry::User(name.into())),
            "group" => Ok(AclEntry::Group(name.into())),
            "role" => Ok(AclEntry::Role(name.into())),
            _ => Err(bad()),
        }
    }
}

/// A non-empty set of entries. An ACL that names nobody is invalid: it would make an asset no
/// one could read, which is a deletion in disguise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "Vec<String>", into = "Vec<String>")]
pub struct Acl(Vec<AclEntry>);

impl Acl {
    pub fn public() -> Self {
        Acl(vec![AclEntry::Public])
    }

    pub fn new(entries: Vec<AclEntry>) -> CoreResult<Self> {
        if entries.is_empty() {
            return Err(CoreError::validation_with(
                "ACL names nobody",
                FieldError::new("acl").with("rule", "non_empty"),
            ));
        }
        let mut e = entries;
        e.sort();
        e.dedup();
        Ok(Acl(e))
    }

    pub fn entries(&self) -> &[AclEntry] {
        &self.0
    }

    pub fn keys(&self) -> Vec<String> {
        self.0.iter().map(AclEntry::key).collect()
    }

    pub fn is_public(&self) -> bool {
        self.0.contains(&AclEntry::Public)
    }

    /// True if any of the principal's keys is on this ACL.
    pub fn admits(&self, principal_keys: &[String]) -> bool {
        self.0.iter().any(|e| principal_keys.contains(&e.key()))
    }
}

impl Default for Acl {
    fn default() -> Self {
        Acl::public()
    }
}

impl TryFrom<Vec<String>> for Acl {
    type Error = CoreError;
    fn try_from(v: Vec<String>) -> CoreResult<Self> {
        Acl::new(
            v.iter()
                .map(|s| AclEntry::parse(s))
                .collect::<CoreResult<_>>()?,
        )
    }
}

impl From<Acl> for Vec<String> {
    fn from(a: Acl) -> Self {
        a.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_roundtrip_and_admission() {
        let acl: Acl = serde_json::from_str(r#"["group:legal","user:ann"]"#).unwrap();
        assert!(acl.admits(&["public".into(), "group:legal".into()]));
        assert!(!acl.admits(&["public".into(), "user:bob".into()]));
        assert_eq!(
            serde_json::to_string(&acl).unwrap(),
            r#"["user:ann","group:legal"]"#
        );
        assert!(serde_json::from_str::<Acl>("[]").is_err());
        assert!(serde_json::from_str::<Acl>(r#"["admin"]"#).is_err());
    }
}
