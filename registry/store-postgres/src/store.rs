//! `PgStore`: the scale-out implementation of `AssetStore`, `KeyStore` and `ReceiptStore`.
//!
//! Semantics are the SQLite store's, checked by the same contract suite
//! (`registry-store-contract`). Every write runs in one transaction that first locks the
//! `write_lock` row, so writes from every connection of every node serialise: the audit chain
//! stays linear and each check-then-write (head + 1, a status move with `expect`) sees the latest
//! committed state. Reads take no lock and see what was committed before they began.

use std::time::Duration;

use chrono::{DateTime, Utc};
use postgres::types::{Json, ToSql};
use postgres::{Client, GenericClient, Row, Transaction};

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
use registry_core::{CoreError, CoreResult, Sensitivity};

use crate::migrate::migrate;
use crate::pool::{Conn, Db, Pool};
use crate::{StoreError, StoreResult, describe};

/// How to reach the database and how to use it.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `postgres://user:password@host:port/database` (libpq key-value strings work too). The
    /// connection is not encrypted: use it on loopback or a private network.
    pub url: String,
    /// Schema holding the store's tables, created if missing: a plain lower-case identifier.
    pub schema: String,
    /// Connections kept open at most.
    pub pool_size: usize,
    /// How long a call waits for a free connection before failing.
    pub pool_wait: Duration,
    /// Keys the audit chain (HMAC) and signs its checkpoints. Kept outside the database.
    pub audit_key: Option<AuditKey>,
    /// The server ends a session left idle inside a transaction this long (a hung node must not
    /// hold the write lock for ever). `None`: the server's setting.
    pub idle_in_transaction_timeout: Option<Duration>,
    /// How long a purge waits for older transactions (which keep the deleted rows alive for
    /// VACUUM) to end; see [`AssetStore::purge`].
    pub purge_wait: Duration,
    /// This node's name in the change log, when it follows the log (`registry serve` sets it,
    /// stable per data directory); `None`: a plain client of the store, not a node.
    pub node_id: Option<String>,
}

impl PgOptions {
    pub fn new(url: impl Into<String>) -> Self {
        PgOptions {
            url: url.into(),
            schema: "public".into(),
            pool_size: 8,
            pool_wait: Duration::from_secs(30),
            audit_key: None,
            idle_in_transaction_timeout: Some(Duration::from_secs(60)),
            purge_wait: Duration::from_secs(10),
            node_id: None,
        }
    }
}

/// A pool of connections to one schema. Methods are blocking and run the driver's own
/// single-threaded runtime: async callers run them on a blocking thread
/// (`tokio::task::spawn_blocking`); called on a tokio worker, the driver panics.
pub struct PgStore {
    pool: Pool,
    schema: String,
    audit_key: Option<AuditKey>,
    endpoint: String,
    purge_wait: Duration,
    /// Retrievals counted but not yet written (see `UsageStore::flush_usage`).
    pub(crate) retrievals: parking_lot::Mutex<Vec<(registry_core::asset::AssetId, DateTime<Utc>)>>,
    pub(crate) node_id: Option<String>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("endpoint", &self.endpoint)
            .field("schema", &self.schema)
            .finish()
    }
}

fn be(e: impl std::fmt::Display) -> CoreError {
    CoreError::backend("postgres", e)
}

pub(crate) fn pg(e: postgres::Error) -> CoreError {
    be(describe(&e))
}

/// A unique-key violation on insert is a conflict (a version, key or idempotency record that
/// exists already); anything else is a backend failure.
pub(crate) fn conflict(e: postgres::Error) -> CoreError {
    if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) {
        CoreError::Conflict(describe(&e))
    } else {
        pg(e)
    }
}

/// Stored times have microsecond precision; both backends truncate (floor) to it, so a bound
/// compares the same way in either.
pub(crate) fn micros(t: &DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(*t)
}

