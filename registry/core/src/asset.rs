//! The governed asset: the metadata every memory record, document, chunk, skill version and
//! summary carries (DESIGN §2), and the stored record that pairs it with its body.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::acl::Acl;
use crate::error::{CoreError, CoreResult, FieldError, FieldReason};
use crate::scope::Scope;

/// Stable asset id: a UUIDv7 string, never reused.
pub type AssetId = String;

pub fn new_asset_id() -> AssetId {
    uuid::Uuid::now_v7().to_string()
}

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
    schemars::JsonSchema,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum AssetKind {
    Memory,
    Document,
    Chunk,
    SkillVersion,
    Summary,
    /// A run of a skill version a harness reported (Observe): scoped, purged with its version.
    SkillRun,
    /// A harness's long-running task: its goal and status; its event log, artifacts and
    /// summaries live beside it (`crate::task`) and go with it.
    Task,
}

impl AssetKind {
    pub const ALL: [AssetKind; 7] = [
        AssetKind::Memory,
        AssetKind::Document,
        AssetKind::Chunk,
        AssetKind::SkillVersion,
        AssetKind::Summary,
        AssetKind::SkillRun,
        AssetKind::Task,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Where an asset came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    UserStatement,
    ToolResult,
    Document,
    ModelInference,
    System,
    Import,
    Web,
}

impl SourceKind {
    /// The trust a source earns by default.
    pub fn default_trust(self) -> Trust {
        match self {
            SourceKind::System => Trust::AuthoritativeSystem,
            SourceKind::Document | SourceKind::Import => Trust::VerifiedFact,
            SourceKind::UserStatement => Trust::UserStatement,
            SourceKind::ModelInference => Trust::ModelInference,
            SourceKind::ToolResult | SourceKind::Web => Trust::ExternalContent,
        }
    }

    /// Sources whose text may carry someone else's instructions.
    pub fn is_external(self) -> bool {
        matches!(
            self,
            SourceKind::ToolResult | SourceKind::Document | SourceKind::Web | SourceKind::Import
        )
    }
}

/// Trust, ordered: a higher value outranks a lower one.
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
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    ExternalContent = 0,
    ModelInference = 1,
    UserStatement = 2,
    VerifiedFact = 3,
    AuthoritativeSystem = 4,
    PlatformRule = 5,
}

/// Sensitivity, ordered from least to most sensitive.
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
    schemars::JsonSchema,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Sensitivity {
    Public,
    Internal,
    Confidential,
    Secret,
}

impl Sensitivity {
    pub const ALL: [Sensitivity; 4] = [
        Sensitivity::Public,
        Sensitivity::Internal,
        Sensitivity::Confidential,
        Sensitivity::Secret,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

/// Lifecycle status. Content is immutable per version; status is governance state.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum AssetStatus {
    Draft,
    Active,
    Candidate,
    Quarantined,
    ConflictPending,
    Confirmed,
    Superseded,
    Deprecated,
    Yanked,
    Revoked,
    Expired,
}

impl AssetStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        use AssetStatus::*;
        [
            Draft,
            Active,
            Candidate,
            Quarantined,
            ConflictPending,
            Confirmed,
            Superseded,
            Deprecated,
            Yanked,
            Revoked,
            Expired,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }

    /// Statuses whose content may be served in search results and context.
    pub fn is_servable(self) -> bool {
        matches!(
            self,
            AssetStatus::Active | AssetStatus::Confirmed | AssetStatus::Deprecated
        )
    }
}

/// Governance metadata carried by every asset (DESIGN §2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AssetMeta {
    pub id: AssetId,
    pub kind: AssetKind,
    pub scope: Scope,
    pub owner: String,
    pub source: SourceKind,
    pub trust: Trust,
    pub sensitivity: Sensitivity,
    pub acl: Acl,
    pub version: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub valid_from: Option<DateTime<Utc>>,
    pub valid_to: Option<DateTime<Utc>>,
    /// Until when the asset may be served (knowledge: its expiry; working memory: its TTL).
    /// Past it the asset is out of answers; it is not deleted for that.
    pub expires_at: Option<DateTime<Utc>>,
    /// Retention: after this time the retention job purges the asset. Independent of
    /// `expires_at`: a document no longer current is kept, out of answers, until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain_until: Option<DateTime<Utc>>,
    pub content_hash: String,
    pub status: AssetStatus,
    #[serde(default)]
    pub parents: Vec<AssetId>,
    /// Purposes the asset may be served for; empty: any. A request names its purpose in
    /// `X-Purpose`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub purposes: Vec<String>,
}

