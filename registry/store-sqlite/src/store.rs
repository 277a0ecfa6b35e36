//! `SqliteStore`: the embedded implementation of `AssetStore` and `KeyStore`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parking_lot::{Condvar, Mutex};
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction, params};

use registry_core::asset::{AssetMeta, AssetRecord, AssetStatus};
use registry_core::audit::{
    AuditAction, AuditDraft, AuditEvent, AuditKey, Checkpoint, GENESIS_HASH,
};
use registry_core::deletion::{Receipt, ReceiptStatus, ReceiptStore};
use registry_core::derivation::{ChildStore, DerivationEdge, Relation};
use registry_core::principal::Role;
use registry_core::store::{
    ApiKeyRecord, AssetQuery, AssetStore, KeyStore, PurgeCounts, WriteOp, refuse_nul,
};
use registry_core::{CoreError, CoreResult};

use crate::StoreResult;
use crate::migrate::migrate;

#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Read connections kept open for concurrent readers.
    pub readers: usize,
    /// Keys the audit chain (HMAC) and signs its checkpoints. Kept outside the database.
    pub audit_key: Option<AuditKey>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            readers: 4,
            audit_key: None,
        }
    }
}

/// One writer, several readers, one file. Methods are blocking: async callers run them on a
/// blocking thread (`tokio::task::spawn_blocking`), never on the runtime's workers.
pub struct SqliteStore {
    path: PathBuf,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
    audit_key: Option<AuditKey>,
    /// Retrievals waiting for `flush_usage` (see `crate::ops`).
    pub(crate) retrievals: Mutex<Vec<(String, DateTime<Utc>)>>,
    /// Last field: its connection closes after the others, so SQLite's checkpoint on the last
    /// close sees every commit.
    checkpointer: Checkpointer,
}

/// WAL pages after which a commit checkpoints inline, on the committing write. The background
/// checkpointer keeps the WAL far below this; the limit only bounds the WAL if it falls behind
/// (a reader holding an old snapshot, a failing disk).
const INLINE_CHECKPOINT_PAGES: i64 = 16_384;

/// How long the checkpointer gathers commits before it checkpoints them together.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);

#[derive(Default)]
struct CheckpointState {
    /// Commits since the last checkpoint.
    commits: u64,
    stop: bool,
}

type CheckpointSignal = Arc<(Mutex<CheckpointState>, Condvar)>;

/// Copies committed WAL frames into the main file on its own thread and connection.
///
/// SQLite's default is to checkpoint on the commit that crosses 1000 WAL pages: that write
/// then copies the pages and fsyncs the main file, a tail of tens of milliseconds on a large
/// database. Here a `PASSIVE` checkpoint runs beside the writer instead (it never blocks the
/// writer or a reader), at most every `CHECKPOINT_EVERY` while there are new commits. A commit
/// is durable when the WAL's fsync returns, before and independently of any checkpoint, so the
/// kill -9 guarantee is unchanged.
struct Checkpointer {
    signal: CheckpointSignal,
    /// Held while a checkpoint runs, so that an explicit `TRUNCATE` (erasure) never races the
    /// background one and reports busy.
    running: Arc<Mutex<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    fn start(path: &Path) -> StoreResult<Self> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        let signal: CheckpointSignal = Arc::default();
        let running = Arc::new(Mutex::new(()));
        let thread = std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn({
                let signal = Arc::clone(&signal);
                let running = Arc::clone(&running);
                move || checkpoint_loop(&conn, &signal, &running)
            })?;
        Ok(Checkpointer {
            signal,
            running,
            thread: Some(thread),
        })
    }

    /// Tells the checkpointer that a write transaction committed.
    fn committed(&self) {
        let (state, cv) = &*self.signal;
        let mut s = state.lock();
        s.commits += 1;
        if s.commits == 1 {
            cv.notify_one();
        }
    }
}