fn valid_schema(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && s.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn version_i64(v: u32) -> i64 {
    i64::from(v)
}

/// Whether `s` holds a NUL character. No stored text does (writes refuse it, see
/// `refuse_nul`), and PostgreSQL refuses one as a parameter, so a lookup by such text answers
/// "nothing" without asking the server, as SQLite's would.
pub(crate) fn nul(s: &str) -> bool {
    s.contains('\0')
}

fn row_to_record(r: &Row) -> CoreResult<AssetRecord> {
    let Json(mut meta): Json<AssetMeta> = r.try_get(0).map_err(pg)?;
    let body: serde_json::Value = r.try_get(1).map_err(pg)?;
    let status: String = r.try_get(2).map_err(pg)?;
    // The status column is authoritative; the stored meta is the immutable first image.
    if let Some(s) = AssetStatus::parse(&status) {
        meta.status = s;
    }
    Ok(AssetRecord {
        meta,
        lookup_key: r.try_get(3).map_err(pg)?,
        body,
    })
}

const ASSET_COLS: &str = "meta, body, status, lookup_key";

impl PgStore {
    /// Connects, creates the schema if needed and migrates it.
    pub fn connect(opts: PgOptions) -> StoreResult<Self> {
        crate::pool::off_runtime(|| {
            if !valid_schema(&opts.schema) {
                return Err(StoreError::Config(format!(
                    "schema {:?} must be 1-63 chars of [a-z0-9_], not starting with a digit",
                    opts.schema
                )));
            }
            let mut config: postgres::Config = opts.url.parse()?;
            let mut options = config.get_options().unwrap_or_default().to_string();
            options.push_str(&format!(" -c search_path={}", opts.schema));
            if let Some(t) = opts.idle_in_transaction_timeout {
                options.push_str(&format!(
                    " -c idle_in_transaction_session_timeout={}",
                    t.as_millis()
                ));
            }
            config.options(options.trim());
            if config.get_application_name().is_none() {
                config.application_name("harness-registry");
            }
            if config.get_connect_timeout().is_none() {
                config.connect_timeout(Duration::from_secs(10));
            }
            let endpoint = format!(
                "{:?}:{:?}/{}",
                config.get_hosts(),
                config.get_ports(),
                config.get_dbname().unwrap_or("")
            );
            let pool = Pool::new(config, opts.pool_size, opts.pool_wait);
            {
                let mut conn = pool.get()?;
                migrate(&mut conn.client, &opts.schema)?;
                // Purge runs VACUUM, which skips (with only a warning) a table the role does not own.
                let may_vacuum: bool = conn
                    .client
                    .query_one(
                        "SELECT bool_and(pg_has_role(current_user, c.relowner, 'USAGE'))
                             OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
                           FROM pg_class c
                          WHERE c.oid IN ('assets'::regclass, 'derivation'::regclass)",
                        &[],
                    )?
                    .get(0);
                if !may_vacuum {
                    return Err(StoreError::Config(
                        "the store's role must own its tables: purge runs VACUUM on them".into(),
                    ));
                }
            }
            Ok(PgStore {
                pool,
                schema: opts.schema,
                audit_key: opts.audit_key,
                endpoint,
                purge_wait: opts.purge_wait,
                retrievals: parking_lot::Mutex::new(vec![]),
                node_id: opts.node_id,
            })
        })
    }

    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// A connection of its own, outside the pool.
    pub(crate) fn dedicated_client(&self) -> CoreResult<Client> {
        Ok(self.pool.dedicated()?)
    }

    /// Appends one change-log entry per id (see migration 0005), inside `db`'s write
    /// transaction.
    fn log_changes<C: GenericClient>(&self, db: &mut Db<'_, C>, ids: &[&str]) -> CoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut seen = std::collections::BTreeSet::new();
        let ids: Vec<&str> = ids.iter().copied().filter(|i| seen.insert(*i)).collect();
        db.execute(
            "INSERT INTO changes (asset_id, node) SELECT id, $2 FROM unnest($1::text[]) AS id",
            &[&ids, &self.node_id],
        )
        .map_err(pg)?;
        Ok(())
    }

    /// The number of the newest migration applied.
    pub fn schema_version(&self) -> StoreResult<i64> {
        crate::pool::off_runtime(|| {
            let mut conn = self.pool.get()?;
            Ok(conn
                .client
                .query_one(
                    "SELECT COALESCE(MAX(version), 0)::bigint FROM schema_migrations",
                    &[],
                )?
                .get(0))
        })
    }

    /// The audit key this store seals events with.
    pub fn audit_key(&self) -> Option<&AuditKey> {
        self.audit_key.as_ref()
    }

    /// Runs raw SQL (simple protocol, several statements allowed) on one connection of the
    /// pool; for tests and administrative work.
    pub fn execute_batch(&self, sql: &str) -> CoreResult<()> {
        crate::pool::off_runtime(|| {
            let mut conn = self.pool.get()?;
            conn.client.batch_execute(sql).map_err(pg)
        })
    }

    /// Appends one audit event in its own transaction (for writes outside `commit`).
    pub fn append_audit_event(&self, draft: AuditDraft) -> CoreResult<AuditEvent> {
        crate::pool::off_runtime(|| {
            let key = self.audit_key.clone();
            self.write(|db| append_audit(db, draft, key.as_ref()))
        })
    }

    /// Runs `f` on a pooled connection, once more on a fresh one if the first was found closed
    /// (the server restarted, or dropped an idle session).
    pub(crate) fn read<T>(
        &self,
        f: impl Fn(&mut Db<'_, Client>) -> CoreResult<T>,
    ) -> CoreResult<T> {
        let mut attempt = 0;
        loop {
            let mut conn = self.pool.get()?;
            let Conn { client, stmts, .. } = &mut *conn;
            let out = f(&mut Db { c: client, stmts });
            if out.is_err() && client.is_closed() && attempt == 0 {
                attempt += 1;
                continue;
            }
            return out;
        }
    }

    /// Runs `f` in one transaction that does not take the write lock: for rows that writes of
    /// assets never touch (webhook state), whose own statements say how they serialise.
    pub(crate) fn transaction<T>(
        &self,
        f: impl FnOnce(&mut Db<'_, Transaction<'_>>) -> CoreResult<T>,
    ) -> CoreResult<T> {
        let mut conn = self.pool.get()?;
        let Conn { client, stmts, .. } = &mut *conn;
        let mut tx = client.transaction().map_err(pg)?;
        let out = {
            let mut db = Db { c: &mut tx, stmts };
            f(&mut db)?
        };
        tx.commit().map_err(pg)?;
        Ok(out)
    }

    /// Runs `f` in one write transaction that holds the store's write lock. Work under a
    /// deadline that has passed writes nothing (see `registry_core::deadline`).
    pub(crate) fn write<T>(
        &self,
        f: impl FnOnce(&mut Db<'_, Transaction<'_>>) -> CoreResult<T>,
    ) -> CoreResult<T> {
        registry_core::deadline::begin_commit()?;
        let mut conn = self.pool.get()?;
        let Conn { client, stmts, .. } = &mut *conn;
        let mut tx = client.transaction().map_err(pg)?;
        let out = {
            let mut db = Db { c: &mut tx, stmts };
            db.execute("SELECT id FROM write_lock WHERE id = 1 FOR UPDATE", &[])
                .map_err(pg)?;
            f(&mut db)?
        };
        tx.commit().map_err(pg)?;
        Ok(out)
    }

    /// Removes the dead tuples that the delete of transaction `xid` left in `tables`, their
    /// TOAST tables and their indexes.
    ///
    /// VACUUM removes a dead tuple only once no transaction in the database can still see it,
    /// so this first waits (up to `purge_wait`) until every other session's snapshot and
    /// transaction id are newer than `xid`; if one outlasts the wait, VACUUM still runs and the
    /// call fails, naming it. `INDEX_CLEANUP ON`: by default VACUUM may skip the indexes when
    /// few pages have dead tuples, and index entries hold copies of the indexed values (ids,
    /// lookup keys, hashes). VACUUM cannot run inside a transaction, so this follows the commit.
    pub(crate) fn vacuum_after(&self, xid: u32, tables: &str) -> CoreResult<()> {
        let mut conn = self.pool.get()?;
        let deadline = std::time::Instant::now() + self.purge_wait;
        let mut pause = Duration::from_millis(2);
        let holders: Vec<i32> = loop {
            let rows = conn
                .client
                .query(
                    "SELECT pid FROM pg_stat_activity
                      WHERE datname = current_database() AND pid <> pg_backend_pid()
                        AND backend_type = 'client backend'
                        AND (age(backend_xmin) >= age($1::text::xid)
                             OR age(backend_xid) >= age($1::text::xid))",
                    &[&xid.to_string()],
                )
                .map_err(pg)?;
            let pids: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
            if pids.is_empty() || std::time::Instant::now() >= deadline {
                break pids;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(100));
        };
        conn.client
            .batch_execute(&format!("VACUUM (INDEX_CLEANUP ON) {tables}"))
            .map_err(pg)?;
        if !holders.is_empty() {
            return Err(be(format!(
                "the purged rows are deleted, but stay on disk as dead tuples until transactions \
                 older than the purge end (server pids {holders:?}, still open after {:?})",
                self.purge_wait
            )));
        }
        Ok(())
    }

    /// Asks the server for a `CHECKPOINT` when the role may (a superuser or a member of
    /// `pg_checkpoint`); returns whether it ran.
    pub(crate) fn request_checkpoint(&self) -> CoreResult<bool> {
        let mut conn = self.pool.get()?;
        let may: bool = conn
            .client
            .query_one(
                "SELECT rolsuper OR pg_has_role(current_user, 'pg_checkpoint', 'USAGE')
                   FROM pg_roles WHERE rolname = current_user",
                &[],
            )
            .map_err(pg)?
            .get(0);
        if may {
            conn.client.batch_execute("CHECKPOINT").map_err(pg)?;
        }
        Ok(may)
    }

    fn latest_checkpoint(&self) -> CoreResult<Option<Checkpoint>> {
        Ok(self
            .checkpoints(
                "SELECT seq, hash, at, mac FROM audit_checkpoints ORDER BY seq DESC LIMIT 1",
            )?
            .pop())
    }

    fn checkpoints(&self, sql: &str) -> CoreResult<Vec<Checkpoint>> {
        self.read(|db| {
            db.query(sql, &[])
                .map_err(pg)?
                .iter()
                .map(|r| {
                    Ok(Checkpoint {
                        seq: r.try_get::<_, i64>(0).map_err(pg)? as u64,
                        hash: r.try_get(1).map_err(pg)?,
                        at: r.try_get(2).map_err(pg)?,
                        mac: r.try_get(3).map_err(pg)?,
                    })
                })
                .collect()
        })
    }

    fn edges(&self, sql: &str, id: &str) -> CoreResult<Vec<DerivationEdge>> {
        if nul(id) {
            return Ok(vec![]);
        }
        self.read(|db| {
            db.query(sql, &[&id])
                .map_err(pg)?
                .iter()
                .map(|r| {
                    let rel: String = r.try_get(2).map_err(pg)?;
                    let store: String = r.try_get(3).map_err(pg)?;
                    Ok(DerivationEdge {
                        parent: r.try_get(0).map_err(pg)?,
                        child: r.try_get(1).map_err(pg)?,
                        relation: Relation::parse(&rel)
                            .ok_or_else(|| be(format!("relation {rel}")))?,
                        child_store: ChildStore::parse(&store)
                            .ok_or_else(|| be(format!("child store {store}")))?,
                    })
                })
                .collect()
        })
    }
}

/// Appends one audit event inside `db`'s transaction (which holds the write lock), chaining it
/// to the last one (keyed with `key`).
pub(crate) fn append_audit<C: GenericClient>(
    db: &mut Db<'_, C>,
    draft: AuditDraft,
    key: Option<&AuditKey>,
) -> CoreResult<AuditEvent> {
    draft.refuse_nul()?;
    let last = db
        .query_opt("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1", &[])
        .map_err(pg)?;
    let (seq, prev) = match last {
        Some(r) => (r.get::<_, i64>(0) as u64 + 1, r.get::<_, String>(1)),
        None => (1, GENESIS_HASH.to_string()),
    };
    let ev = AuditEvent::seal(seq, Utc::now(), draft, prev, key);
    db.execute(
        "INSERT INTO audit (seq, at, actor, tenant, action, asset_id, before_hash, after_hash,
            reason, prev_hash, hash, keyed)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        &[
            &(ev.seq as i64),
            &micros(&ev.at),
            &ev.draft.actor,
            &ev.draft.tenant,
            &ev.draft.action,
            &ev.draft.asset_id,
            &ev.draft.before_hash,
            &ev.draft.after_hash,
            &ev.draft.reason,
            &ev.prev_hash,
            &ev.hash,
            &ev.keyed,
        ],
    )
    .map_err(pg)?;
    Ok(ev)
}

/// The 32-bit id of the transaction `db` runs in (it has one: it wrote).
pub(crate) fn current_xid<C: GenericClient>(db: &mut Db<'_, C>) -> CoreResult<u32> {
    let full: String = db
        .query_one("SELECT pg_current_xact_id()::text", &[])
        .map_err(pg)?
        .get(0);
    let full: u64 = full.parse().map_err(be)?;
    Ok(full as u32)
}

fn put_version<C: GenericClient>(db: &mut Db<'_, C>, rec: &AssetRecord) -> CoreResult<()> {
    let m = &rec.meta;
    m.validate()?;
    refuse_nul([
        ("id", Some(m.id.as_str())),
        ("owner", Some(m.owner.as_str())),
        ("content_hash", Some(m.content_hash.as_str())),
        ("lookup_key", rec.lookup_key.as_deref()),
    ])?;
    let head: Option<i64> = db
        .query_one("SELECT MAX(version) FROM assets WHERE id = $1", &[&m.id])
        .map_err(pg)?
        .get(0);
    let expected = head.map_or(1, |h| h + 1);
    if version_i64(m.version) != expected {
        return Err(CoreError::Conflict(format!(
            "asset {} version {} cannot be written: next version is {expected}",
            m.id, m.version
        )));
    }
    db.execute(
        "UPDATE assets SET is_head = false WHERE id = $1 AND is_head",
        &[&m.id],
    )
    .map_err(pg)?;
    db.execute(
        "INSERT INTO assets (id, version, kind, tenant, scope_key, owner, status, lookup_key,
            content_hash, created_at, expires_at, retain_until, is_head, meta, body)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, true, $13, $14)",
        &[
            &m.id,
            &version_i64(m.version),
            &m.kind.as_str(),
            &m.scope.tenant,
            &m.scope.key(),
            &m.owner,
            &m.status.as_str(),
            &rec.lookup_key,
            &m.content_hash,
            &micros(&m.created_at),
            &m.expires_at.as_ref().map(micros),
            &m.retain_until.as_ref().map(micros),
            &Json(m),
            &rec.body,
        ],
    )
    .map_err(conflict)?;
    Ok(())
}

