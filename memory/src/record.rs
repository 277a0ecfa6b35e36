//! The memory record: what is stored in an asset's body, the request that creates one, and the
//! views the API returns.

use chrono::{DateTime, Utc};
use registry_core::asset::{AssetId, AssetRecord};
use registry_core::{Scope, ScopeLevel, Sensitivity, SourceKind};
use serde::{Deserialize, Serialize};

use crate::reason::Reason;

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
pub enum MemoryClass {
    /// Facts of the current session or task; expire with a TTL.
    Working,
    /// What happened: past tasks, actions, outcomes, with the conditions at the time.
    Episodic,
    /// Stable facts, preferences, entities.
    Semantic,
    /// Verified methods.
    Procedural,
}

impl MemoryClass {
    pub const ALL: [MemoryClass; 4] = [
        MemoryClass::Working,
        MemoryClass::Episodic,
        MemoryClass::Semantic,
        MemoryClass::Procedural,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn tag(self) -> String {
        format!("class:{}", self.as_str())
    }

    /// Scope levels a class may live at.
    pub fn allows_level(self, level: ScopeLevel) -> bool {
        match self {
            MemoryClass::Working => matches!(level, ScopeLevel::Session | ScopeLevel::Task),
            _ => matches!(
                level,
                ScopeLevel::Tenant | ScopeLevel::Project | ScopeLevel::User
            ),
        }
    }
}

/// Raw daily log entry, or a record the consolidation job built from several.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    Raw,
    Consolidated,
}

/// Where a write lands: a level resolved against the writer's own position, or a full scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ScopeSpec {
    Level(LevelName),
    Explicit(#[serde(deserialize_with = "registry_core::wire::object")] Scope),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LevelName {
    Tenant,
    Project,
    User,
    Session,
    Task,
}

/// The contract's caps on a write's fields, counted in characters
/// ([`registry_core::text::length`]) and published in the document as `maxLength` and
/// `maxItems`: `content`.
pub const MAX_CONTENT_CHARS: usize = 16 * 1024;
/// `subject`, `attribute`, `speaker`, `session_label`.
pub const MAX_FIELD_CHARS: usize = 256;
/// `value`.
pub const MAX_VALUE_CHARS: usize = 2048;
/// Items of `entities`, `applicability` and `evidence` (each list).
pub const MAX_LIST_ITEMS: usize = 64;
/// Characters of one such item.
pub const MAX_ITEM_CHARS: usize = 512;

/// A write request. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteRequest {
    pub class: MemoryClass,
    #[schemars(pattern(registry_core::text::NOT_BLANK), length(max = MAX_CONTENT_CHARS))]
    pub content: String,
    /// Default: `session` for working memory (`task` if only a task is set), `user` otherwise.
    #[serde(default)]
    pub scope: Option<ScopeSpec>,
    #[serde(default = "default_source")]
    pub source: SourceKind,
    #[serde(default)]
    #[schemars(length(max = MAX_FIELD_CHARS))]
    pub subject: Option<String>,
    #[serde(default)]
    #[schemars(length(max = MAX_FIELD_CHARS))]
    pub attribute: Option<String>,
    #[serde(default)]
    #[schemars(length(max = MAX_VALUE_CHARS))]
    pub value: Option<String>,
    #[serde(default)]
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(max = MAX_ITEM_CHARS)))]
    pub entities: Vec<String>,
    /// Conditions under which the memory applies (e.g. `os=linux`).
    #[serde(default)]
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(max = MAX_ITEM_CHARS)))]
    pub applicability: Vec<String>,
    /// References to the evidence (message ids, document ids, URLs). An item naming a
    /// registry asset the writer may read (`task:<id>`, `task:<id>#<seq>` for one of its
    /// events, `artifact:<id>`, or any asset's id) makes the memory cite it: deleting that
    /// asset (an artifact's task) flags the memory in the receipt.
    #[serde(default)]
    #[schemars(length(max = MAX_LIST_ITEMS), inner(length(max = MAX_ITEM_CHARS)))]
    pub evidence: Vec<String>,
    #[serde(default)]
    #[schemars(length(max = MAX_FIELD_CHARS))]
    pub speaker: Option<String>,
    /// When the conversation or event took place (dated multi-session memory).
    #[serde(default)]
    pub session_date: Option<DateTime<Utc>>,
    #[serde(default)]
    #[schemars(length(max = MAX_FIELD_CHARS))]
    pub session_label: Option<String>,
    #[serde(default)]
    pub valid_from: Option<DateTime<Utc>>,
    #[serde(default)]
    pub valid_to: Option<DateTime<Utc>>,
    /// Working memory lifetime in seconds (default one day).
    #[serde(default)]
    pub ttl_secs: Option<u64>,
    /// The sensitivity the writer declares; raised by what the gate finds.
    #[serde(default)]
    pub sensitivity: Option<Sensitivity>,
    /// Purposes the memory may be served for (`X-Purpose`); empty: any.
    #[serde(default)]
    #[schemars(
        length(max = registry_core::asset::MAX_PURPOSES),
        inner(pattern(registry_core::asset::PURPOSE_PATTERN))
    )]
    pub purposes: Vec<String>,
}