fn checkpoint_loop(conn: &Connection, signal: &CheckpointSignal, running: &Mutex<()>) {
    let (state, cv) = &**signal;
    loop {
        let mut s = state.lock();
        cv.wait_while(&mut s, |s| s.commits == 0 && !s.stop);
        if s.stop {
            return;
        }
        // Gather the commits that follow within CHECKPOINT_EVERY into one checkpoint.
        cv.wait_while_for(&mut s, |s| !s.stop, CHECKPOINT_EVERY);
        if s.stop {
            return;
        }
        s.commits = 0;
        drop(s);
        let _running = running.lock();
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(0))
        {
            tracing::warn!(error = %e, "background WAL checkpoint failed");
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        {
            let (state, cv) = &*self.signal;
            state.lock().stop = true;
            cv.notify_one();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // FULL: a commit is on disk before the call returns, so an acknowledged write survives
    // kill -9 and power loss.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "secure_delete", "ON")?;
    Ok(())
}

/// A time as the store keeps it ([`registry_core::time`]).
pub(crate) fn ts(t: &DateTime<Utc>) -> String {
    registry_core::time::to_text(t)
}

/// A stored time; text that is not one is an error, never a default.
pub(crate) fn parse_ts(s: &str) -> rusqlite::Result<DateTime<Utc>> {
    registry_core::time::from_text(s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// A stored time that may be absent (NULL).
pub(crate) fn parse_ts_opt(s: Option<String>) -> rusqlite::Result<Option<DateTime<Utc>>> {
    s.as_deref().map(parse_ts).transpose()
}

pub(crate) fn conflict(e: rusqlite::Error) -> CoreError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            CoreError::Conflict(e.to_string())
        }
        _ => CoreError::backend("sqlite", e),
    }
}

fn be(e: impl std::fmt::Display) -> CoreError {
    CoreError::backend("sqlite", e)
}

const ASSET_COLS: &str = "meta, body, status, lookup_key";

fn row_to_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<AssetRecord> {
    let meta: String = r.get(0)?;
    let body: String = r.get(1)?;
    let status: String = r.get(2)?;
    let lookup_key: Option<String> = r.get(3)?;
    let conv = |e: serde_json::Error| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    };
    let mut meta: AssetMeta = serde_json::from_str(&meta).map_err(conv)?;
    // The status column is authoritative; the stored meta is the immutable first image.
    if let Some(s) = AssetStatus::parse(&status) {
        meta.status = s;
    }
    Ok(AssetRecord {
        meta,
        lookup_key,
        body: serde_json::from_str(&body).map_err(conv)?,
    })
}

impl SqliteStore {
    /// Opens (creating if needed) `dir/registry.db` and migrates it.
    pub fn open_dir(dir: &Path, opts: StoreOptions) -> StoreResult<Self> {
        std::fs::create_dir_all(dir)?;
        Self::open(&dir.join("registry.db"), opts)
    }