fn set_status<C: GenericClient>(
    db: &mut Db<'_, C>,
    id: &str,
    version: Option<u32>,
    status: AssetStatus,
    expect: Option<AssetStatus>,
) -> CoreResult<()> {
    if nul(id) {
        return Err(CoreError::NotFound(format!("asset {id}")));
    }
    let row = match version {
        Some(v) => db.query_opt(
            "SELECT version, status FROM assets WHERE id = $1 AND version = $2",
            &[&id, &version_i64(v)],
        ),
        None => db.query_opt(
            "SELECT version, status FROM assets WHERE id = $1 AND is_head",
            &[&id],
        ),
    }
    .map_err(pg)?;
    let row = row.ok_or_else(|| CoreError::NotFound(format!("asset {id}")))?;
    let (v, cur): (i64, String) = (row.get(0), row.get(1));
    if let Some(e) = expect
        && e.as_str() != cur
    {
        return Err(CoreError::Conflict(format!(
            "asset {id} is {cur}, expected {}",
            e.as_str()
        )));
    }
    db.execute(
        "UPDATE assets SET status = $3 WHERE id = $1 AND version = $2",
        &[&id, &v, &status.as_str()],
    )
    .map_err(pg)?;
    Ok(())
}

impl AssetStore for PgStore {
    fn commit(&self, ops: Vec<WriteOp>) -> CoreResult<Vec<AuditEvent>> {
        crate::pool::off_runtime(|| {
            let key = self.audit_key.clone();
            self.write(|db| {
                let mut events = vec![];
                let mut changed: Vec<String> = vec![];
                let now = micros(&Utc::now());
                for op in ops {
                    match op {
                        WriteOp::PutVersion(rec) => {
                            put_version(db, &rec)?;
                            changed.push(rec.meta.id.clone());
                        }
                        WriteOp::SetStatus {
                            id,
                            version,
                            status,
                            expect,
                        } => {
                            set_status(db, &id, version, status, expect)?;
                            changed.push(id);
                        }
                        WriteOp::AddEdge(e) => {
                            refuse_nul([
                                ("edge.parent", Some(e.parent.as_str())),
                                ("edge.child", Some(e.child.as_str())),
                            ])?;
                            db.execute(
                                "INSERT INTO derivation (parent, child, relation, child_store, created_at)
                                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                                &[
                                    &e.parent,
                                    &e.child,
                                    &e.relation.as_str(),
                                    &e.child_store.as_str(),
                                    &now,
                                ],
                            )
                            .map_err(pg)?;
                        }
                        WriteOp::Audit(d) => events.push(append_audit(db, d, key.as_ref())?),
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
                            db.execute(
                                "INSERT INTO idempotency (tenant, key, request_hash, response, created_at)
                                 VALUES ($1, $2, $3, $4, $5)",
                                &[&tenant, &key, &request_hash, &response, &now],
                            )
                            .map_err(conflict)?;
                        }
                    }
                }
                let ids: Vec<&str> = changed.iter().map(String::as_str).collect();
                self.log_changes(db, &ids)?;
                Ok(events)
            })
        })
    }

    fn get(&self, id: &str) -> CoreResult<Option<AssetRecord>> {
        crate::pool::off_runtime(|| {
            if nul(id) {
                return Ok(None);
            }
            let sql = format!("SELECT {ASSET_COLS} FROM assets WHERE id = $1 AND is_head");
            self.read(|db| {
                db.query_opt(&sql, &[&id])
                    .map_err(pg)?
                    .as_ref()
                    .map(row_to_record)
                    .transpose()
            })
        })
    }

    fn get_version(&self, id: &str, version: u32) -> CoreResult<Option<AssetRecord>> {
        crate::pool::off_runtime(|| {
            if nul(id) {
                return Ok(None);
            }
            let sql = format!("SELECT {ASSET_COLS} FROM assets WHERE id = $1 AND version = $2");
            self.read(|db| {
                db.query_opt(&sql, &[&id, &version_i64(version)])
                    .map_err(pg)?
                    .as_ref()
                    .map(row_to_record)
                    .transpose()
            })
        })
    }

    fn history(&self, id: &str) -> CoreResult<Vec<AssetRecord>> {
        crate::pool::off_runtime(|| {
            if nul(id) {
                return Ok(vec![]);
            }
            let sql = format!("SELECT {ASSET_COLS} FROM assets WHERE id = $1 ORDER BY version");
            self.read(|db| {
                db.query(&sql, &[&id])
                    .map_err(pg)?
                    .iter()
                    .map(row_to_record)
                    .collect()
            })
        })
    }

    fn find(&self, q: &AssetQuery) -> CoreResult<Vec<AssetRecord>> {
        crate::pool::off_runtime(|| {
            let equal_to_nul = [&q.tenant, &q.lookup_key, &q.content_hash, &q.owner]
                .iter()
                .any(|v| v.as_deref().is_some_and(nul));
            if equal_to_nul {
                return Ok(vec![]);
            }
            let mut sql = format!("SELECT {ASSET_COLS} FROM assets WHERE true");
            let mut args: Vec<Box<dyn ToSql + Sync>> = vec![];
            let mut arg = |v: Box<dyn ToSql + Sync>| {
                args.push(v);
                format!("${}", args.len())
            };
            if q.heads_only {
                sql.push_str(" AND is_head");
            }
            if let Some(k) = q.kind {
                sql.push_str(&format!(" AND kind = {}", arg(Box::new(k.as_str()))));
            }
            if let Some(t) = &q.tenant {
                sql.push_str(&format!(" AND tenant = {}", arg(Box::new(t.clone()))));
            }
            if let Some(l) = &q.lookup_key {
                sql.push_str(&format!(" AND lookup_key = {}", arg(Box::new(l.clone()))));
            }
            if let Some(h) = &q.content_hash {
                sql.push_str(&format!(" AND content_hash = {}", arg(Box::new(h.clone()))));
            }
            if let Some(o) = &q.owner {
                sql.push_str(&format!(" AND owner = {}", arg(Box::new(o.clone()))));
            }
            if let Some(c) = &q.created_since {
                sql.push_str(&format!(" AND created_at >= {}", arg(Box::new(micros(c)))));
            }
            if let Some(e) = &q.expires_before {
                sql.push_str(&format!(" AND expires_at <= {}", arg(Box::new(micros(e)))));
            }
            if let Some(e) = &q.retain_before {
                sql.push_str(&format!(
                    " AND retain_until <= {}",
                    arg(Box::new(micros(e)))
                ));
            }
            if let Some(c) = &q.created_before {
                sql.push_str(&format!(" AND created_at < {}", arg(Box::new(micros(c)))));
            }
            if let Some((at, id, version)) = &q.after {
                // A cursor id with a NUL: no stored id starts with its text up to the NUL and goes
                // on past it, so "after it" is "after every version of that prefix".
                let (id, version) = match id.split_once('\0') {
                    Some((prefix, _)) => (prefix.to_string(), i64::from(u32::MAX) + 1),
                    None => (id.clone(), version_i64(*version)),
                };
                let a = arg(Box::new(micros(at)));
                let b = arg(Box::new(id));
                let c = arg(Box::new(version));
                sql.push_str(&format!(" AND (created_at, id, version) > ({a}, {b}, {c})"));
            }
            let mut any = |sql: &mut String, column: &str, mut vals: Vec<String>| {
                vals.retain(|v| !nul(v));
                if vals.is_empty() {
                    sql.push_str(" AND false");
                } else {
                    sql.push_str(&format!(" AND {column} = ANY({})", arg(Box::new(vals))));
                }
            };
            if let Some(s) = &q.scope_keys {
                any(&mut sql, "scope_key", s.clone());
            }
            if let Some(s) = &q.statuses {
                any(
                    &mut sql,
                    "status",
                    s.iter().map(|x| x.as_str().to_string()).collect(),
                );
            }
            if let Some(ids) = &q.ids {
                any(&mut sql, "id", ids.clone());
            }
            sql.push_str(" ORDER BY created_at, id, version");
            if let Some(l) = q.limit {
                let l = i64::try_from(l).unwrap_or(i64::MAX);
                sql.push_str(&format!(" LIMIT {}", arg(Box::new(l))));
            }
            let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|b| &**b).collect();
            self.read(|db| {
                db.query(&sql, &params)
                    .map_err(pg)?
                    .iter()
                    .map(row_to_record)
                    .collect()
            })
        })
    }

    fn edges_from(&self, parent: &str) -> CoreResult<Vec<DerivationEdge>> {
        crate::pool::off_runtime(|| {
            self.edges(
                "SELECT parent, child, relation, child_store FROM derivation
                  WHERE parent = $1 ORDER BY created_at, child",
                parent,
            )
        })
    }

    fn edges_to(&self, child: &str) -> CoreResult<Vec<DerivationEdge>> {
        crate::pool::off_runtime(|| {
            self.edges(
                "SELECT parent, child, relation, child_store FROM derivation
                  WHERE child = $1 ORDER BY created_at, child",
                child,
            )
        })
    }

    fn idempotent_response(
        &self,
        tenant: &str,
        key: &str,
    ) -> CoreResult<Option<(String, serde_json::Value)>> {
        crate::pool::off_runtime(|| {
            if nul(tenant) || nul(key) {
                return Ok(None);
            }
            self.read(|db| {
                let row = db
                    .query_opt(
                        "SELECT request_hash, response FROM idempotency WHERE tenant = $1 AND key = $2",
                        &[&tenant, &key],
                    )
                    .map_err(pg)?;
                row.map(|r| Ok((r.try_get(0).map_err(pg)?, r.try_get(1).map_err(pg)?)))
                    .transpose()
            })
        })
    }

    fn audit_events(&self, after: u64, limit: usize) -> CoreResult<Vec<AuditEvent>> {
        crate::pool::off_runtime(|| {
            let after = i64::try_from(after).unwrap_or(i64::MAX);
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            self.read(|db| {
                db.query(
                    "SELECT seq, at, actor, tenant, action, asset_id, before_hash, after_hash, reason,
                            prev_hash, hash, keyed
                       FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2",
                    &[&after, &limit],
                )
                .map_err(pg)?
                .iter()
                .map(|r| {
                    Ok(AuditEvent {
                        seq: r.try_get::<_, i64>(0).map_err(pg)? as u64,
                        at: r.try_get(1).map_err(pg)?,
                        draft: AuditDraft {
                            actor: r.try_get(2).map_err(pg)?,
                            tenant: r.try_get(3).map_err(pg)?,
                            action: r.try_get(4).map_err(pg)?,
                            asset_id: r.try_get(5).map_err(pg)?,
                            before_hash: r.try_get(6).map_err(pg)?,
                            after_hash: r.try_get(7).map_err(pg)?,
                            reason: r.try_get(8).map_err(pg)?,
                        },
                        prev_hash: r.try_get(9).map_err(pg)?,
                        hash: r.try_get(10).map_err(pg)?,
                        keyed: r.try_get(11).map_err(pg)?,
                    })
                })
                .collect()
            })
        })
    }

    /// Deletes every version and edge of `ids` and records `audit` in one transaction, then
    /// runs `VACUUM (INDEX_CLEANUP ON)` on `assets` and `derivation`.
    ///
    /// What survives, and until when: between the commit and the end of the VACUUM the deleted
    /// rows are dead tuples, still on their pages and in the indexes (invisible to every
    /// query). VACUUM can remove them only once no transaction in the database is older than
    /// the purge: the call waits up to `purge_wait` for those to end; one that outlasts it (or
    /// a replication slot or a prepared transaction, which the wait does not see) keeps them
    /// until it ends. After VACUUM no tuple, live or dead, and no index entry holds them, in the
    /// table or its TOAST table; but PostgreSQL does not zero freed space, so the bytes can
    /// remain in the free space of a data page until a later row overwrites it, and in the
    /// write-ahead log until its segments are recycled (and in WAL archives, replicas and
    /// backups for as long as those are kept). There is no equivalent of SQLite's
    /// `secure_delete`. If the wait runs out or VACUUM fails, the rows are deleted all the same
    /// and the call returns the error, so that a deletion run resumes and vacuums again.
    fn purge(&self, ids: &[String], audit: AuditDraft) -> CoreResult<PurgeCounts> {
        crate::pool::off_runtime(|| {
            let key = self.audit_key.clone();
            let counts = self.write(|db| {
                let mut counts = PurgeCounts::default();
                for id in ids.iter().filter(|id| !nul(id)) {
                    counts.versions += db
                        .execute("DELETE FROM assets WHERE id = $1", &[id])
                        .map_err(pg)?;
                    counts.edges += db
                        .execute(
                            "DELETE FROM derivation WHERE parent = $1 OR child = $1",
                            &[id],
                        )
                        .map_err(pg)?;
                    purge_task_rows(db, id)?;
                }
                append_audit(db, audit, key.as_ref())?;
                let logged: Vec<&str> =
                    ids.iter().map(String::as_str).filter(|i| !nul(i)).collect();
                self.log_changes(db, &logged)?;
                Ok((counts, current_xid(db)?))
            })?;
            self.vacuum_after(
                counts.1,
                "assets, derivation, task_events, task_artifacts, task_marks",
            )?;
            Ok(counts.0)
        })
    }

    fn checkpoint_audit(&self) -> CoreResult<Option<Checkpoint>> {
        crate::pool::off_runtime(|| {
            let Some(key) = self.audit_key.clone() else {
                return self.latest_checkpoint();
            };
            self.write(|db| {
                let head = db
                    .query_opt("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1", &[])
                    .map_err(pg)?;
                let Some(head) = head else { return Ok(()) };
                let (seq, hash): (i64, String) = (head.get(0), head.get(1));
                let last: Option<i64> = db
                    .query_one("SELECT MAX(seq) FROM audit_checkpoints", &[])
                    .map_err(pg)?
                    .get(0);
                if last != Some(seq) {
                    let cp = Checkpoint::sign(&key, seq as u64, &hash, micros(&Utc::now()));
                    db.execute(
                        "INSERT INTO audit_checkpoints (seq, hash, at, mac) VALUES ($1, $2, $3, $4)",
                        &[&seq, &cp.hash, &cp.at, &cp.mac],
                    )
                    .map_err(pg)?;
                }
                Ok(())
            })?;
            self.latest_checkpoint()
        })
    }

    fn audit_checkpoints(&self) -> CoreResult<Vec<Checkpoint>> {
        crate::pool::off_runtime(|| {
            self.checkpoints("SELECT seq, hash, at, mac FROM audit_checkpoints ORDER BY seq")
        })
    }

    /// Deletes the versions of `id` below `version` and records `audit` in one transaction,
    /// then runs `VACUUM (INDEX_CLEANUP ON)` on `assets`; what survives until then, and after, is as for
    /// [`purge`](AssetStore::purge).
    fn purge_versions_before(&self, id: &str, version: u32, audit: AuditDraft) -> CoreResult<u64> {
        crate::pool::off_runtime(|| {
            let key = self.audit_key.clone();
            let n = self.write(|db| {
                let n = if nul(id) {
                    0
                } else {
                    db.execute(
                        "DELETE FROM assets WHERE id = $1 AND version < $2",
                        &[&id, &version_i64(version)],
                    )
                    .map_err(pg)?
                };
                append_audit(db, audit, key.as_ref())?;
                if !nul(id) {
                    self.log_changes(db, &[id])?;
                }
                Ok((n, current_xid(db)?))
            })?;
            self.vacuum_after(n.1, "assets")?;
            Ok(n.0)
        })
    }

    fn purge_method(&self) -> Option<&'static str> {
        Some("postgres: rows deleted, then VACUUM (INDEX_CLEANUP ON) of the touched tables")
    }
}