fn default_source() -> SourceKind {
    SourceKind::UserStatement
}

impl WriteRequest {
    /// What the contract's document says of a write, checked before anything else (and for
    /// every item of a batch before any is written): the caps on each text, counted in
    /// characters, and on each list (413 for a text over its cap, 422 for the rest), a content
    /// that is not blank, and the purposes' names.
    pub fn check_contract(&self) -> crate::Result<()> {
        use crate::Error;
        let too_large = |field: &'static str, v: Option<&str>, limit: usize| match v
            .and_then(|v| registry_core::text::over(v, limit))
        {
            Some(len) => Err(Error::TooLarge { field, len, limit }),
            None => Ok(()),
        };
        too_large("content", Some(&self.content), MAX_CONTENT_CHARS)?;
        for (field, v) in [
            ("subject", &self.subject),
            ("attribute", &self.attribute),
            ("speaker", &self.speaker),
            ("session_label", &self.session_label),
        ] {
            too_large(field, v.as_deref(), MAX_FIELD_CHARS)?;
        }
        too_large("value", self.value.as_deref(), MAX_VALUE_CHARS)?;
        if registry_core::text::is_blank(&self.content) {
            return Err(Error::invalid("content", "content is empty"));
        }
        for (field, list) in [
            ("entities", &self.entities),
            ("applicability", &self.applicability),
            ("evidence", &self.evidence),
        ] {
            if list.len() > MAX_LIST_ITEMS
                || list
                    .iter()
                    .any(|e| registry_core::text::over(e, MAX_ITEM_CHARS).is_some())
            {
                return Err(Error::invalid(
                    field,
                    format!("at most {MAX_LIST_ITEMS} items of {MAX_ITEM_CHARS} characters"),
                ));
            }
        }
        registry_core::asset::validate_purposes(&self.purposes)?;
        Ok(())
    }

    /// The text the stored record will be embedded by (as [`MemoryBody::embed_text`]).
    pub fn index_text(&self) -> String {
        match &self.speaker {
            Some(s) => format!("{s}: {}", self.content),
            None => self.content.clone(),
        }
    }

    /// Every free-text field by name, as the gate screens them.
    pub fn text_fields(&self) -> Vec<(&'static str, &str)> {
        let mut out = vec![("content", self.content.as_str())];
        for (name, v) in [
            ("subject", &self.subject),
            ("attribute", &self.attribute),
            ("value", &self.value),
            ("speaker", &self.speaker),
            ("session_label", &self.session_label),
        ] {
            if let Some(v) = v {
                out.push((name, v.as_str()));
            }
        }
        for (name, list) in [
            ("entities", &self.entities),
            ("applicability", &self.applicability),
            ("evidence", &self.evidence),
        ] {
            out.extend(list.iter().map(|v| (name, v.as_str())));
        }
        out
    }
}

/// A write the gate merged into an existing record: kept on the record's next version, so
/// nothing of it is lost (its evidence and source, and its wording when it differs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergedWrite {
    pub at: DateTime<Utc>,
    pub by: String,
    pub source: SourceKind,
    #[serde(default)]
    pub evidence: Vec<String>,
    /// sha256 of the newcomer's normalised content.
    pub content_hash: String,
    /// The newcomer's content, when its normalised form differs from the record's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// The body stored in a memory asset. Immutable per version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryBody {
    pub class: MemoryClass,
    pub content: String,
    pub layer: Layer,
    /// Day of the raw log this entry belongs to (`YYYY-MM-DD`, UTC).
    pub log_day: String,
    #[serde(default)]
    pub subject: Option<String>,
    #[serde(default)]
    pub attribute: Option<String>,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub entities: Vec<String>,
    #[serde(default)]
    pub applicability: Vec<String>,
    #[serde(default)]
    pub evidence: Vec<String>,
    #[serde(default)]
    pub speaker: Option<String>,
    #[serde(default)]
    pub session_date: Option<DateTime<Utc>>,
    #[serde(default)]
    pub session_label: Option<String>,
    /// The gate's reasons when this version was written.
    #[serde(default)]
    pub gate: Vec<Reason>,
    #[serde(default)]
    pub supersedes: Option<AssetId>,
    #[serde(default)]
    pub conflicts_with: Option<AssetId>,
    #[serde(default)]
    pub consolidated_from: Vec<AssetId>,
    /// Writes merged into this record, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<MergedWrite>,
}