impl AssetMeta {
    /// A first version with sensible defaults; callers fill in the rest.
    pub fn new(
        kind: AssetKind,
        scope: Scope,
        owner: impl Into<String>,
        source: SourceKind,
    ) -> Self {
        let now = Utc::now();
        AssetMeta {
            id: new_asset_id(),
            kind,
            scope,
            owner: owner.into(),
            source,
            trust: source.default_trust(),
            sensitivity: Sensitivity::Internal,
            acl: Acl::public(),
            version: 1,
            created_at: now,
            updated_at: now,
            valid_from: None,
            valid_to: None,
            expires_at: None,
            retain_until: None,
            content_hash: String::new(),
            status: AssetStatus::Active,
            parents: vec![],
            purposes: vec![],
        }
    }

    pub fn validate(&self) -> CoreResult<()> {
        self.scope.validate()?;
        if let (Some(a), Some(b)) = (self.valid_from, self.valid_to)
            && b < a
        {
            return Err(CoreError::validation("valid_to is before valid_from"));
        }
        if self.owner.is_empty() {
            return Err(CoreError::validation("owner is empty"));
        }
        validate_purposes(&self.purposes)?;
        Ok(())
    }

    /// Whether the asset is valid in the world at `t` (valid time, not retention).
    pub fn valid_at(&self, t: DateTime<Utc>) -> bool {
        self.valid_from.is_none_or(|f| f <= t) && self.valid_to.is_none_or(|to| t < to)
    }

    pub fn is_expired_at(&self, t: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|e| e <= t)
    }
}

/// Most purposes one asset may name.
pub const MAX_PURPOSES: usize = 16;

/// The JSON Schema pattern of one purpose, as [`validate_purposes`] checks it.
pub const PURPOSE_PATTERN: &str = "^[a-z0-9_.-]{1,64}$";

/// Purposes are short names (`support`, `hr`, `billing`): 1-64 chars of `[a-z0-9_.-]`
/// ([`PURPOSE_PATTERN`]), at most [`MAX_PURPOSES`].
pub fn validate_purposes(purposes: &[String]) -> CoreResult<()> {
    let ok = |p: &String| {
        (1..=64).contains(&p.len())
            && p.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.')
            })
    };
    if purposes.len() > MAX_PURPOSES || !purposes.iter().all(ok) {
        return Err(CoreError::validation_with(
            format!("purposes: at most {MAX_PURPOSES} names of 1-64 chars of [a-z0-9_.-]"),
            FieldError::new("purposes").reason(FieldReason::Invalid),
        ));
    }
    Ok(())
}

/// A stored version: metadata plus the kind-specific body (JSON) and an optional lookup key
/// that the owning domain uses to find related records (memory: subject/attribute; document:
/// source id; skill: name). `(meta.id, meta.version)` is unique and the body never changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AssetRecord {
    pub meta: AssetMeta,
    pub lookup_key: Option<String>,
    pub body: serde_json::Value,
}

impl AssetRecord {
    /// This record's place in [`crate::store::AssetQuery`]'s order (created_at, id, version):
    /// the `after` of the next page when it is the last of one.
    pub fn position(&self) -> (DateTime<Utc>, AssetId, u32) {
        (
            self.meta.created_at,
            self.meta.id.clone(),
            self.meta.version,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_and_sensitivity_order() {
        assert!(Trust::PlatformRule > Trust::AuthoritativeSystem);
        assert!(Trust::UserStatement > Trust::ModelInference);
        assert!(Sensitivity::Secret > Sensitivity::Confidential);
        assert_eq!(
            SourceKind::ModelInference.default_trust(),
            Trust::ModelInference
        );
    }

    #[test]
    fn valid_time() {
        let mut m = AssetMeta::new(
            AssetKind::Memory,
            Scope::tenant("a"),
            "u",
            SourceKind::System,
        );
        let now = Utc::now();
        m.valid_from = Some(now);
        assert!(m.valid_at(now));
        assert!(!m.valid_at(now - chrono::Duration::seconds(1)));
        m.valid_to = Some(now - chrono::Duration::seconds(5));
        assert!(m.validate().is_err());
    }
}