const KEY_COLS: &str = "id, key_hash, tenant, user_name, groups, roles, created_at, revoked_at,
    platform, projects, clearance, purposes";

fn row_to_key(r: &Row) -> CoreResult<ApiKeyRecord> {
    let Json(groups): Json<Vec<String>> = r.try_get(4).map_err(pg)?;
    let Json(roles): Json<Vec<Role>> = r.try_get(5).map_err(pg)?;
    let Json(projects): Json<Vec<String>> = r.try_get(9).map_err(pg)?;
    let clearance: String = r.try_get(10).map_err(pg)?;
    let Json(purposes): Json<Vec<String>> = r.try_get(11).map_err(pg)?;
    Ok(ApiKeyRecord {
        id: r.try_get(0).map_err(pg)?,
        key_hash: r.try_get(1).map_err(pg)?,
        tenant: r.try_get(2).map_err(pg)?,
        user: r.try_get(3).map_err(pg)?,
        groups,
        roles,
        platform: r.try_get(8).map_err(pg)?,
        projects,
        purposes,
        clearance: Sensitivity::parse(&clearance)
            .ok_or_else(|| be(format!("clearance {clearance:?}")))?,
        created_at: r.try_get(6).map_err(pg)?,
        revoked_at: r.try_get(7).map_err(pg)?,
    })
}