impl MemoryBody {
    pub fn from_record(r: &AssetRecord) -> Option<MemoryBody> {
        // Read from the stored value in place: no deep copy of it first.
        MemoryBody::deserialize(&r.body).ok()
    }

    /// The text that is embedded: the speaker and the content.
    pub fn embed_text(&self) -> String {
        let mut t = self.content.clone();
        if let Some(s) = &self.speaker {
            t = format!("{s}: {t}");
        }
        t
    }

    /// The text that is indexed for lexical search: the embedded text and the wording of
    /// every write merged into the record, so a search in the newcomer's words finds it.
    pub fn index_text(&self) -> String {
        let mut t = self.embed_text();
        for m in &self.merged {
            if let Some(c) = &m.content {
                t.push('\n');
                t.push_str(c);
            }
        }
        t
    }
}

/// Usage counters of a memory (the core's; kept beside the immutable versions).
pub use registry_core::usage::UsageStats as MemoryStats;

/// A memory as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct MemoryView {
    pub id: AssetId,
    pub version: u32,
    pub status: String,
    pub class: MemoryClass,
    pub content: String,
    pub scope: String,
    pub owner: String,
    pub source: SourceKind,
    pub trust: registry_core::Trust,
    pub sensitivity: Sensitivity,
    pub layer: Layer,
    pub subject: Option<String>,
    pub attribute: Option<String>,
    pub value: Option<String>,
    pub entities: Vec<String>,
    pub applicability: Vec<String>,
    pub evidence: Vec<String>,
    pub speaker: Option<String>,
    pub session_date: Option<DateTime<Utc>>,
    pub session_label: Option<String>,
    pub created_at: DateTime<Utc>,
    pub valid_from: Option<DateTime<Utc>>,
    pub valid_to: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub content_hash: String,
    pub gate: Vec<Reason>,
    pub supersedes: Option<AssetId>,
    pub conflicts_with: Option<AssetId>,
    pub consolidated_from: Vec<AssetId>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<MergedWrite>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub purposes: Vec<String>,
    pub stats: MemoryStats,
}

impl MemoryView {
    pub fn of(r: &AssetRecord, stats: MemoryStats) -> Option<MemoryView> {
        let b = MemoryBody::from_record(r)?;
        let m = &r.meta;
        Some(MemoryView {
            id: m.id.clone(),
            version: m.version,
            status: m.status.as_str().to_string(),
            class: b.class,
            content: b.content,
            scope: m.scope.key(),
            owner: m.owner.clone(),
            source: m.source,
            trust: m.trust,
            sensitivity: m.sensitivity,
            layer: b.layer,
            subject: b.subject,
            attribute: b.attribute,
            value: b.value,
            entities: b.entities,
            applicability: b.applicability,
            evidence: b.evidence,
            speaker: b.speaker,
            session_date: b.session_date,
            session_label: b.session_label,
            created_at: m.created_at,
            valid_from: m.valid_from,
            valid_to: m.valid_to,
            expires_at: m.expires_at,
            content_hash: m.content_hash.clone(),
            gate: b.gate,
            supersedes: b.supersedes,
            conflicts_with: b.conflicts_with,
            consolidated_from: b.consolidated_from,
            merged: b.merged,
            purposes: m.purposes.clone(),
            stats,
        })
    }

    /// The governance view of a record whose content may not be shown: everything but the
    /// text of the content, its fields and merged writes (their hashes stay).
    pub fn redacted(mut self) -> MemoryView {
        self.content = String::new();
        self.value = None;
        self.subject = None;
        self.attribute = None;
        self.entities = vec![];
        self.applicability = vec![];
        self.evidence = vec![];
        self.speaker = None;
        self.session_label = None;
        for m in &mut self.merged {
            m.content = None;
            m.evidence = vec![];
        }
        self
    }
}

/// Case- and whitespace-folded text: the dedupe hash is taken over this.
pub fn normalise(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Lookup key for facts: records with the same subject and attribute share it.
pub fn fact_key(subject: &str, attribute: &str) -> String {
    format!("sa:{}|{}", normalise(subject), normalise(attribute))
}
