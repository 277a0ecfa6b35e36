//! A small, bounded connection pool. Each caller holds at most one connection at a time (no
//! store method asks for a second while it holds one), so the pool cannot deadlock on itself;
//! a caller that finds every connection busy waits up to `wait`, then fails.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use postgres::{Client, GenericClient, NoTls, Row, Statement, types::ToSql};

use crate::{StoreError, StoreResult};

/// Prepared statements kept per connection before the cache starts over.
const MAX_CACHED_STATEMENTS: usize = 256;

/// A connection idle longer than this is checked (one round trip) before it is lent out: the
/// server may have restarted or dropped it meanwhile.
const CHECK_AFTER_IDLE: Duration = Duration::from_secs(10);

/// One connection and the statements prepared on it.
pub(crate) struct Conn {
    pub client: Client,
    pub stmts: HashMap<String, Statement>,
    returned: Instant,
}

struct State {
    idle: Vec<Conn>,
    open: usize,
}

pub(crate) struct Pool {
    config: postgres::Config,
    max: usize,
    wait: Duration,
    state: Mutex<State>,
    freed: Condvar,
}

impl Pool {
    pub fn new(config: postgres::Config, max: usize, wait: Duration) -> Self {
        Pool {
            config,
            max: max.max(1),
            wait,
            state: Mutex::new(State {
                idle: vec![],
                open: 0,
            }),
            freed: Condvar::new(),
        }
    }

    /// A connection of its own, outside the pool (for a session-level lock held a long time).
    pub fn dedicated(&self) -> StoreResult<Client> {
        Ok(self.config.connect(NoTls)?)
    }

    /// A connection: an idle one, a new one while fewer than `max` are open, else the first one
    /// returned within `wait`.
    pub fn get(&self) -> StoreResult<Pooled<'_>> {
        let deadline = Instant::now() + self.wait;
        let mut st = self.state.lock();
        loop {
            if let Some(mut c) = st.idle.pop() {
                drop(st);
                let broken = c.client.is_closed()
                    || (c.returned.elapsed() > CHECK_AFTER_IDLE
                        && c.client.is_valid(Duration::from_secs(5)).is_err());
                if broken {
                    st = self.state.lock();
                    st.open -= 1;
                    continue;
                }
                c.returned = Instant::now();
                return Ok(Pooled {
                    pool: self,
                    conn: Some(c),
                });
            }
            if st.open < self.max {
                st.open += 1;
                drop(st);
                return match self.config.connect(NoTls) {
                    Ok(client) => Ok(Pooled {
                        pool: self,
                        conn: Some(Conn {
                            client,
                            stmts: HashMap::new(),
                            returned: Instant::now(),
                        }),
                    }),
                    Err(e) => {
                        self.state.lock().open -= 1;
                        self.freed.notify_one();
                        Err(e.into())
                    }
                };
            }
            if self.freed.wait_until(&mut st, deadline).timed_out() {
                return Err(StoreError::PoolTimeout(self.wait));
            }
        }
    }
}

/// A connection on loan; it goes back to the pool when dropped (or is closed and forgotten if
/// it broke).
pub(crate) struct Pooled<'p> {
    pool: &'p Pool,
    conn: Option<Conn>,
}

impl std::ops::Deref for Pooled<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn.as_ref().expect("present until drop")
    }
}

impl std::ops::DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        self.conn.as_mut().expect("present until drop")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        let Some(mut c) = self.conn.take() else {
            return;
        };
        c.returned = Instant::now();
        let mut st = self.pool.state.lock();
        if c.client.is_closed() {
            st.open -= 1;
        } else {
            st.idle.push(c);
        }
        drop(st);
        self.pool.freed.notify_one();
    }
}

/// A client or a transaction with the connection's statement cache: each SQL text is prepared
/// once per connection, then bound and executed in one round trip.
pub(crate) struct Db<'a, C: GenericClient> {
    pub c: &'a mut C,
    pub stmts: &'a mut HashMap<String, Statement>,
}

pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

impl<C: GenericClient> Db<'_, C> {
    fn stmt(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.stmts.get(sql) {
            return Ok(s.clone());
        }
        if self.stmts.len() >= MAX_CACHED_STATEMENTS {
            self.stmts.clear();
        }
        let s = self.c.prepare(sql)?;
        self.stmts.insert(sql.to_string(), s.clone());
        Ok(s)
    }

    pub fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, postgres::Error> {
        let s = self.stmt(sql)?;
        self.c.query(&s, params)
    }

    pub fn query_opt(
        &mut self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Option<Row>, postgres::Error> {
        let s = self.stmt(sql)?;
        self.c.query_opt(&s, params)
    }

    pub fn query_one(&mut self, sql: &str, params: Params<'_>) -> Result<Row, postgres::Error> {
        let s = self.stmt(sql)?;
        self.c.query_one(&s, params)
    }

    pub fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64, postgres::Error> {
        let s = self.stmt(sql)?;
        self.c.execute(&s, params)
    }
}

/// Runs `f`, which talks to PostgreSQL through the synchronous `postgres` client, where that
/// client may block: the client drives its connection with a runtime of its own, and tokio
/// refuses to start one on a thread that is driving async tasks. On a worker of a
/// multi-threaded runtime (an async handler, the end of an async `main` dropping the store) the
/// worker hands its tasks to another thread for the duration (`block_in_place`); on a blocking
/// thread (`spawn_blocking`) or outside any runtime, `f` simply runs. A current-thread runtime
/// cannot give its thread away: the registry never calls the store from one.
pub(crate) fn off_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl Drop for Pool {
    /// Closing a connection talks to the server too (see [`off_runtime`]).
    fn drop(&mut self) {
        let idle = std::mem::take(&mut self.state.get_mut().idle);
        off_runtime(|| drop(idle));
    }
}
