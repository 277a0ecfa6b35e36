//! `TaskService`: tasks, their event log, artifacts, summaries and checkpoints, under the one
//! access rule (`registry_core::access`). A task the caller may not read answers exactly like a
//! missing one; so do its events, artifacts and marks.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use registry_core::access::{self, Action};
use registry_core::asset::{AssetKind, AssetMeta, AssetRecord, AssetStatus, SourceKind};
use registry_core::audit::{AuditAction, AuditDraft};
use registry_core::deletion::{Deleter, DeletionLevel, Receipt};
use registry_core::derivation::{ChildStore, DerivationEdge, Relation};
use registry_core::hash::sha256_hex;
use registry_core::principal::Principal;
use registry_core::retrieval::Embedder;
use registry_core::store::{AssetQuery, BlobStore, Store, WriteOp};
use registry_core::task::{
    ArtifactRecord, EventQuery, MarkKind, NewEvent, TaskMark, count_lines, line_range,
};
use registry_core::{CoreError, CoreResult, ErrorCode, FieldError, FieldReason, Scope};

use crate::limits::*;
use crate::wire::*;

/// The working layer's service, built once over the deployment's backends.
#[derive(Clone)]
pub struct TaskService {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) blobs: Arc<dyn BlobStore>,
    pub(crate) embedder: Arc<dyn Embedder>,
    deleter: Arc<dyn Deleter>,
}

impl std::fmt::Debug for TaskService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskService").finish_non_exhaustive()
    }
}

pub(crate) fn invalid(field: &str, reason: FieldReason, message: impl Into<String>) -> CoreError {
    CoreError::validation_with(message, FieldError::new(field).reason(reason))
}

pub(crate) fn too_large(field: &str, len: usize, limit: usize) -> CoreError {
    CoreError::Coded {
        code: ErrorCode::PayloadTooLarge,
        message: format!("{field} is {len} bytes, over the limit of {limit}"),
        details: FieldError::new(field)
            .reason(FieldReason::TooLarge)
            .len(len)
            .limit(limit)
            .into(),
    }
}

fn not_found(what: &str, id: &str) -> CoreError {
    CoreError::NotFound(format!("no {what} {id}"))
}

/// A one-line identifier: 1..=`max` characters, none a control character.
fn check_line(field: &str, v: &str, max: usize) -> CoreResult<()> {
    if v.is_empty() || registry_core::text::is_blank(v) {
        return Err(invalid(
            field,
            FieldReason::Invalid,
            format!("{field} is blank"),
        ));
    }
    if v.chars().count() > max {
        return Err(invalid(
            field,
            FieldReason::InvalidLength,
            format!("{field} is over {max} characters"),
        ));
    }
    if v.chars().any(char::is_control) {
        return Err(invalid(
            field,
            FieldReason::Invalid,
            format!("{field} holds a control character"),
        ));
    }
    Ok(())
}

fn check_text(field: &str, v: &str, max: usize) -> CoreResult<()> {
    match registry_core::text::over(v, max) {
        Some(len) => Err(registry_core::text::too_long(field, len, max)),
        None => Ok(()),
    }
}

/// Refuses a credential or a financial or national identifier in `text` (the write gate's
/// detector): the registry keeps no secrets in a task's log. Returns the screen's flags
/// (`instruction`: text that tries to steer the agent, carried as data and labelled).
pub(crate) fn screen(field: &str, text: &str) -> CoreResult<Vec<String>> {
    use registry_detect::Severity;
    let secrets: Vec<&str> = registry_detect::scan_sensitive(text)
        .into_iter()
        .filter(|f| f.severity() == Severity::Secret)
        .map(|f| f.as_str())
        .collect();
    if !secrets.is_empty() {
        return Err(CoreError::Coded {
            code: ErrorCode::WriteGateRejected,
            message: format!("{field} holds a secret ({})", secrets.join(", ")),
            details: FieldError::new(field)
                .reason(FieldReason::Secret)
                .with("findings", secrets)
                .into(),
        });
    }
    let mut flags = vec![];
    if registry_detect::detect_instruction(text).verdict != registry_detect::Verdict::None {
        flags.push("instruction".to_string());
    }
    Ok(flags)
}