impl KeyStore for PgStore {
    fn create_key(&self, rec: &ApiKeyRecord) -> CoreResult<()> {
        crate::pool::off_runtime(|| {
            refuse_nul([
                ("key.id", Some(rec.id.as_str())),
                ("key.key_hash", Some(rec.key_hash.as_str())),
                ("key.tenant", Some(rec.tenant.as_str())),
                ("key.user", Some(rec.user.as_str())),
            ])?;
            let key = self.audit_key.clone();
            self.write(|db| {
                db.execute(
                    "INSERT INTO api_keys (id, key_hash, tenant, user_name, groups, roles, created_at,
                        revoked_at, platform, projects, clearance, purposes)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, $8, $9, $10, $11)",
                    &[
                        &rec.id,
                        &rec.key_hash,
                        &rec.tenant,
                        &rec.user,
                        &Json(&rec.groups),
                        &Json(&rec.roles),
                        &micros(&rec.created_at),
                        &rec.platform,
                        &Json(&rec.projects),
                        &rec.clearance.as_str(),
                        &Json(&rec.purposes),
                    ],
                )
                .map_err(conflict)?;
                append_audit(
                    db,
                    AuditDraft::new("admin", AuditAction::KeyCreate)
                        .tenant(rec.tenant.clone())
                        .asset(rec.id.clone())
                        .hashes(None, Some(rec.key_hash.clone())),
                    key.as_ref(),
                )?;
                Ok(())
            })
        })
    }

    fn find_key(&self, key_hash: &str) -> CoreResult<Option<ApiKeyRecord>> {
        crate::pool::off_runtime(|| {
            if nul(key_hash) {
                return Ok(None);
            }
            let sql = format!("SELECT {KEY_COLS} FROM api_keys WHERE key_hash = $1");
            self.read(|db| {
                db.query_opt(&sql, &[&key_hash])
                    .map_err(pg)?
                    .as_ref()
                    .map(row_to_key)
                    .transpose()
            })
        })
    }

    fn list_keys(&self, tenant: Option<&str>) -> CoreResult<Vec<ApiKeyRecord>> {
        crate::pool::off_runtime(|| {
            if tenant.is_some_and(nul) {
                return Ok(vec![]);
            }
            let sql = format!(
                "SELECT {KEY_COLS} FROM api_keys WHERE $1::text IS NULL OR tenant = $1
                  ORDER BY created_at"
            );
            self.read(|db| {
                db.query(&sql, &[&tenant])
                    .map_err(pg)?
                    .iter()
                    .map(row_to_key)
                    .collect()
            })
        })
    }

    fn revoke_key(&self, id: &str, actor: &str) -> CoreResult<bool> {
        crate::pool::off_runtime(|| {
            if nul(id) {
                return Ok(false);
            }
            let key = self.audit_key.clone();
            self.write(|db| {
                let row = db
                    .query_opt(
                        "SELECT tenant FROM api_keys WHERE id = $1 AND revoked_at IS NULL",
                        &[&id],
                    )
                    .map_err(pg)?;
                let Some(row) = row else { return Ok(false) };
                let tenant: String = row.get(0);
                db.execute(
                    "UPDATE api_keys SET revoked_at = $2 WHERE id = $1",
                    &[&id, &micros(&Utc::now())],
                )
                .map_err(pg)?;
                append_audit(
                    db,
                    AuditDraft::new(actor, AuditAction::KeyRevoke)
                        .tenant(tenant)
                        .asset(id),
                    key.as_ref(),
                )?;
                Ok(true)
            })
        })
    }
}

