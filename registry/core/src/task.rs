//! The working layer's storage (DESIGN §7): a task's append-only event log, its artifacts
//! (metadata here, bytes in the blob store) and its marks (compaction summaries and
//! checkpoints). The task itself is an asset (`AssetKind::Task`); these rows are keyed by its
//! id, and a purge of the task removes them in the same transaction as its versions.
//!
//! Invariants every implementation keeps:
//! - `(task, seq)` and `(task, client_id)` are unique; `seq` runs 1, 2, 3 … with no gap and is
//!   assigned by the store inside the appending transaction.
//! - An event is never updated; only a purge of its task removes it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::asset::AssetId;
use crate::audit::AuditDraft;
use crate::error::CoreResult;

/// What kind of thing happened.
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
pub enum EventType {
    UserMessage,
    Decision,
    ToolCall,
    ToolResult,
    Error,
    Note,
    /// Something still to do; a later `resolved_item` whose `caused_by` names it closes it.
    OpenItem,
    ResolvedItem,
    Approval,
    Plan,
}

impl EventType {
    pub const ALL: [EventType; 10] = [
        EventType::UserMessage,
        EventType::Decision,
        EventType::ToolCall,
        EventType::ToolResult,
        EventType::Error,
        EventType::Note,
        EventType::OpenItem,
        EventType::ResolvedItem,
        EventType::Approval,
        EventType::Plan,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// An event to append, already checked and screened by the task domain.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub client_id: String,
    pub kind: EventType,
    pub actor: String,
    pub content: String,
    pub artifact: Option<String>,
    pub caused_by: Option<String>,
    /// What the screen found (`instruction`): carried as data, labelled.
    pub flags: Vec<String>,
    pub content_hash: String,
}

impl NewEvent {
    /// Refuses a NUL character in any stored text, naming the field (`store::refuse_nul`).
    pub fn refuse_nul(&self) -> CoreResult<()> {
        crate::text::refuse_nul([
            ("id", Some(self.client_id.as_str())),
            ("actor", Some(self.actor.as_str())),
            ("content", Some(self.content.as_str())),
            ("artifact", self.artifact.as_deref()),
            ("caused_by", self.caused_by.as_deref()),
        ])
    }
}

/// A stored event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskEvent {
    pub seq: u64,
    /// The client's event id: appending it again answers this event.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: EventType,
    pub actor: String,
    pub at: DateTime<Utc>,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caused_by: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// sha256 of `content`.
    pub content_hash: String,
}

/// A stored artifact: the bytes sit in the blob store under `blob_key` (namespaced per
/// tenant), its metadata here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactRecord {
    pub id: String,
    pub task: AssetId,
    pub tenant: String,
    pub name: String,
    pub blob_key: String,
    /// sha256 hex of the bytes.
    pub digest: String,
    pub size: u64,
    pub lines: u64,
    pub media_type: String,
    pub summary: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// What a mark is.
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
pub enum MarkKind {
    /// A compaction summary of the events `from_seq ..= to_seq`.
    Summary,
    /// A pinned sequence number (`to_seq`) a continuation can be assembled as of.
    Checkpoint,
}

impl MarkKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        [MarkKind::Summary, MarkKind::Checkpoint]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// A compaction summary or a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskMark {
    pub id: String,
    pub kind: MarkKind,
    pub from_seq: u64,
    pub to_seq: u64,
    /// sha256 over the content hashes of the covered events, in sequence order.
    pub covered_hash: String,
    /// The summary's text, or the checkpoint's label.
    pub content: String,
    pub created_at: DateTime<Utc>,
}

/// The task log's store. The task asset itself goes through `AssetStore`; `purge` of its id
/// removes every row here too.
pub trait TaskLogStore: Send + Sync {
    /// Appends `events` to `task` in one transaction with `audit`: each client id already
    /// present answers its stored event (`false`: not new), the others get the next sequence
    /// numbers, in order. A client id twice in `events` is appended once.
    fn append_events(
        &self,
        task: &str,
        events: &[NewEvent],
        audit: AuditDraft,
    ) -> CoreResult<Vec<(TaskEvent, bool)>>;
    /// Events with `after < seq <= upto` (all when `upto` is `None`): in sequence order, or
    /// newest first with `newest_first`; only of `kinds` when given; at most `limit`.
    fn events(&self, task: &str, q: &EventQuery<'_>) -> CoreResult<Vec<TaskEvent>>;
    /// Highest sequence number (0: no event).
    fn last_seq(&self, task: &str) -> CoreResult<u64>;
    /// Stores an artifact's metadata with `audit`; the caller stored the bytes first.
    fn put_artifact(&self, a: &ArtifactRecord, audit: AuditDraft) -> CoreResult<()>;
    fn artifact(&self, id: &str) -> CoreResult<Option<ArtifactRecord>>;
    /// A task's artifacts, oldest first.
    fn artifacts(&self, task: &str) -> CoreResult<Vec<ArtifactRecord>>;
    fn put_mark(&self, task: &str, m: &TaskMark, audit: AuditDraft) -> CoreResult<()>;
    /// A task's marks of `kind`, newest first.
    fn marks(&self, task: &str, kind: MarkKind, limit: usize) -> CoreResult<Vec<TaskMark>>;
    fn mark(&self, task: &str, id: &str) -> CoreResult<Option<TaskMark>>;
}

/// A range of a task's events.
#[derive(Debug, Clone, Default)]
pub struct EventQuery<'a> {
    pub after: u64,
    pub upto: Option<u64>,
    pub kinds: Option<&'a [EventType]>,
    pub newest_first: bool,
    pub limit: usize,
}

/// Lines in `bytes`: `\n`-terminated lines, plus a last one without its terminator.
pub fn count_lines(bytes: &[u8]) -> u64 {
    let newlines = bytes.iter().filter(|b| **b == b'\n').count() as u64;
    newlines + u64::from(!bytes.is_empty() && bytes.last() != Some(&b'\n'))
}

/// The byte range of lines `line ..= line + lines - 1` (counted from 1), each with its
/// terminator; `None` when `line` is past the last line.
pub fn line_range(bytes: &[u8], line: u64, lines: u64) -> Option<(usize, usize)> {
    if line == 0 || lines == 0 || bytes.is_empty() {
        return None;
    }
    let mut start = None;
    let mut current = 1u64;
    if line == 1 {
        start = Some(0);
    }
    for (i, b) in bytes.iter().enumerate() {
        if *b != b'\n' {
            continue;
        }
        if start.is_some() && current == line + lines - 1 {
            return start.map(|s| (s, i + 1));
        }
        current += 1;
        if current == line && i + 1 < bytes.len() {
            start = Some(i + 1);
        }
    }
    start.map(|s| (s, bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_from_one_with_their_terminators() {
        let b = b"a\nbb\nccc";
        assert_eq!(count_lines(b), 3);
        assert_eq!(count_lines(b"a\n"), 1);
        assert_eq!(count_lines(b""), 0);
        assert_eq!(line_range(b, 1, 1), Some((0, 2)));
        assert_eq!(line_range(b, 2, 2), Some((2, 8)));
        assert_eq!(line_range(b, 3, 5), Some((5, 8)));
        assert_eq!(line_range(b, 4, 1), None);
        assert_eq!(line_range(b"a\n", 2, 1), None);
        assert_eq!(line_range(b, 0, 1), None);
    }
}
