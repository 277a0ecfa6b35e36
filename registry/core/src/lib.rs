#![doc = include_str!("../README.md")]

pub mod access;
pub mod acl;
pub mod asset;
pub mod audit;
pub mod cluster;
pub mod deadline;
pub mod deletion;
pub mod derivation;
pub mod error;
pub mod feed;
pub mod hash;
pub mod locks;
pub mod principal;
pub mod retrieval;
pub mod scope;
pub mod store;
pub mod task;
pub mod text;
pub mod time;
pub mod usage;
pub mod verify;
pub mod wire;

pub use acl::{Acl, AclEntry};
pub use asset::{
    AssetId, AssetKind, AssetMeta, AssetRecord, AssetStatus, Sensitivity, SourceKind, Trust,
};
pub use audit::{AuditAction, AuditDraft, AuditEvent};
pub use derivation::{ChildStore, DerivationEdge, Relation};
pub use error::{CoreError, CoreResult, ErrorCode, FieldError, FieldReason};
pub use principal::{Principal, Role};
pub use scope::{Scope, ScopeLevel};

#[cfg(test)]
mod wire_names {
    use crate::asset::{AssetKind, AssetStatus, Sensitivity};
    use crate::derivation::{ChildStore, Relation};
    use crate::error::ErrorCode;
    use crate::feed::{DeliveryStatus, FeedKind};
    use crate::principal::Role;
    use crate::scope::ScopeLevel;
    use crate::task::{EventType, MarkKind};

    /// A variant's stored name (`as_str`, derived by strum) must be its serde name.
    fn names_match_serde<T>()
    where
        T: strum::IntoEnumIterator + serde::Serialize + Into<&'static str> + Copy + std::fmt::Debug,
    {
        for v in T::iter() {
            let name: &'static str = v.into();
            assert_eq!(serde_json::to_value(v).unwrap(), name, "{v:?}");
        }
    }

    #[test]
    fn stored_names_are_the_serde_names() {
        names_match_serde::<AssetKind>();
        names_match_serde::<AssetStatus>();
        names_match_serde::<Sensitivity>();
        names_match_serde::<ChildStore>();
        names_match_serde::<Relation>();
        names_match_serde::<ErrorCode>();
        names_match_serde::<DeliveryStatus>();
        names_match_serde::<FeedKind>();
        names_match_serde::<Role>();
        names_match_serde::<ScopeLevel>();
        names_match_serde::<EventType>();
        names_match_serde::<MarkKind>();
    }
}