impl ReceiptStore for PgStore {
    fn put_receipt(&self, r: &Receipt) -> CoreResult<()> {
        crate::pool::off_runtime(|| {
            refuse_nul([
                ("receipt.id", Some(r.id.as_str())),
                ("receipt.tenant", r.tenant.as_deref()),
            ])?;
            let status = match r.status {
                ReceiptStatus::InProgress => "in_progress",
                ReceiptStatus::Completed => "completed",
            };
            self.write(|db| {
                db.execute(
                    "INSERT INTO receipts (id, tenant, status, created_at, updated_at, receipt)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (id) DO UPDATE
                        SET status = EXCLUDED.status, updated_at = EXCLUDED.updated_at,
                            receipt = EXCLUDED.receipt",
                    &[
                        &r.id,
                        &r.tenant,
                        &status,
                        &micros(&r.started_at),
                        &micros(&r.updated_at),
                        &Json(r),
                    ],
                )
                .map_err(pg)?;
                Ok(())
            })
        })
    }

    fn get_receipt(&self, id: &str) -> CoreResult<Option<Receipt>> {
        crate::pool::off_runtime(|| {
            if nul(id) {
                return Ok(None);
            }
            self.read(|db| {
                let row = db
                    .query_opt("SELECT receipt FROM receipts WHERE id = $1", &[&id])
                    .map_err(pg)?;
                row.map(|r| Ok(r.try_get::<_, Json<Receipt>>(0).map_err(pg)?.0))
                    .transpose()
            })
        })
    }

