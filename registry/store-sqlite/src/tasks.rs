//! The working layer's tables (`task_events`, `task_artifacts`, `task_marks`, migration 0010)
//! behind `registry_core::task::TaskLogStore`.

use chrono::Utc;
use registry_core::audit::AuditDraft;
use registry_core::store::refuse_nul;
use registry_core::task::{
    ArtifactRecord, EventQuery, EventType, MarkKind, NewEvent, TaskEvent, TaskLogStore, TaskMark,
};
use registry_core::{CoreError, CoreResult};
use rusqlite::{OptionalExtension, Transaction, params};

use crate::store::{SqliteStore, append_audit, parse_ts, ts};

fn be(e: rusqlite::Error) -> CoreError {
    CoreError::backend("sqlite", e)
}

fn conv<E: std::error::Error + Send + Sync + 'static>(e: E) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
}

#[derive(Debug, thiserror::Error)]
#[error("unknown stored value {0:?}")]
struct Unknown(String);

const EVENT_COLS: &str =
    "seq, client_id, kind, actor, at, content, artifact, caused_by, flags, content_hash";

fn row_to_event(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskEvent> {
    let kind: String = r.get(2)?;
    let flags: String = r.get(8)?;
    Ok(TaskEvent {
        seq: r.get(0)?,
        id: r.get(1)?,
        kind: EventType::parse(&kind).ok_or_else(|| conv(Unknown(kind)))?,
        actor: r.get(3)?,
        at: parse_ts(&r.get::<_, String>(4)?)?,
        content: r.get(5)?,
        artifact: r.get(6)?,
        caused_by: r.get(7)?,
        flags: serde_json::from_str(&flags).map_err(conv)?,
        content_hash: r.get(9)?,
    })
}

const ARTIFACT_COLS: &str =
    "id, task, tenant, name, blob_key, digest, size, lines, media_type, summary, created_at";

fn row_to_artifact(r: &rusqlite::Row<'_>) -> rusqlite::Result<ArtifactRecord> {
    Ok(ArtifactRecord {
        id: r.get(0)?,
        task: r.get(1)?,
        tenant: r.get(2)?,
        name: r.get(3)?,
        blob_key: r.get(4)?,
        digest: r.get(5)?,
        size: r.get(6)?,
        lines: r.get(7)?,
        media_type: r.get(8)?,
        summary: r.get(9)?,
        created_at: parse_ts(&r.get::<_, String>(10)?)?,
    })
}

const MARK_COLS: &str = "id, kind, from_seq, to_seq, covered_hash, content, created_at";

fn row_to_mark(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskMark> {
    let kind: String = r.get(1)?;
    Ok(TaskMark {
        id: r.get(0)?,
        kind: MarkKind::parse(&kind).ok_or_else(|| conv(Unknown(kind)))?,
        from_seq: r.get(2)?,
        to_seq: r.get(3)?,
        covered_hash: r.get(4)?,
        content: r.get(5)?,
        created_at: parse_ts(&r.get::<_, String>(6)?)?,
    })
}

fn existing(tx: &Transaction<'_>, task: &str, client_id: &str) -> CoreResult<Option<TaskEvent>> {
    tx.query_row(
        &format!("SELECT {EVENT_COLS} FROM task_events WHERE task = ?1 AND client_id = ?2"),
        params![task, client_id],
        row_to_event,
    )
    .optional()
    .map_err(be)
}

impl TaskLogStore for SqliteStore {
    fn append_events(
        &self,
        task: &str,
        events: &[NewEvent],
        audit: AuditDraft,
    ) -> CoreResult<Vec<(TaskEvent, bool)>> {
        for e in events {
            e.refuse_nul()?;
        }
        let key = self.audit_key().cloned();
        self.write(|tx| {
            let mut seq: u64 = tx
                .query_row(
                    "SELECT COALESCE(MAX(seq), 0) FROM task_events WHERE task = ?1",
                    [task],
                    |r| r.get(0),
                )
                .map_err(be)?;
            let at = Utc::now();
            let mut out = Vec::with_capacity(events.len());
            for e in events {
                if let Some(old) = existing(tx, task, &e.client_id)? {
                    out.push((old, false));
                    continue;
                }
                seq += 1;
                let ev = TaskEvent {
                    seq,
                    id: e.client_id.clone(),
                    kind: e.kind,
                    actor: e.actor.clone(),
                    at,
                    content: e.content.clone(),
                    artifact: e.artifact.clone(),
                    caused_by: e.caused_by.clone(),
                    flags: e.flags.clone(),
                    content_hash: e.content_hash.clone(),
                };
                tx.execute(
                    &format!(
                        "INSERT INTO task_events (task, {EVENT_COLS})
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
                    ),
                    params![
                        task,
                        ev.seq,
                        ev.id,
                        ev.kind.as_str(),
                        ev.actor,
                        ts(&ev.at),
                        ev.content,
                        ev.artifact,
                        ev.caused_by,
                        serde_json::to_string(&ev.flags).unwrap_or_else(|_| "[]".into()),
                        ev.content_hash
                    ],
                )
                .map_err(be)?;
                out.push((ev, true));
            }
            if out.iter().any(|(_, new)| *new) {
                append_audit(tx, audit, key.as_ref())?;
            }
            Ok(out)
        })
    }

    fn events(&self, task: &str, q: &EventQuery<'_>) -> CoreResult<Vec<TaskEvent>> {
        let kinds: Option<String> = q.kinds.map(|ks| {
            serde_json::to_string(&ks.iter().map(|k| k.as_str()).collect::<Vec<_>>())
                .unwrap_or_default()
        });
        let order = if q.newest_first { "DESC" } else { "ASC" };
        let sql = format!(
            "SELECT {EVENT_COLS} FROM task_events
              WHERE task = ?1 AND seq > ?2 AND (?3 IS NULL OR seq <= ?3)
                AND (?4 IS NULL OR kind IN (SELECT value FROM json_each(?4)))
              ORDER BY seq {order} LIMIT ?5"
        );
        let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
        self.read(|c| {
            c.prepare_cached(&sql)?
                .query_map(params![task, q.after, q.upto, kinds, limit], row_to_event)?
                .collect()
        })
    }

    fn last_seq(&self, task: &str) -> CoreResult<u64> {
        self.read(|c| {
            c.query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM task_events WHERE task = ?1",
                [task],
                |r| r.get(0),
            )
        })
    }

    fn put_artifact(&self, a: &ArtifactRecord, audit: AuditDraft) -> CoreResult<()> {
        refuse_nul([
            ("name", Some(a.name.as_str())),
            ("media_type", Some(a.media_type.as_str())),
            ("summary", a.summary.as_deref()),
        ])?;
        let key = self.audit_key().cloned();
        self.write(|tx| {
            tx.execute(
                &format!(
                    "INSERT INTO task_artifacts ({ARTIFACT_COLS})
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
                ),
                params![
                    a.id,
                    a.task,
                    a.tenant,
                    a.name,
                    a.blob_key,
                    a.digest,
                    a.size,
                    a.lines,
                    a.media_type,
                    a.summary,
                    ts(&a.created_at)
                ],
            )
            .map_err(crate::store::conflict)?;
            append_audit(tx, audit, key.as_ref())?;
            Ok(())
        })
    }

    fn artifact(&self, id: &str) -> CoreResult<Option<ArtifactRecord>> {
        self.read(|c| {
            c.query_row(
                &format!("SELECT {ARTIFACT_COLS} FROM task_artifacts WHERE id = ?1"),
                [id],
                row_to_artifact,
            )
            .optional()
        })
    }

    fn artifacts(&self, task: &str) -> CoreResult<Vec<ArtifactRecord>> {
        self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {ARTIFACT_COLS} FROM task_artifacts WHERE task = ?1 ORDER BY created_at, id"
            ))?
            .query_map([task], row_to_artifact)?
            .collect()
        })
    }

    fn put_mark(&self, task: &str, m: &TaskMark, audit: AuditDraft) -> CoreResult<()> {
        refuse_nul([("content", Some(m.content.as_str()))])?;
        let key = self.audit_key().cloned();
        self.write(|tx| {
            tx.execute(
                &format!("INSERT INTO task_marks (task, {MARK_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
                params![
                    task,
                    m.id,
                    m.kind.as_str(),
                    m.from_seq,
                    m.to_seq,
                    m.covered_hash,
                    m.content,
                    ts(&m.created_at)
                ],
            )
            .map_err(crate::store::conflict)?;
            append_audit(tx, audit, key.as_ref())?;
            Ok(())
        })
    }

    fn marks(&self, task: &str, kind: MarkKind, limit: usize) -> CoreResult<Vec<TaskMark>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {MARK_COLS} FROM task_marks WHERE task = ?1 AND kind = ?2
                  ORDER BY to_seq DESC, created_at DESC, id DESC LIMIT ?3"
            ))?
            .query_map(params![task, kind.as_str(), limit], row_to_mark)?
            .collect()
        })
    }

    fn mark(&self, task: &str, id: &str) -> CoreResult<Option<TaskMark>> {
        self.read(|c| {
            c.query_row(
                &format!("SELECT {MARK_COLS} FROM task_marks WHERE task = ?1 AND id = ?2"),
                [task, id],
                row_to_mark,
            )
            .optional()
        })
    }
}