    pub fn open(path: &Path, opts: StoreOptions) -> StoreResult<Self> {
        let mut writer = Connection::open(path)?;
        configure(&writer)?;
        migrate(&mut writer)?;
        writer.pragma_update(None, "wal_autocheckpoint", INLINE_CHECKPOINT_PAGES)?;
        let checkpointer = Checkpointer::start(path)?;
        let mut readers = Vec::with_capacity(opts.readers);
        for _ in 0..opts.readers.max(1) {
            let c = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            c.busy_timeout(Duration::from_secs(10))?;
            readers.push(c);
        }
        Ok(SqliteStore {
            path: path.to_path_buf(),
            writer: Mutex::new(writer),
            readers: Mutex::new(readers),
            audit_key: opts.audit_key,
            retrievals: Mutex::new(Vec::new()),
            checkpointer,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn schema_version(&self) -> StoreResult<i64> {
        Ok(self
            .writer
            .lock()
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// Runs `f` on a read connection (a fresh one if the pool is empty).
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> CoreResult<T> {
        let conn = self.readers.lock().pop();
        let conn = match conn {
            Some(c) => c,
            None => {
                let c = Connection::open_with_flags(&self.path, OpenFlags::SQLITE_OPEN_READ_ONLY)
                    .map_err(be)?;
                c.busy_timeout(Duration::from_secs(10)).map_err(be)?;
                c
            }
        };
        let out = f(&conn).map_err(be);
        self.readers.lock().push(conn);
        out
    }

    /// Runs `f` in one write transaction. Work under a deadline that has passed writes
    /// nothing (see `registry_core::deadline`).
    pub(crate) fn write<T>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> CoreResult<T>,
    ) -> CoreResult<T> {
        registry_core::deadline::begin_commit()?;
        let mut conn = self.writer.lock();
        let tx = conn.transaction().map_err(be)?;
        let out = f(&tx)?;
        tx.commit().map_err(be)?;
        drop(conn);
        self.checkpointer.committed();
        Ok(out)
    }

    /// The audit key this store seals events with.
    pub fn audit_key(&self) -> Option<&AuditKey> {
        self.audit_key.as_ref()
    }

    /// Checkpoints the WAL into the main file and truncates it, so that pages freed by a
    /// secure delete leave no copy in the WAL. False when a reader kept it from completing.
    fn checkpoint_wal(&self) -> CoreResult<bool> {
        let _running = self.checkpointer.running.lock();
        let busy: i64 = self
            .writer
            .lock()
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
            .map_err(be)?;
        Ok(busy == 0)
    }
}

/// Appends one audit event inside `tx`, chaining it to the last one (keyed with `key`).
pub(crate) fn append_audit(
    tx: &Transaction<'_>,
    draft: AuditDraft,
    key: Option<&AuditKey>,
) -> CoreResult<AuditEvent> {
    draft.refuse_nul()?;
    let last: Option<(u64, String)> = tx
        .query_row(
            "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(be)?;
    let (seq, prev) = match last {
        Some((s, h)) => (s + 1, h),
        None => (1, GENESIS_HASH.to_string()),
    };
    let ev = AuditEvent::seal(seq, Utc::now(), draft, prev, key);
    tx.execute(
        "INSERT INTO audit (seq, at, actor, tenant, action, asset_id, before_hash, after_hash, reason, prev_hash, hash, keyed)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            ev.seq,
            ts(&ev.at),
            ev.draft.actor,
            ev.draft.tenant,
            ev.draft.action,
            ev.draft.asset_id,
            ev.draft.before_hash,
            ev.draft.after_hash,
            ev.draft.reason,
            ev.prev_hash,
            ev.hash,
            ev.keyed
        ],
    )
    .map_err(be)?;
    Ok(ev)
}

fn put_version(tx: &Transaction<'_>, rec: &AssetRecord) -> CoreResult<()> {
    let m = &rec.meta;
    m.validate()?;
    refuse_nul([
        ("id", Some(m.id.as_str())),
        ("owner", Some(m.owner.as_str())),
        ("content_hash", Some(m.content_hash.as_str())),
        ("lookup_key", rec.lookup_key.as_deref()),
    ])?;
    let head: Option<u32> = tx
        .query_row(
            "SELECT MAX(version) FROM assets WHERE id = ?1",
            [&m.id],
            |r| r.get(0),
        )
        .map_err(be)?;
    let expected = head.map_or(1, |h| h + 1);
    if m.version != expected {
        return Err(CoreError::Conflict(format!(
            "asset {} version {} cannot be written: next version is {expected}",
            m.id, m.version
        )));
    }
    tx.execute(
        "UPDATE assets SET is_head = 0 WHERE id = ?1 AND is_head = 1",
        [&m.id],
    )
    .map_err(be)?;
    tx.execute(
        "INSERT INTO assets (id, version, kind, tenant, scope_key, owner, status, lookup_key,
            content_hash, created_at, expires_at, is_head, meta, body, retain_until)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 1, ?12, ?13, ?14)",
        params![
            m.id,
            m.version,
            m.kind.as_str(),
            m.scope.tenant,
            m.scope.key(),
            m.owner,
            m.status.as_str(),
            rec.lookup_key,
            m.content_hash,
            ts(&m.created_at),
            m.expires_at.as_ref().map(ts),
            serde_json::to_string(m).map_err(be)?,
            serde_json::to_string(&rec.body).map_err(be)?,
            m.retain_until.as_ref().map(ts),
        ],
    )
    .map_err(conflict)?;
    Ok(())
}

fn set_status(
    tx: &Transaction<'_>,
    id: &str,
    version: Option<u32>,
    status: AssetStatus,
    expect: Option<AssetStatus>,
) -> CoreResult<()> {
    let current: Option<(u32, String)> = match version {
        Some(v) => tx
            .query_row(
                "SELECT version, status FROM assets WHERE id = ?1 AND version = ?2",
                params![id, v],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional(),
        None => tx
            .query_row(
                "SELECT version, status FROM assets WHERE id = ?1 AND is_head = 1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional(),
    }
    .map_err(be)?;
    let (v, cur) = current.ok_or_else(|| CoreError::NotFound(format!("asset {id}")))?;
    if let Some(e) = expect
        && e.as_str() != cur
    {
        return Err(CoreError::Conflict(format!(
            "asset {id} is {cur}, expected {}",
            e.as_str()
        )));
    }
    tx.execute(
        "UPDATE assets SET status = ?3 WHERE id = ?1 AND version = ?2",
        params![id, v, status.as_str()],
    )
    .map_err(be)?;
    Ok(())
}

impl AssetStore for SqliteStore {
    fn commit(&self, ops: Vec<WriteOp>) -> CoreResult<Vec<AuditEvent>> {
        let key = self.audit_key.clone();
        self.write(|tx| {
            let mut events = vec![];
            let now = ts(&Utc::now());
            for op in ops {
                match op {
                    WriteOp::PutVersion(rec) => put_version(tx, &rec)?,
                    WriteOp::SetStatus {
                        id,
                        version,
                        status,
                        expect,
                    } => set_status(tx, &id, version, status, expect)?,
                    WriteOp::AddEdge(e) => {
                        refuse_nul([
                            ("edge.parent", Some(e.parent.as_str())),
                            ("edge.child", Some(e.child.as_str())),
                        ])?;
                        tx.execute(
                            "INSERT OR IGNORE INTO derivation (parent, child, relation, child_store, created_at)
                             VALUES (?1, ?2, ?3, ?4, ?5)",
                            params![e.parent, e.child, e.relation.as_str(), e.child_store.as_str(), now],
                        )
                        .map_err(be)?;
                    }
                    WriteOp::Audit(d) => events.push(append_audit(tx, d, key.as_ref())?),
                    WriteOp::Idempotency {
                        tenant,
                        key,
                        request_hash,
                        response,
                    } => {
                        refuse_nul([
                            ("idempotency.tenant", Some(tenant.as_str())),
                            ("idempotency.key", Some(key.as_str())),
                            ("idempotency.request_hash", Some(request_hash.as_str())),
                        ])?;
                        tx.execute(
                            "INSERT INTO idempotency (tenant, key, request_hash, response, created_at)
                             VALUES (?1, ?2, ?3, ?4, ?5)",
                            params![tenant, key, request_hash, response.to_string(), now],
                        )
                        .map_err(conflict)?;
                    }
                }
            }
            Ok(events)
        })
    }

    fn get(&self, id: &str) -> CoreResult<Option<AssetRecord>> {
        self.read(|c| {
            c.query_row(
                &format!("SELECT {ASSET_COLS} FROM assets WHERE id = ?1 AND is_head = 1"),
                [id],
                row_to_record,
            )
            .optional()
        })
    }

    fn get_version(&self, id: &str, version: u32) -> CoreResult<Option<AssetRecord>> {
        self.read(|c| {
            c.query_row(
                &format!("SELECT {ASSET_COLS} FROM assets WHERE id = ?1 AND version = ?2"),
                params![id, version],
                row_to_record,
            )
            .optional()
        })
    }

    fn history(&self, id: &str) -> CoreResult<Vec<AssetRecord>> {
        self.read(|c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {ASSET_COLS} FROM assets WHERE id = ?1 ORDER BY version"
            ))?;
            st.query_map([id], row_to_record)?.collect()
        })
    }

    fn find(&self, q: &AssetQuery) -> CoreResult<Vec<AssetRecord>> {
        let mut sql = format!("SELECT {ASSET_COLS} FROM assets WHERE 1=1");
        let mut args: Vec<rusqlite::types::Value> = vec![];
        let mut push = |sql: &mut String, clause: &str, v: rusqlite::types::Value| {
            args.push(v);
            sql.push_str(&clause.replace('?', &format!("?{}", args.len())));
        };
        use rusqlite::types::Value as V;
        // With a content hash or ids, the best index is known: the unary `+` keeps SQLite's
        // planner (which has no statistics) from choosing a tenant- or kind-wide index for the
        // other columns instead, which scanned a whole tenant's rows per write.
        let pinned = q.content_hash.is_some() || q.ids.is_some();
        let col = |name: &str| {
            if pinned {
                format!("+{name}")
            } else {
                name.to_string()
            }
        };
        if q.heads_only {
            sql.push_str(" AND is_head = 1");
        }
        if let Some(k) = q.kind {
            push(
                &mut sql,
                &format!(" AND {} = ?", col("kind")),
                V::Text(k.as_str().into()),
            );
        }
        if let Some(t) = &q.tenant {
            push(
                &mut sql,
                &format!(" AND {} = ?", col("tenant")),
                V::Text(t.clone()),
            );
        }
        if let Some(l) = &q.lookup_key {
            push(&mut sql, " AND lookup_key = ?", V::Text(l.clone()));
        }
        if let Some(h) = &q.content_hash {
            push(&mut sql, " AND content_hash = ?", V::Text(h.clone()));
        }
        if let Some(o) = &q.owner {
            push(&mut sql, " AND owner = ?", V::Text(o.clone()));
        }
        if let Some(c) = &q.created_since {
            push(&mut sql, " AND created_at >= ?", V::Text(ts(c)));
        }
        if let Some(e) = &q.expires_before {
            push(
                &mut sql,
                " AND expires_at IS NOT NULL AND expires_at <= ?",
                V::Text(ts(e)),
            );
        }
        if let Some(e) = &q.retain_before {
            push(
                &mut sql,
                " AND retain_until IS NOT NULL AND retain_until <= ?",
                V::Text(ts(e)),
            );
        }
        if let Some(c) = &q.created_before {
            push(&mut sql, " AND created_at < ?", V::Text(ts(c)));
        }
        if let Some((at, id, version)) = &q.after {
            args.push(V::Text(ts(at)));
            let a = args.len();
            args.push(V::Text(id.clone()));
            let b = args.len();
            args.push(V::Integer(i64::from(*version)));
            let c = args.len();
            sql.push_str(&format!(
                " AND (created_at > ?{a} OR (created_at = ?{a} AND (id > ?{b} OR (id = ?{b} AND version > ?{c}))))"
            ));
        }
        let mut in_list = |sql: &mut String, column: &str, vals: Vec<String>| {
            if vals.is_empty() {
                sql.push_str(" AND 0");
                return;
            }
            sql.push_str(&format!(" AND {column} IN ("));
            for (i, v) in vals.into_iter().enumerate() {
                if i > 0 {
                    sql.push(',');
                }
                args.push(V::Text(v));
                sql.push_str(&format!("?{}", args.len()));
            }
            sql.push(')');
        };
        if let Some(s) = &q.scope_keys {
            in_list(&mut sql, &col("scope_key"), s.clone());
        }
        if let Some(s) = &q.statuses {
            in_list(
                &mut sql,
                &col("status"),
                s.iter().map(|x| x.as_str().to_string()).collect(),
            );
        }
        if let Some(ids) = &q.ids {
            in_list(&mut sql, "id", ids.clone());
        }
        sql.push_str(" ORDER BY created_at, id, version");
        if let Some(l) = q.limit {
            sql.push_str(&format!(" LIMIT {l}"));
        }
        self.read(|c| {
            let mut st = c.prepare(&sql)?;
            st.query_map(rusqlite::params_from_iter(args), row_to_record)?
                .collect()
        })
    }

    fn edges_from(&self, parent: &str) -> CoreResult<Vec<DerivationEdge>> {
        self.edges("parent", parent)
    }

    fn edges_to(&self, child: &str) -> CoreResult<Vec<DerivationEdge>> {
        self.edges("child", child)
    }

    fn idempotent_response(
        &self,
        tenant: &str,
        key: &str,
    ) -> CoreResult<Option<(String, serde_json::Value)>> {
        let row: Option<(String, String)> = self.read(|c| {
            c.query_row(
                "SELECT request_hash, response FROM idempotency WHERE tenant = ?1 AND key = ?2",
                params![tenant, key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })?;
        row.map(|(h, r)| Ok((h, serde_json::from_str(&r).map_err(be)?)))
            .transpose()
    }

    fn audit_events(&self, after: u64, limit: usize) -> CoreResult<Vec<AuditEvent>> {
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT seq, at, actor, tenant, action, asset_id, before_hash, after_hash, reason, prev_hash, hash, keyed
                 FROM audit WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            )?;
            let after = i64::try_from(after).unwrap_or(i64::MAX);
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            st.query_map(params![after, limit], |r| {
                let at: String = r.get(1)?;
                Ok(AuditEvent {
                    seq: r.get(0)?,
                    at: parse_ts(&at)?,
                    draft: AuditDraft {
                        actor: r.get(2)?,
                        tenant: r.get(3)?,
                        action: r.get(4)?,
                        asset_id: r.get(5)?,
                        before_hash: r.get(6)?,
                        after_hash: r.get(7)?,
                        reason: r.get(8)?,
                    },
                    prev_hash: r.get(9)?,
                    hash: r.get(10)?,
                    keyed: r.get(11)?,
                })
            })?
            .collect()
        })
    }

