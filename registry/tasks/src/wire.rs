//! The working layer's wire types: what crosses HTTP and MCP (the OpenAPI bodies and the MCP
//! tool schemas are derived from these).

use chrono::{DateTime, Utc};
use registry_core::Sensitivity;
use registry_core::task::{EventType, TaskEvent};
use serde::{Deserialize, Serialize};

use crate::limits::*;

/// Where a task stands.
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
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum TaskStatus {
    Open,
    Paused,
    Done,
    Failed,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Done or failed: the task's retention (`retention.task_days`) runs from then.
    pub fn is_closed(self) -> bool {
        matches!(self, TaskStatus::Done | TaskStatus::Failed)
    }
}

/// `POST /v1/tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTask {
    /// What the task is for (at most 4,096 bytes).
    #[schemars(pattern(registry_core::text::NOT_BLANK), length(max = MAX_GOAL_CHARS))]
    pub goal: String,
    /// When it is done (at most 4,096 bytes).
    #[serde(default)]
    #[schemars(length(max = MAX_GOAL_CHARS))]
    pub acceptance: Option<String>,
    /// The request's project (`X-Project`, under which the task is read); when given, it must
    /// be that one (422 otherwise).
    #[serde(default)]
    pub project: Option<String>,
    /// The request's session (`X-Session`, under which the task is read); when given, it must
    /// be that one (422 otherwise).
    #[serde(default)]
    pub session: Option<String>,
    /// Default `internal`.
    #[serde(default)]
    pub sensitivity: Option<Sensitivity>,
}

/// `PATCH /v1/tasks/{id}`: a new version of the task, made only from `version` (the head the
/// caller read; another answers 409 `CONFLICT`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateTask {
    #[schemars(range(min = 1, max = 4_294_967_295u32))]
    pub version: u32,
    #[serde(default)]
    pub status: Option<TaskStatus>,
    /// What to do next (at most 4,096 bytes); the Continuation Package carries it.
    #[serde(default)]
    #[schemars(length(max = MAX_GOAL_CHARS))]
    pub next_step: Option<String>,
}

/// The body stored in a task asset (immutable per version).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskBody {
    pub goal: String,
    #[serde(default)]
    pub acceptance: Option<String>,
    pub status: TaskStatus,
    #[serde(default)]
    pub next_step: Option<String>,
    /// When the status last became done or failed.
    #[serde(default)]
    pub closed_at: Option<DateTime<Utc>>,
}

/// A task as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskView {
    pub id: String,
    pub version: u32,
    pub status: TaskStatus,
    pub goal: String,
    pub acceptance: Option<String>,
    pub next_step: Option<String>,
    pub scope: String,
    pub owner: String,
    pub sensitivity: Sensitivity,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub closed_at: Option<DateTime<Utc>>,
    /// The sequence number of the last event (0: none).
    pub last_seq: u64,
    pub content_hash: String,
}

/// A page of the caller's tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskList {
    pub tasks: Vec<TaskView>,
}

/// One event to append.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventInput {
    /// The client's id for the event (1-128 characters, no control characters): appending it
    /// again answers the stored event.
    #[schemars(pattern(registry_core::text::LINE), length(max = MAX_ID_CHARS))]
    pub id: String,
    #[serde(rename = "type")]
    pub kind: EventType,
    /// Who acted (1-128 characters).
    #[schemars(pattern(registry_core::text::LINE), length(max = MAX_ID_CHARS))]
    pub actor: String,
    /// At most 16,384 bytes, without NUL; large results go to an artifact.
    #[schemars(pattern(registry_core::text::NO_NUL), length(max = MAX_EVENT_CHARS))]
    pub content: String,
    /// An artifact of this task the event refers to.
    #[serde(default)]
    #[schemars(pattern(registry_core::text::NO_NUL))]
    pub artifact: Option<String>,
    /// The client id of the event this one follows from (a `resolved_item` names its
    /// `open_item`).
    #[serde(default)]
    #[schemars(pattern(registry_core::text::NO_NUL), length(max = MAX_ID_CHARS))]
    pub caused_by: Option<String>,
}

/// `POST /v1/tasks/{id}/events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendEvents {
    /// 1-100 events, appended in order.
    #[schemars(length(min = 1, max = MAX_EVENTS_PER_APPEND))]
    #[serde(deserialize_with = "registry_core::wire::objects")]
    pub events: Vec<EventInput>,
}

/// What an append did to one event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AppendedEvent {
    pub id: String,
    pub seq: u64,
    /// The id was appended before: this is the stored event's sequence number.
    pub duplicate: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AppendOutcome {
    pub events: Vec<AppendedEvent>,
    pub appended: usize,
    pub duplicates: usize,
    pub last_seq: u64,
}

/// `GET /v1/tasks/{id}/events`: events after `after`, in sequence order; `next` is the `after`
/// of the next page, absent on the last one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EventPage {
    pub events: Vec<TaskEvent>,
    pub next: Option<u64>,
}

/// An artifact's metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArtifactView {
    pub id: String,
    pub task: String,
    pub name: String,
    /// `sha256:<hex>` of the bytes.
    pub digest: String,
    pub size: u64,
    pub lines: u64,
    pub media_type: String,
    pub summary: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArtifactList {
    pub artifacts: Vec<ArtifactView>,
}

/// The largest sequence number a request may name: 2^53 − 1, the largest integer every JSON
/// reader holds exactly (the stores keep sequence numbers as i64).
pub const MAX_SEQ: u64 = (1 << 53) - 1;

