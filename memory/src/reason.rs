//! The gate's vocabulary: what it decided and why, as stable machine-readable codes. Records
//! keep the reasons they were admitted with; the gate and the service produce them.

use serde::{Deserialize, Serialize};

/// What the gate decided.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[schemars(rename = "GateDecision")]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Decision {
    Accepted,
    Merged,
    Superseded,
    Candidate,
    ConflictPending,
    Rejected,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Stable reason codes. Tests and callers match on these, never on the detail text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// Rule 1: the writer may not write into that scope.
    ScopeNotPermitted,
    /// Rule 1: the class does not live at that scope level (working: session/task only).
    ClassScopeMismatch,
    /// Rule 2: the source kind may not be claimed by this writer (system, import: admins).
    SourceNotPermitted,
    /// Rule 2: a model inference never becomes a semantic or procedural memory directly.
    InferenceNotFact,
    /// Rule 2: external content may not become a procedure without review.
    ExternalProcedure,
    /// Rule 3: credentials are never stored.
    SecretDetected,
    /// Rule 3: personal data above the scope's sensitivity ceiling.
    PiiAboveCeiling,
    /// Rule 3: personal data within the ceiling; the record's sensitivity was raised.
    PiiWithinCeiling,
    /// Rule 4: text that tries to override the agent's instructions.
    PromptInjection,
    /// Rule 4: text from an external source that tries to steer future behaviour.
    InstructionLike,
    /// Rule 4: steering aimed at approvals, safety, verification, other users or the agent's
    /// own rules; held for review even from the user (a user's own preference is not).
    SteersControls,
    /// Rule 5: same normalised content in the same scope and class.
    DuplicateContent,
    /// Rule 5: near-duplicate by embedding similarity.
    NearDuplicate,
    /// Rule 6: same subject, attribute and value as an active record.
    SameFact,
    /// Rule 6: replaces an active record of lower or equal trust.
    SupersedesRecord,
    /// Rule 6: conflicts with an active record of higher trust.
    LowerTrustConflict,
    /// Rule 6: conflicts with an active record that is valid from a later time.
    OlderThanExisting,
    /// Rule 6: conflicts with a record a reviewer confirmed; only a reviewer supersedes it.
    ConfirmedRecord,
}

impl ReasonCode {
    pub fn rule(self) -> u8 {
        use ReasonCode::*;
        match self {
            ScopeNotPermitted | ClassScopeMismatch => 1,
            SourceNotPermitted | InferenceNotFact | ExternalProcedure => 2,
            SecretDetected | PiiAboveCeiling | PiiWithinCeiling => 3,
            PromptInjection | InstructionLike | SteersControls => 4,
            DuplicateContent | NearDuplicate => 5,
            SameFact | SupersedesRecord | LowerTrustConflict | OlderThanExisting
            | ConfirmedRecord => 6,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Reason {
    pub code: ReasonCode,
    pub rule: u8,
    pub detail: String,
    /// Kinds of data found (rule 3) or the detector's signals (rule 4), never the text itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// The record this reason refers to (rules 5–6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related: Option<String>,
    /// The request fields the finding is in (rules 3–4), e.g. `content`, `entities`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

impl Reason {
    pub fn new(code: ReasonCode, detail: impl Into<String>) -> Reason {
        Reason {
            code,
            rule: code.rule(),
            detail: detail.into(),
            kinds: vec![],
            related: None,
            fields: vec![],
        }
    }

    pub fn related(mut self, id: impl Into<String>) -> Reason {
        self.related = Some(id.into());
        self
    }
}
