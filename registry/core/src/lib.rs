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
pub mod usage;
pub mod wire;

pub use acl::{Acl, AclEntry};
pub use asset::{
    AssetId, AssetKind, AssetMeta, AssetRecord, AssetStatus, Sensitivity, SourceKind, Trust,
};
pub use audit::{AuditAction, AuditDraft, AuditEvent};
pub use derivation::{ChildStore, DerivationEdge, Relation};
pub use error::{CoreError, CoreResult, ErrorCode, FieldError};
pub use principal::{Principal, Role};
pub use scope::{Scope, ScopeLevel};