/// A range of an artifact: bytes `offset .. offset + length`, or lines `line ..` (from 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RangeRequest {
    #[serde(default)]
    pub offset: Option<u64>,
    #[serde(default)]
    pub length: Option<u64>,
    /// First line, counted from 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub line: Option<u64>,
    /// How many lines (default 1, at most 100,000).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_RANGE_LINES))]
    pub lines: Option<u64>,
}

/// `artifact_read_range` (MCP): an artifact id and a byte range (`offset`, `length`) or a
/// line range (`line`, `lines`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadRange {
    pub id: String,
    #[serde(default)]
    pub offset: Option<u64>,
    #[serde(default)]
    pub length: Option<u64>,
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub line: Option<u64>,
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_RANGE_LINES))]
    pub lines: Option<u64>,
}

impl ReadRange {
    pub fn range(&self) -> RangeRequest {
        RangeRequest {
            offset: self.offset,
            length: self.length,
            line: self.line,
            lines: self.lines,
        }
    }
}

/// `task_append` (MCP): events for a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskAppendArgs {
    pub task: String,
    /// 1-100 events, appended in order.
    #[schemars(length(min = 1, max = MAX_EVENTS_PER_APPEND))]
    #[serde(deserialize_with = "registry_core::wire::objects")]
    pub events: Vec<EventInput>,
}

/// `task_continuation` (MCP): a task and the package's budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskContinuationArgs {
    pub task: String,
    #[schemars(range(min = 1, max = MAX_BUDGET))]
    pub budget: usize,
    #[serde(default)]
    pub checkpoint: Option<String>,
}

/// The bytes of a range, and where they sit.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeBytes {
    pub artifact: ArtifactView,
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// A range as JSON (MCP): UTF-8 text, or base64 when the bytes are not UTF-8.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RangeAnswer {
    pub id: String,
    pub digest: String,
    pub size: u64,
    pub offset: u64,
    pub length: u64,
    /// `utf8` or `base64`.
    pub encoding: String,
    pub content: String,
}

/// `POST /v1/tasks/{id}/summaries`: a compaction summary of events `from_seq ..= to_seq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SummaryRequest {
    #[schemars(range(min = 1, max = MAX_SEQ))]
    pub from_seq: u64,
    #[schemars(range(min = 1, max = MAX_SEQ))]
    pub to_seq: u64,
    /// At most 16,384 bytes, not blank, without NUL.
    #[schemars(pattern(registry_core::text::NOT_BLANK_NO_NUL), length(max = MAX_EVENT_CHARS))]
    pub content: String,
}

/// `POST /v1/tasks/{id}/checkpoints`: pins `seq` (default: the last event).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointRequest {
    #[serde(default)]
    #[schemars(range(max = MAX_SEQ))]
    pub seq: Option<u64>,
    /// At most 256 bytes, without NUL.
    #[serde(default)]
    #[schemars(pattern(registry_core::text::NO_NUL), length(max = MAX_LABEL_CHARS))]
    pub label: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MarkList {
    pub marks: Vec<registry_core::task::TaskMark>,
}

/// `POST /v1/tasks/{id}/continuation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinuationRequest {
    /// Token budget (1 ..= 200,000), counted as context packs count.
    #[schemars(range(min = 1, max = MAX_BUDGET))]
    pub budget: usize,
    /// Assemble as of this checkpoint (its id): nothing after its sequence number.
    #[serde(default)]
    pub checkpoint: Option<String>,
}

/// A section of the Continuation Package, in the order the package lists them.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    Goal,
    NextStep,
    Summary,
    OpenItems,
    Decisions,
    Approvals,
    Artifacts,
    WorkingMemory,
    Events,
}

/// One item of the package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContinuationItem {
    pub section: Section,
    /// `goal`, `next_step`, `summary`, `event`, `artifact`, `memory`.
    pub source_type: String,
    pub source_id: Option<String>,
    pub seq: Option<u64>,
    pub content: String,
    pub tokens: usize,
}

/// The manifest's account of an included item (no content: its hash).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContinuationEntry {
    pub position: usize,
    pub section: Section,
    pub source_type: String,
    pub source_id: Option<String>,
    pub seq: Option<u64>,
    pub tokens: usize,
    pub content_hash: String,
    pub selected_reason: String,
}

/// A candidate left out, and why (`over_budget`, `over_cap`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContinuationOmission {
    pub section: Section,
    pub source_type: String,
    pub source_id: Option<String>,
    pub seq: Option<u64>,
    pub reason: String,
    pub tokens: Option<usize>,
    pub content_hash: String,
}

/// What the package drew on and left out: ids, hashes and counts, never content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContinuationManifest {
    /// Deterministic: the same task state and request give the same id.
    pub id: String,
    pub task: String,
    pub task_version: u32,
    pub task_content_hash: String,
    /// The package covers events up to this sequence number.
    pub through_seq: u64,
    pub checkpoint: Option<String>,
    /// The compaction summary it starts from.
    pub summary: Option<String>,
    pub budget: usize,
    pub fixed_tokens: usize,
    pub used_tokens: usize,
    pub tokenizer: String,
    pub items: Vec<ContinuationEntry>,
    pub omitted: Vec<ContinuationOmission>,
}

/// The Continuation Package: what a fresh model context, another agent or another node needs
/// to pick the task up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Continuation {
    pub id: String,
    pub task: String,
    pub budget: usize,
    pub used_tokens: usize,
    /// The items joined by blank lines.
    pub text: String,
    pub items: Vec<ContinuationItem>,
    pub manifest: ContinuationManifest,
}