    fn purge(&self, ids: &[String], audit: AuditDraft) -> CoreResult<PurgeCounts> {
        let key = self.audit_key.clone();
        self.write(|tx| {
            let mut counts = PurgeCounts::default();
            for id in ids {
                counts.versions += tx
                    .execute("DELETE FROM assets WHERE id = ?1", [id])
                    .map_err(be)? as u64;
                counts.edges += tx
                    .execute(
                        "DELETE FROM derivation WHERE parent = ?1 OR child = ?1",
                        [id],
                    )
                    .map_err(be)? as u64;
                purge_task_rows(tx, id)?;
            }
            append_audit(tx, audit, key.as_ref())?;
            Ok(counts)
        })
    }

    fn checkpoint_audit(&self) -> CoreResult<Option<Checkpoint>> {
        self.checkpoint_audit_now()
    }

    fn audit_checkpoints(&self) -> CoreResult<Vec<Checkpoint>> {
        self.checkpoints(" ORDER BY seq")
    }

    fn purge_versions_before(&self, id: &str, version: u32, audit: AuditDraft) -> CoreResult<u64> {
        let key = self.audit_key.clone();
        self.write(|tx| {
            let n = tx
                .execute(
                    "DELETE FROM assets WHERE id = ?1 AND version < ?2",
                    params![id, version],
                )
                .map_err(be)? as u64;
            append_audit(tx, audit, key.as_ref())?;
            Ok(n)
        })
    }
}

