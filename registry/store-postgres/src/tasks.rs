//! The working layer's tables (`task_events`, `task_artifacts`, `task_marks`, migration 0008)
//! behind `registry_core::task::TaskLogStore`. Semantics are the SQLite store's (`tasks.rs`
//! there).

use chrono::Utc;
use postgres::types::Json;
use postgres::{GenericClient, Row};
use registry_core::audit::AuditDraft;
use registry_core::store::refuse_nul;
use registry_core::task::{
    ArtifactRecord, EventQuery, EventType, MarkKind, NewEvent, TaskEvent, TaskLogStore, TaskMark,
};
use registry_core::{CoreError, CoreResult};

use crate::pool::Db;
use crate::store::{PgStore, append_audit, conflict, micros, nul, pg};

fn unknown(what: &str) -> CoreError {
    CoreError::backend("postgres", format!("unknown stored value {what:?}"))
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

const EVENT_COLS: &str =
    "seq, client_id, kind, actor, at, content, artifact, caused_by, flags, content_hash";

fn row_to_event(r: &Row) -> CoreResult<TaskEvent> {
    let kind: String = r.try_get(2).map_err(pg)?;
    let Json(flags): Json<Vec<String>> = r.try_get(8).map_err(pg)?;
    let seq: i64 = r.try_get(0).map_err(pg)?;
    Ok(TaskEvent {
        seq: seq as u64,
        id: r.try_get(1).map_err(pg)?,
        kind: EventType::parse(&kind).ok_or_else(|| unknown(&kind))?,
        actor: r.try_get(3).map_err(pg)?,
        at: r.try_get(4).map_err(pg)?,
        content: r.try_get(5).map_err(pg)?,
        artifact: r.try_get(6).map_err(pg)?,
        caused_by: r.try_get(7).map_err(pg)?,
        flags,
        content_hash: r.try_get(9).map_err(pg)?,
    })
}

const ARTIFACT_COLS: &str =
    "id, task, tenant, name, blob_key, digest, size, lines, media_type, summary, created_at";

fn row_to_artifact(r: &Row) -> CoreResult<ArtifactRecord> {
    let size: i64 = r.try_get(6).map_err(pg)?;
    let lines: i64 = r.try_get(7).map_err(pg)?;
    Ok(ArtifactRecord {
        id: r.try_get(0).map_err(pg)?,
        task: r.try_get(1).map_err(pg)?,
        tenant: r.try_get(2).map_err(pg)?,
        name: r.try_get(3).map_err(pg)?,
        blob_key: r.try_get(4).map_err(pg)?,
        digest: r.try_get(5).map_err(pg)?,
        size: size as u64,
        lines: lines as u64,
        media_type: r.try_get(8).map_err(pg)?,
        summary: r.try_get(9).map_err(pg)?,
        created_at: r.try_get(10).map_err(pg)?,
    })
}

const MARK_COLS: &str = "id, kind, from_seq, to_seq, covered_hash, content, created_at";

fn row_to_mark(r: &Row) -> CoreResult<TaskMark> {
    let kind: String = r.try_get(1).map_err(pg)?;
    let from: i64 = r.try_get(2).map_err(pg)?;
    let to: i64 = r.try_get(3).map_err(pg)?;
    Ok(TaskMark {
        id: r.try_get(0).map_err(pg)?,
        kind: MarkKind::parse(&kind).ok_or_else(|| unknown(&kind))?,
        from_seq: from as u64,
        to_seq: to as u64,
        covered_hash: r.try_get(4).map_err(pg)?,
        content: r.try_get(5).map_err(pg)?,
        created_at: r.try_get(6).map_err(pg)?,
    })
}

fn insert_event<C: GenericClient>(
    db: &mut Db<'_, C>,
    task: &str,
    ev: &TaskEvent,
) -> CoreResult<()> {
    db.execute(
        &format!(
            "INSERT INTO task_events (task, {EVENT_COLS})
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        ),
        &[
            &task,
            &i64_of(ev.seq),
            &ev.id,
            &ev.kind.as_str(),
            &ev.actor,
            &ev.at,
            &ev.content,
            &ev.artifact,
            &ev.caused_by,
            &Json(&ev.flags),
            &ev.content_hash,
        ],
    )
    .map_err(pg)?;
    Ok(())
}

impl TaskLogStore for PgStore {
    fn append_events(
        &self,
        task: &str,
        events: &[NewEvent],
        audit: AuditDraft,
    ) -> CoreResult<Vec<(TaskEvent, bool)>> {
        for e in events {
            e.refuse_nul()?;
        }
        crate::pool::off_runtime(|| {
            let key = self.audit_key().cloned();
            self.write(|db| {
                let max: i64 = db
                    .query_one(
                        "SELECT COALESCE(MAX(seq), 0) FROM task_events WHERE task = $1",
                        &[&task],
                    )
                    .map_err(pg)?
                    .get(0);
                let mut seq = max as u64;
                let at = micros(&Utc::now());
                let mut out = Vec::with_capacity(events.len());
                for e in events {
                    let old = db
                        .query_opt(
                            &format!(
                                "SELECT {EVENT_COLS} FROM task_events
                                  WHERE task = $1 AND client_id = $2"
                            ),
                            &[&task, &e.client_id],
                        )
                        .map_err(pg)?;
                    if let Some(old) = old {
                        out.push((row_to_event(&old)?, false));
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
                    insert_event(db, task, &ev)?;
                    out.push((ev, true));
                }
                if out.iter().any(|(_, new)| *new) {
                    append_audit(db, audit, key.as_ref())?;
                }
                Ok(out)
            })
        })
    }

    fn events(&self, task: &str, q: &EventQuery<'_>) -> CoreResult<Vec<TaskEvent>> {
        if nul(task) {
            return Ok(vec![]);
        }
        let kinds: Option<Vec<String>> = q
            .kinds
            .map(|ks| ks.iter().map(|k| k.as_str().to_string()).collect());
        let order = if q.newest_first { "DESC" } else { "ASC" };
        let sql = format!(
            "SELECT {EVENT_COLS} FROM task_events
              WHERE task = $1 AND seq > $2 AND ($3::bigint IS NULL OR seq <= $3)
                AND ($4::text[] IS NULL OR kind = ANY($4))
              ORDER BY seq {order} LIMIT $5"
        );
        let after = i64_of(q.after);
        let upto = q.upto.map(i64_of);
        let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
        crate::pool::off_runtime(|| {
            self.read(|db| {
                db.query(&sql, &[&task, &after, &upto, &kinds, &limit])
                    .map_err(pg)?
                    .iter()
                    .map(row_to_event)
                    .collect()
            })
        })
    }

    fn last_seq(&self, task: &str) -> CoreResult<u64> {
        if nul(task) {
            return Ok(0);
        }
        crate::pool::off_runtime(|| {
            self.read(|db| {
                let n: i64 = db
                    .query_one(
                        "SELECT COALESCE(MAX(seq), 0) FROM task_events WHERE task = $1",
                        &[&task],
                    )
                    .map_err(pg)?
                    .get(0);
                Ok(n as u64)
            })
        })
    }

    fn put_artifact(&self, a: &ArtifactRecord, audit: AuditDraft) -> CoreResult<()> {
        refuse_nul([
            ("name", Some(a.name.as_str())),
            ("media_type", Some(a.media_type.as_str())),
            ("summary", a.summary.as_deref()),
        ])?;
        crate::pool::off_runtime(|| {
            let key = self.audit_key().cloned();
            self.write(|db| {
                db.execute(
                    &format!(
                        "INSERT INTO task_artifacts ({ARTIFACT_COLS})
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
                    ),
                    &[
                        &a.id,
                        &a.task,
                        &a.tenant,
                        &a.name,
                        &a.blob_key,
                        &a.digest,
                        &i64_of(a.size),
                        &i64_of(a.lines),
                        &a.media_type,
                        &a.summary,
                        &micros(&a.created_at),
                    ],
                )
                .map_err(conflict)?;
                append_audit(db, audit, key.as_ref())?;
                Ok(())
            })
        })
    }

    fn artifact(&self, id: &str) -> CoreResult<Option<ArtifactRecord>> {
        if nul(id) {
            return Ok(None);
        }
        crate::pool::off_runtime(|| {
            self.read(|db| {
                db.query_opt(
                    &format!("SELECT {ARTIFACT_COLS} FROM task_artifacts WHERE id = $1"),
                    &[&id],
                )
                .map_err(pg)?
                .as_ref()
                .map(row_to_artifact)
                .transpose()
            })
        })
    }

    fn artifacts(&self, task: &str) -> CoreResult<Vec<ArtifactRecord>> {
        if nul(task) {
            return Ok(vec![]);
        }
        crate::pool::off_runtime(|| {
            self.read(|db| {
                db.query(
                    &format!(
                        "SELECT {ARTIFACT_COLS} FROM task_artifacts WHERE task = $1
                          ORDER BY created_at, id"
                    ),
                    &[&task],
                )
                .map_err(pg)?
                .iter()
                .map(row_to_artifact)
                .collect()
            })
        })
    }

    fn put_mark(&self, task: &str, m: &TaskMark, audit: AuditDraft) -> CoreResult<()> {
        refuse_nul([("content", Some(m.content.as_str()))])?;
        crate::pool::off_runtime(|| {
            let key = self.audit_key().cloned();
            self.write(|db| {
                db.execute(
                    &format!(
                        "INSERT INTO task_marks (task, {MARK_COLS})
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
                    ),
                    &[
                        &task,
                        &m.id,
                        &m.kind.as_str(),
                        &i64_of(m.from_seq),
                        &i64_of(m.to_seq),
                        &m.covered_hash,
                        &m.content,
                        &micros(&m.created_at),
                    ],
                )
                .map_err(conflict)?;
                append_audit(db, audit, key.as_ref())?;
                Ok(())
            })
        })
    }

    fn marks(&self, task: &str, kind: MarkKind, limit: usize) -> CoreResult<Vec<TaskMark>> {
        if nul(task) {
            return Ok(vec![]);
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        crate::pool::off_runtime(|| {
            self.read(|db| {
                db.query(
                    &format!(
                        "SELECT {MARK_COLS} FROM task_marks WHERE task = $1 AND kind = $2
                          ORDER BY to_seq DESC, created_at DESC, id DESC LIMIT $3"
                    ),
                    &[&task, &kind.as_str(), &limit],
                )
                .map_err(pg)?
                .iter()
                .map(row_to_mark)
                .collect()
            })
        })
    }

    fn mark(&self, task: &str, id: &str) -> CoreResult<Option<TaskMark>> {
        if nul(task) || nul(id) {
            return Ok(None);
        }
        crate::pool::off_runtime(|| {
            self.read(|db| {
                db.query_opt(
                    &format!("SELECT {MARK_COLS} FROM task_marks WHERE task = $1 AND id = $2"),
                    &[&task, &id],
                )
                .map_err(pg)?
                .as_ref()
                .map(row_to_mark)
                .transpose()
            })
        })
    }
}