    fn unfinished_receipts(&self) -> CoreResult<Vec<Receipt>> {
        crate::pool::off_runtime(|| {
            self.read(|db| {
                db.query(
                    "SELECT receipt FROM receipts WHERE status = 'in_progress' ORDER BY created_at",
                    &[],
                )
                .map_err(pg)?
                .iter()
                .map(|r| Ok(r.try_get::<_, Json<Receipt>>(0).map_err(pg)?.0))
                .collect()
            })
        })
    }

    fn recent_receipts(&self, tenant: Option<&str>, limit: usize) -> CoreResult<Vec<Receipt>> {
        crate::pool::off_runtime(|| {
            if tenant.is_some_and(nul) {
                return Ok(vec![]);
            }
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            self.read(|db| {
                db.query(
                    "SELECT receipt FROM receipts WHERE tenant IS NOT DISTINCT FROM $1
                     ORDER BY created_at DESC, id DESC LIMIT $2",
                    &[&tenant, &limit],
                )
                .map_err(pg)?
                .iter()
                .map(|r| Ok(r.try_get::<_, Json<Receipt>>(0).map_err(pg)?.0))
                .collect()
            })
        })
    }
}

/// Deletes a task's log inside a purge's transaction; returns the rows removed.
fn purge_task_rows<C: GenericClient>(db: &mut Db<'_, C>, task: &str) -> CoreResult<u64> {
    let mut n = 0;
    for sql in [
        "DELETE FROM task_events WHERE task = $1",
        "DELETE FROM task_artifacts WHERE task = $1",
        "DELETE FROM task_marks WHERE task = $1",
    ] {
        n += db.execute(sql, &[&task]).map_err(pg)?;
    }
    Ok(n)
}