impl SqliteStore {
    fn checkpoint_audit_now(&self) -> CoreResult<Option<Checkpoint>> {
        let Some(key) = self.audit_key.clone() else {
            return self.latest_checkpoint();
        };
        self.write(|tx| {
            let head: Option<(u64, String)> = tx
                .query_row(
                    "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(be)?;
            let Some((seq, hash)) = head else {
                return Ok(());
            };
            let last: Option<u64> = tx
                .query_row("SELECT MAX(seq) FROM audit_checkpoints", [], |r| r.get(0))
                .map_err(be)?;
            if last != Some(seq) {
                let cp = Checkpoint::sign(&key, seq, &hash, Utc::now());
                tx.execute(
                    "INSERT INTO audit_checkpoints (seq, hash, at, mac) VALUES (?1, ?2, ?3, ?4)",
                    params![cp.seq, cp.hash, ts(&cp.at), cp.mac],
                )
                .map_err(be)?;
            }
            Ok(())
        })?;
        self.latest_checkpoint()
    }

    fn latest_checkpoint(&self) -> CoreResult<Option<Checkpoint>> {
        Ok(self.checkpoints(" ORDER BY seq DESC LIMIT 1")?.pop())
    }

    fn checkpoints(&self, tail: &str) -> CoreResult<Vec<Checkpoint>> {
        let rows: Vec<(u64, String, String, String)> = self.read(|c| {
            let mut st = c.prepare(&format!(
                "SELECT seq, hash, at, mac FROM audit_checkpoints{tail}"
            ))?;
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                .collect()
        })?;
        rows.into_iter()
            .map(|(seq, hash, at, mac)| {
                Ok(Checkpoint {
                    seq,
                    hash,
                    at: parse_ts(&at).map_err(be)?,
                    mac,
                })
            })
            .collect()
    }

    fn edges(&self, col: &str, id: &str) -> CoreResult<Vec<DerivationEdge>> {
        let sql = format!(
            "SELECT parent, child, relation, child_store FROM derivation WHERE {col} = ?1 ORDER BY created_at, child"
        );
        let rows: Vec<(String, String, String, String)> = self.read(|c| {
            let mut st = c.prepare_cached(&sql)?;
            st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                .collect()
        })?;
        rows.into_iter()
            .map(|(parent, child, rel, store)| {
                Ok(DerivationEdge {
                    parent,
                    child,
                    relation: Relation::parse(&rel).ok_or_else(|| be(format!("relation {rel}")))?,
                    child_store: ChildStore::parse(&store)
                        .ok_or_else(|| be(format!("child store {store}")))?,
                })
            })
            .collect()
    }
}

impl KeyStore for SqliteStore {
    fn create_key(&self, rec: &ApiKeyRecord) -> CoreResult<()> {
        refuse_nul([
            ("key.id", Some(rec.id.as_str())),
            ("key.key_hash", Some(rec.key_hash.as_str())),
            ("key.tenant", Some(rec.tenant.as_str())),
            ("key.user", Some(rec.user.as_str())),
        ])?;
        let key = self.audit_key.clone();
        self.write(|tx| {
            tx.execute(
                "INSERT INTO api_keys (id, key_hash, tenant, user_name, groups, roles, created_at,
                    revoked_at, platform, projects, clearance, purposes)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, ?8, ?9, ?10, ?11)",
                params![
                    rec.id,
                    rec.key_hash,
                    rec.tenant,
                    rec.user,
                    serde_json::to_string(&rec.groups).map_err(be)?,
                    serde_json::to_string(&rec.roles).map_err(be)?,
                    ts(&rec.created_at),
                    rec.platform,
                    serde_json::to_string(&rec.projects).map_err(be)?,
                    rec.clearance.as_str(),
                    serde_json::to_string(&rec.purposes).map_err(be)?,
                ],
            )
            .map_err(conflict)?;
            append_audit(
                tx,
                AuditDraft::new("admin", AuditAction::KeyCreate)
                    .tenant(rec.tenant.clone())
                    .asset(rec.id.clone())
                    .hashes(None, Some(rec.key_hash.clone())),
                key.as_ref(),
            )?;
            Ok(())
        })
    }

    fn find_key(&self, key_hash: &str) -> CoreResult<Option<ApiKeyRecord>> {
        self.read(|c| {
            c.query_row(
                "SELECT id, key_hash, tenant, user_name, groups, roles, created_at, revoked_at,
                    platform, projects, clearance, purposes
                 FROM api_keys WHERE key_hash = ?1",
                [key_hash],
                row_to_key,
            )
            .optional()
        })
    }

    fn list_keys(&self, tenant: Option<&str>) -> CoreResult<Vec<ApiKeyRecord>> {
        self.read(|c| {
            let mut st = c.prepare(
                "SELECT id, key_hash, tenant, user_name, groups, roles, created_at, revoked_at,
                    platform, projects, clearance, purposes
                 FROM api_keys WHERE ?1 IS NULL OR tenant = ?1 ORDER BY created_at",
            )?;
            st.query_map([tenant], row_to_key)?.collect()
        })
    }

    fn revoke_key(&self, id: &str, actor: &str) -> CoreResult<bool> {
        let key = self.audit_key.clone();
        self.write(|tx| {
            let tenant: Option<String> = tx
                .query_row(
                    "SELECT tenant FROM api_keys WHERE id = ?1 AND revoked_at IS NULL",
                    [id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(be)?;
            let Some(tenant) = tenant else {
                return Ok(false);
            };
            tx.execute(
                "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1",
                params![id, ts(&Utc::now())],
            )
            .map_err(be)?;
            append_audit(
                tx,
                AuditDraft::new(actor, AuditAction::KeyRevoke)
                    .tenant(tenant)
                    .asset(id),
                key.as_ref(),
            )?;
            Ok(true)
        })
    }
}

fn row_to_key(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApiKeyRecord> {
    let conv = |e: serde_json::Error| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    };
    let groups: String = r.get(4)?;
    let roles: String = r.get(5)?;
    let created: String = r.get(6)?;
    let revoked: Option<String> = r.get(7)?;
    let projects: String = r.get(9)?;
    let clearance: String = r.get(10)?;
    let purposes: String = r.get(11)?;
    Ok(ApiKeyRecord {
        id: r.get(0)?,
        key_hash: r.get(1)?,
        tenant: r.get(2)?,
        user: r.get(3)?,
        groups: serde_json::from_str(&groups).map_err(conv)?,
        roles: serde_json::from_str::<Vec<Role>>(&roles).map_err(conv)?,
        platform: r.get(8)?,
        projects: serde_json::from_str(&projects).map_err(conv)?,
        purposes: serde_json::from_str(&purposes).map_err(conv)?,
        clearance: registry_core::Sensitivity::parse(&clearance).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                10,
                rusqlite::types::Type::Text,
                format!("clearance {clearance:?}").into(),
            )
        })?,
        created_at: parse_ts(&created)?,
        revoked_at: revoked.as_deref().map(parse_ts).transpose()?,
    })
}