fn audit(p: &Principal, action: AuditAction, task: &str) -> AuditDraft {
    AuditDraft::new(&p.user, action)
        .tenant(&p.tenant)
        .asset(task)
}

fn body_hash(b: &TaskBody) -> String {
    sha256_hex(serde_json::to_vec(b).unwrap_or_default())
}

pub(crate) fn body_of(r: &AssetRecord) -> CoreResult<TaskBody> {
    serde_json::from_value(r.body.clone())
        .map_err(|e| CoreError::backend("tasks", format!("task {}: {e}", r.meta.id)))
}

pub(crate) fn view_of(r: &AssetRecord, last_seq: u64) -> CoreResult<TaskView> {
    let b = body_of(r)?;
    let m = &r.meta;
    Ok(TaskView {
        id: m.id.clone(),
        version: m.version,
        status: b.status,
        goal: b.goal,
        acceptance: b.acceptance,
        next_step: b.next_step,
        scope: m.scope.key(),
        owner: m.owner.clone(),
        sensitivity: m.sensitivity,
        created_at: m.created_at,
        updated_at: m.updated_at,
        closed_at: b.closed_at,
        last_seq,
        content_hash: m.content_hash.clone(),
    })
}

pub(crate) fn artifact_view(a: &ArtifactRecord) -> ArtifactView {
    ArtifactView {
        id: a.id.clone(),
        task: a.task.clone(),
        name: a.name.clone(),
        digest: format!("sha256:{}", a.digest),
        size: a.size,
        lines: a.lines,
        media_type: a.media_type.clone(),
        summary: a.summary.clone(),
        created_at: a.created_at,
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && name != "."
        && name != ".."
}

impl TaskService {
    pub fn new(
        store: Arc<dyn Store>,
        blobs: Arc<dyn BlobStore>,
        embedder: Arc<dyn Embedder>,
        deleter: Arc<dyn Deleter>,
    ) -> Self {
        TaskService {
            store,
            blobs,
            embedder,
            deleter,
        }
    }

    /// The head of task `id` if `p` may read it; anything else (missing, another kind, another
    /// tenant's, out of sight) answers the same "not found".
    pub(crate) fn load(&self, p: &Principal, id: &str) -> CoreResult<AssetRecord> {
        match self.store.get(id)? {
            Some(r)
                if r.meta.kind == AssetKind::Task
                    && r.meta.status.is_servable()
                    && access::may(p, Action::Read, &r.meta) =>
            {
                Ok(r)
            }
            _ => Err(not_found("task", id)),
        }
    }

    /// As [`Self::load`], for a change: the task's owner or whoever governs its scope.
    fn load_for_change(&self, p: &Principal, id: &str) -> CoreResult<AssetRecord> {
        let r = self.load(p, id)?;
        access::require(p, Action::Replace, &r.meta)?;
        Ok(r)
    }

    pub fn create(&self, p: &Principal, req: CreateTask) -> CoreResult<TaskView> {
        check_text("goal", &req.goal, MAX_GOAL_CHARS)?;
        if registry_core::text::is_blank(&req.goal) {
            return Err(invalid("goal", FieldReason::Invalid, "goal is blank"));
        }
        if let Some(a) = &req.acceptance {
            check_text("acceptance", a, MAX_GOAL_CHARS)?;
        }
        screen("goal", &req.goal)?;
        if let Some(a) = &req.acceptance {
            screen("acceptance", a)?;
        }
        let scope = Scope {
            tenant: Some(p.tenant.clone()),
            project: req.project.clone().or_else(|| p.project.clone()),
            user: Some(p.user.clone()),
            session: req.session.clone().or_else(|| p.session.clone()),
            task: None,
        };
        scope.validate().map_err(|_| {
            invalid(
                "scope",
                FieldReason::Invalid,
                "project or session is malformed",
            )
        })?;
        // A task is read on the path of the request that reads it, where its project and
        // session appear only under `X-Project` and `X-Session`. A body naming another project
        // or session than its own request's would make a task that request cannot read back
        // (schemathesis created one and read it with 404), so it is refused and says how.
        for (field, named, context, header) in [
            ("project", &req.project, &p.project, "X-Project"),
            ("session", &req.session, &p.session, "X-Session"),
        ] {
            if let Some(v) = named
                && context.as_ref() != Some(v)
            {
                return Err(invalid(
                    field,
                    FieldReason::Invalid,
                    format!(
                        "a task is made in its request's {field}: send `{header}: {v}`, under \
                         which the task is also read"
                    ),
                ));
            }
        }
        if !p.can_write_into(&scope) || !access::within_projects(p, &scope) {
            return Err(CoreError::Forbidden(
                "the key may not write tasks into this scope".into(),
            ));
        }
        let body = TaskBody {
            goal: req.goal,
            acceptance: req.acceptance,
            status: TaskStatus::Open,
            next_step: None,
            closed_at: None,
        };
        let source = SourceKind::UserStatement;
        let mut meta = AssetMeta::new(AssetKind::Task, scope, p.user.clone(), source);
        meta.trust = source.default_trust().min(p.trust_ceiling());
        if let Some(s) = req.sensitivity {
            meta.sensitivity = s;
        }
        meta.content_hash = body_hash(&body);
        meta.validate()?;
        let rec = AssetRecord {
            meta,
            lookup_key: None,
            body: serde_json::to_value(&body).map_err(|e| CoreError::backend("tasks", e))?,
        };
        let mut a = audit(p, AuditAction::TaskCreate, &rec.meta.id);
        a.after_hash = Some(rec.meta.content_hash.clone());
        self.store.commit(vec![
            WriteOp::PutVersion(Box::new(rec.clone())),
            WriteOp::Audit(a),
        ])?;
        view_of(&rec, 0)
    }

    pub fn get(&self, p: &Principal, id: &str) -> CoreResult<TaskView> {
        let r = self.load(p, id)?;
        view_of(&r, self.store.last_seq(id)?)
    }

    /// The tasks `p` may read in its own scopes, newest first.
    pub fn list(&self, p: &Principal, limit: usize) -> CoreResult<TaskList> {
        let recs = self.store.find(&AssetQuery {
            kind: Some(AssetKind::Task),
            tenant: Some(p.tenant.clone()),
            scope_keys: Some(p.visible_scope_keys()),
            statuses: Some(vec![AssetStatus::Active]),
            heads_only: true,
            ..Default::default()
        })?;
        let mut tasks = vec![];
        for r in recs.iter().rev() {
            if tasks.len() >= limit.clamp(1, MAX_PAGE) {
                break;
            }
            if access::may(p, Action::Read, &r.meta) {
                tasks.push(view_of(r, self.store.last_seq(&r.meta.id)?)?);
            }
        }
        Ok(TaskList { tasks })
    }

    /// A new version from the head `req.version`: a status move (audited `task.status`) and/or
    /// a new next step (audited `task.update`).
    pub fn update(&self, p: &Principal, id: &str, req: UpdateTask) -> CoreResult<TaskView> {
        if let Some(n) = &req.next_step {
            check_text("next_step", n, MAX_GOAL_CHARS)?;
            screen("next_step", n)?;
        }
        let head = self.load_for_change(p, id)?;
        if head.meta.version != req.version {
            return Err(CoreError::Coded {
                code: ErrorCode::Conflict,
                message: format!(
                    "task {id} is at version {}, not {}",
                    head.meta.version, req.version
                ),
                details: FieldError::new("version")
                    .with("current_version", head.meta.version)
                    .into(),
            });
        }
        let old = body_of(&head)?;
        let mut body = old.clone();
        let now = Utc::now();
        if let Some(s) = req.status {
            body.status = s;
            if s.is_closed() && !old.status.is_closed() {
                body.closed_at = Some(now);
            } else if !s.is_closed() {
                body.closed_at = None;
            }
        }
        if req.next_step.is_some() {
            body.next_step = req.next_step.filter(|s| !registry_core::text::is_blank(s));
        }
        if body == old {
            return view_of(&head, self.store.last_seq(id)?);
        }
        let mut meta = head.meta.clone();
        meta.version += 1;
        meta.updated_at = now;
        meta.content_hash = body_hash(&body);
        meta.status = AssetStatus::Active;
        let rec = AssetRecord {
            meta,
            lookup_key: None,
            body: serde_json::to_value(&body).map_err(|e| CoreError::backend("tasks", e))?,
        };
        let action = if body.status != old.status {
            AuditAction::TaskStatus
        } else {
            AuditAction::TaskUpdate
        };
        // Ids and hashes only (the change feed projects `task.status` as it stands).
        let mut a = audit(p, action, id);
        a.before_hash = Some(head.meta.content_hash.clone());
        a.after_hash = Some(rec.meta.content_hash.clone());
        self.store.commit(vec![
            WriteOp::SetStatus {
                id: id.to_string(),
                version: Some(head.meta.version),
                status: AssetStatus::Superseded,
                expect: Some(head.meta.status),
            },
            WriteOp::PutVersion(Box::new(rec.clone())),
            WriteOp::Audit(a),
        ])?;
        view_of(&rec, self.store.last_seq(id)?)
    }

    /// Appends events in order; an id appended before (in this request or an earlier one)
    /// answers its stored sequence number and counts once.
    pub fn append(&self, p: &Principal, id: &str, req: AppendEvents) -> CoreResult<AppendOutcome> {
        if req.events.is_empty() || req.events.len() > MAX_EVENTS_PER_APPEND {
            return Err(invalid(
                "events",
                FieldReason::InvalidLength,
                format!("1 to {MAX_EVENTS_PER_APPEND} events per append"),
            ));
        }
        let mut news = Vec::with_capacity(req.events.len());
        for (i, e) in req.events.iter().enumerate() {
            news.push(self.check_event(i, e)?);
        }
        self.load_for_change(p, id)?;
        for (i, e) in news.iter().enumerate() {
            if let Some(a) = &e.artifact {
                match self.store.artifact(a)? {
                    Some(rec) if rec.task == id => {}
                    _ => {
                        return Err(invalid(
                            &format!("events[{i}].artifact"),
                            FieldReason::Invalid,
                            "no such artifact of this task",
                        ));
                    }
                }
            }
        }
        if self.store.last_seq(id)? + news.len() as u64 > MAX_TASK_EVENTS {
            return Err(CoreError::Coded {
                code: ErrorCode::PayloadTooLarge,
                message: format!("a task holds at most {MAX_TASK_EVENTS} events"),
                details: FieldError::new("events")
                    .reason(FieldReason::TooLarge)
                    .limit(MAX_TASK_EVENTS)
                    .into(),
            });
        }
        let mut a = audit(p, AuditAction::TaskEventsAppend, id);
        a.reason = Some(format!("{} events", news.len()));
        let out = self.store.append_events(id, &news, a)?;
        let events: Vec<AppendedEvent> = out
            .iter()
            .map(|(e, new)| AppendedEvent {
                id: e.id.clone(),
                seq: e.seq,
                duplicate: !new,
            })
            .collect();
        let appended = out.iter().filter(|(_, new)| *new).count();
        Ok(AppendOutcome {
            duplicates: events.len() - appended,
            appended,
            events,
            last_seq: self.store.last_seq(id)?,
        })
    }

    fn check_event(&self, i: usize, e: &EventInput) -> CoreResult<NewEvent> {
        let f = |name: &str| format!("events[{i}].{name}");
        check_line(&f("id"), &e.id, MAX_ID_CHARS)?;
        check_line(&f("actor"), &e.actor, MAX_ID_CHARS)?;
        if let Some(c) = &e.caused_by {
            check_line(&f("caused_by"), c, MAX_ID_CHARS)?;
        }
        if let Some(a) = &e.artifact {
            check_line(&f("artifact"), a, MAX_ID_CHARS)?;
        }
        check_text(&f("content"), &e.content, MAX_EVENT_CHARS)?;
        let flags = screen(&f("content"), &e.content)?;
        Ok(NewEvent {
            client_id: e.id.clone(),
            kind: e.kind,
            actor: e.actor.clone(),
            content: e.content.clone(),
            artifact: e.artifact.clone(),
            caused_by: e.caused_by.clone(),
            flags,
            content_hash: sha256_hex(e.content.as_bytes()),
        })
    }

    /// Events after `after`, in sequence order, at most `limit` (1..=1000, default 100).
    pub fn events(
        &self,
        p: &Principal,
        id: &str,
        after: u64,
        limit: Option<usize>,
    ) -> CoreResult<EventPage> {
        let limit = limit.unwrap_or(100);
        if limit == 0 || limit > MAX_PAGE {
            return Err(invalid(
                "limit",
                FieldReason::InvalidValue,
                format!("limit is 1..={MAX_PAGE}"),
            ));
        }
        self.load(p, id)?;
        let mut events = self.store.events(
            id,
            &EventQuery {
                after,
                limit: limit + 1,
                ..Default::default()
            },
        )?;
        let more = events.len() > limit;
        events.truncate(limit);
        let next = if more {
            events.last().map(|e| e.seq)
        } else {
            None
        };
        Ok(EventPage { events, next })
    }

    /// Stores `bytes` as an artifact of task `id`: the blob in the tenant's namespace, an edge
    /// task → blob (so the task's deletion reaches it), then its metadata.
    pub fn put_artifact(
        &self,
        p: &Principal,
        id: &str,
        name: &str,
        media_type: Option<&str>,
        summary: Option<&str>,
        bytes: &[u8],
    ) -> CoreResult<ArtifactView> {
        if bytes.len() > MAX_ARTIFACT_BYTES {
            return Err(too_large("body", bytes.len(), MAX_ARTIFACT_BYTES));
        }
        if !valid_name(name) {
            return Err(invalid(
                "name",
                FieldReason::Invalid,
                format!("an artifact name is 1-{MAX_NAME_BYTES} characters of [A-Za-z0-9._-]"),
            ));
        }
        let media_type = media_type.unwrap_or("application/octet-stream");
        check_line("media_type", media_type, MAX_NAME_BYTES)?;
        if let Some(s) = summary {
            check_text("summary", s, MAX_LABEL_CHARS)?;
            screen("summary", s)?;
        }
        let task = self.load_for_change(p, id)?;
        if self.store.artifacts(id)?.len() >= MAX_TASK_ARTIFACTS {
            return Err(too_large(
                "artifacts",
                MAX_TASK_ARTIFACTS + 1,
                MAX_TASK_ARTIFACTS,
            ));
        }
        let tenant = task.meta.scope.tenant.clone().unwrap_or_default();
        let blob_key = self.blobs.put_in(&tenant, bytes)?;
        self.store.commit(vec![WriteOp::AddEdge(DerivationEdge {
            parent: id.to_string(),
            child: blob_key.clone(),
            relation: Relation::Produced,
            child_store: ChildStore::Blobs,
        })])?;
        let rec = ArtifactRecord {
            id: registry_core::asset::new_asset_id(),
            task: id.to_string(),
            tenant,
            name: name.to_string(),
            blob_key,
            digest: sha256_hex(bytes),
            size: bytes.len() as u64,
            lines: count_lines(bytes),
            media_type: media_type.to_string(),
            summary: summary.map(str::to_string),
            created_at: Utc::now(),
        };
        let mut a = audit(p, AuditAction::TaskArtifactPut, id);
        a.after_hash = Some(rec.digest.clone());
        a.reason = Some(format!("artifact {} ({} bytes)", rec.id, rec.size));
        self.store.put_artifact(&rec, a)?;
        Ok(artifact_view(&rec))
    }

    pub fn artifacts(&self, p: &Principal, id: &str) -> CoreResult<ArtifactList> {
        self.load(p, id)?;
        Ok(ArtifactList {
            artifacts: self
                .store
                .artifacts(id)?
                .iter()
                .map(artifact_view)
                .collect(),
        })
    }

    /// An artifact of a task `p` may read; anything else answers "not found".
    fn load_artifact(&self, p: &Principal, artifact: &str) -> CoreResult<ArtifactRecord> {
        let rec = self
            .store
            .artifact(artifact)?
            .ok_or_else(|| not_found("artifact", artifact))?;
        self.load(p, &rec.task)
            .map_err(|_| not_found("artifact", artifact))?;
        Ok(rec)
    }

    pub fn artifact(&self, p: &Principal, artifact: &str) -> CoreResult<ArtifactView> {
        Ok(artifact_view(&self.load_artifact(p, artifact)?))
    }

    /// Exactly the bytes `offset .. offset + length` (default: to the end), or exactly the
    /// lines `line .. line + lines` counted from 1 (each with its line feed).
    pub fn read_range(
        &self,
        p: &Principal,
        artifact: &str,
        range: &RangeRequest,
    ) -> CoreResult<RangeBytes> {
        let by_bytes = range.offset.is_some() || range.length.is_some();
        let by_lines = range.line.is_some() || range.lines.is_some();
        if by_bytes && by_lines {
            return Err(invalid(
                "line",
                FieldReason::Invalid,
                "ask for a byte range (offset, length) or a line range (line, lines), not both",
            ));
        }
        if let Some(n) = range.lines
            && !(1..=MAX_RANGE_LINES).contains(&n)
        {
            return Err(invalid(
                "lines",
                FieldReason::InvalidValue,
                format!("lines is 1..={MAX_RANGE_LINES}"),
            ));
        }
        if range.line == Some(0) {
            return Err(invalid(
                "line",
                FieldReason::InvalidValue,
                "lines are counted from 1",
            ));
        }
        let rec = self.load_artifact(p, artifact)?;
        let bytes = self
            .blobs
            .get(&rec.blob_key)?
            .ok_or_else(|| CoreError::backend("blobs", format!("artifact {artifact} lost")))?;
        let (start, end) = if by_lines {
            let line = range.line.unwrap_or(1);
            line_range(&bytes, line, range.lines.unwrap_or(1)).ok_or_else(|| {
                invalid(
                    "line",
                    FieldReason::OutOfRange,
                    format!("the artifact has {} lines", rec.lines),
                )
            })?
        } else {
            let offset = range.offset.unwrap_or(0);
            if offset > rec.size {
                return Err(invalid(
                    "offset",
                    FieldReason::OutOfRange,
                    format!("the artifact has {} bytes", rec.size),
                ));
            }
            let end = range
                .length
                .map_or(rec.size, |l| offset.saturating_add(l).min(rec.size));
            (offset as usize, end as usize)
        };
        Ok(RangeBytes {
            artifact: artifact_view(&rec),
            offset: start as u64,
            bytes: bytes[start..end].to_vec(),
        })
    }

    /// A compaction summary of events `from_seq ..= to_seq`: the range must hold events, and
    /// the hash of what it covers is recorded beside it.
    pub fn summarize(&self, p: &Principal, id: &str, req: SummaryRequest) -> CoreResult<TaskMark> {
        check_text("content", &req.content, MAX_EVENT_CHARS)?;
        if registry_core::text::is_blank(&req.content) {
            return Err(invalid("content", FieldReason::Invalid, "content is blank"));
        }
        screen("content", &req.content)?;
        self.load_for_change(p, id)?;
        let last = self.store.last_seq(id)?;
        if req.from_seq == 0 || req.from_seq > req.to_seq {
            return Err(invalid(
                "from_seq",
                FieldReason::OutOfRange,
                "from_seq is 1..=to_seq",
            ));
        }
        if req.to_seq > last {
            return Err(invalid(
                "to_seq",
                FieldReason::OutOfRange,
                format!("the task's last event is {last}"),
            ));
        }
        let covered_hash = self.covered_hash(id, req.from_seq, req.to_seq)?;
        let mark = TaskMark {
            id: registry_core::asset::new_asset_id(),
            kind: MarkKind::Summary,
            from_seq: req.from_seq,
            to_seq: req.to_seq,
            covered_hash,
            content: req.content,
            created_at: Utc::now(),
        };
        let mut a = audit(p, AuditAction::TaskSummary, id);
        a.after_hash = Some(mark.covered_hash.clone());
        a.reason = Some(format!("events {}-{}", mark.from_seq, mark.to_seq));
        self.store.put_mark(id, &mark, a)?;
        Ok(mark)
    }

    /// sha256 over the content hashes of events `from ..= to`, in order, read a page at a time
    /// under the request's deadline.
    fn covered_hash(&self, id: &str, from: u64, to: u64) -> CoreResult<String> {
        let mut acc = String::new();
        let mut after = from - 1;
        while after < to {
            registry_core::deadline::check()?;
            let page = self.store.events(
                id,
                &EventQuery {
                    after,
                    upto: Some(to),
                    limit: MAX_PAGE,
                    ..Default::default()
                },
            )?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            for e in &page {
                acc.push_str(&e.content_hash);
                acc.push('\n');
            }
        }
        Ok(sha256_hex(acc.as_bytes()))
    }

    /// Pins `seq` (default: the last event) so a continuation can be assembled as of it.
    pub fn checkpoint(
        &self,
        p: &Principal,
        id: &str,
        req: CheckpointRequest,
    ) -> CoreResult<TaskMark> {
        if let Some(l) = &req.label {
            check_text("label", l, MAX_LABEL_CHARS)?;
            screen("label", l)?;
        }
        self.load_for_change(p, id)?;
        let last = self.store.last_seq(id)?;
        let seq = req.seq.unwrap_or(last);
        if seq > last {
            return Err(invalid(
                "seq",
                FieldReason::OutOfRange,
                format!("the task's last event is {last}"),
            ));
        }
        let covered_hash = self.covered_hash(id, 1, seq)?;
        let mark = TaskMark {
            id: registry_core::asset::new_asset_id(),
            kind: MarkKind::Checkpoint,
            from_seq: 1.min(seq),
            to_seq: seq,
            covered_hash,
            content: req.label.unwrap_or_default(),
            created_at: Utc::now(),
        };
        let mut a = audit(p, AuditAction::TaskCheckpoint, id);
        a.after_hash = Some(mark.covered_hash.clone());
        a.reason = Some(format!("seq {seq}"));
        self.store.put_mark(id, &mark, a)?;
        Ok(mark)
    }

    /// The task's summaries and checkpoints, newest first (at most 100 of each).
    pub fn marks(&self, p: &Principal, id: &str) -> CoreResult<MarkList> {
        self.load(p, id)?;
        let mut marks = self.store.marks(id, MarkKind::Summary, 100)?;
        marks.extend(self.store.marks(id, MarkKind::Checkpoint, 100)?);
        Ok(MarkList { marks })
    }

    /// Deletes the task with its events, artifacts (their blobs), summaries and checkpoints,
    /// purged, and returns the receipt.
    pub fn delete(&self, p: &Principal, id: &str, reason: Option<String>) -> CoreResult<Receipt> {
        let reason = registry_core::deletion::check_reason(reason)?;
        let r = self.load(p, id)?;
        access::require(p, Action::Delete, &r.meta)?;
        self.deleter.delete(
            &p.user,
            reason.as_deref().unwrap_or("task deleted"),
            &[id.to_string()],
            DeletionLevel::Purged,
        )
    }

    /// Closed tasks (done or failed) whose status closed before `before`: the retention job
    /// deletes them (`retention.task_days`). At most `limit`, oldest first.
    pub fn closed_before(
        &self,
        before: DateTime<Utc>,
        limit: usize,
    ) -> CoreResult<Vec<(Option<String>, String)>> {
        let recs = self.store.find(&AssetQuery {
            kind: Some(AssetKind::Task),
            statuses: Some(vec![AssetStatus::Active]),
            heads_only: true,
            ..Default::default()
        })?;
        let mut out = vec![];
        for r in recs {
            registry_core::deadline::check()?;
            let Ok(b) = body_of(&r) else { continue };
            if b.status.is_closed() && b.closed_at.is_some_and(|c| c < before) {
                out.push((r.meta.scope.tenant.clone(), r.meta.id.clone()));
                if out.len() >= limit {
                    break;
                }
            }
        }
        Ok(out)
    }
}