impl ReceiptStore for SqliteStore {
    fn put_receipt(&self, r: &Receipt) -> CoreResult<()> {
        refuse_nul([
            ("receipt.id", Some(r.id.as_str())),
            ("receipt.tenant", r.tenant.as_deref()),
        ])?;
        let json = serde_json::to_string(r).map_err(be)?;
        let status = match r.status {
            ReceiptStatus::InProgress => "in_progress",
            ReceiptStatus::Completed => "completed",
        };
        self.write(|tx| {
            tx.execute(
                "INSERT INTO receipts (id, tenant, status, created_at, updated_at, receipt)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET status = ?3, updated_at = ?5, receipt = ?6",
                params![
                    r.id,
                    r.tenant,
                    status,
                    ts(&r.started_at),
                    ts(&r.updated_at),
                    json
                ],
            )
            .map_err(be)?;
            Ok(())
        })
    }

    fn get_receipt(&self, id: &str) -> CoreResult<Option<Receipt>> {
        let json: Option<String> = self.read(|c| {
            c.query_row("SELECT receipt FROM receipts WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
        })?;
        json.map(|j| serde_json::from_str(&j).map_err(be))
            .transpose()
    }

    fn unfinished_receipts(&self) -> CoreResult<Vec<Receipt>> {
        let rows: Vec<String> = self.read(|c| {
            let mut st = c.prepare(
                "SELECT receipt FROM receipts WHERE status = 'in_progress' ORDER BY created_at",
            )?;
            st.query_map([], |r| r.get(0))?.collect()
        })?;
        rows.iter()
            .map(|j| serde_json::from_str(j).map_err(be))
            .collect()
    }

    fn recent_receipts(&self, tenant: Option<&str>, limit: usize) -> CoreResult<Vec<Receipt>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<String> = self.read(|c| {
            let mut st = c.prepare(
                "SELECT receipt FROM receipts WHERE tenant IS ?1
                 ORDER BY created_at DESC, id DESC LIMIT ?2",
            )?;
            st.query_map(params![tenant, limit], |r| r.get(0))?
                .collect()
        })?;
        rows.iter()
            .map(|j| serde_json::from_str(j).map_err(be))
            .collect()
    }
}

impl registry_core::store::Store for SqliteStore {
    fn checkpoint(&self) -> CoreResult<bool> {
        // A reader finishing its statement releases the WAL pages it held: retry briefly.
        for _ in 0..50 {
            if self.checkpoint_wal()? {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(false)
    }

    fn schema_version(&self) -> CoreResult<i64> {
        SqliteStore::schema_version(self).map_err(Into::into)
    }
}

/// Deletes a task's log inside a purge's transaction; returns the rows removed.
fn purge_task_rows(tx: &Transaction<'_>, task: &str) -> CoreResult<u64> {
    let mut n = 0;
    for table in ["task_events", "task_artifacts", "task_marks"] {
        n += tx
            .execute(&format!("DELETE FROM {table} WHERE task = ?1"), [task])
            .map_err(be)? as u64;
    }
    Ok(n)
}
