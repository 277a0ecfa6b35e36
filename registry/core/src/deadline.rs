//! Deadlines for blocking work: a request either answers with its outcome or is cancelled
//! before anything is committed.
//!
//! The caller that waits (the server, for an HTTP request or an MCP call) creates a
//! [`Deadline`] and runs the work inside [`Deadline::run`] on a blocking thread. The work calls
//! [`check`] between slow steps (embedding batches, loops over candidates) and every store
//! calls [`begin_commit`] before its first write. The two sides race through one atomic state:
//!
//! - `Running` → `Committed` (the work reached its first write before the deadline: from then
//!   on it finishes, and the waiter waits for its real outcome, so a write is never answered as
//!   timed out after it committed);
//! - `Running` → `Cancelled` (the waiter gave up first, or the work found the deadline past:
//!   the work stops at its next check or commit, and nothing is written).
//!
//! Work run without a deadline (jobs, the CLI, tests) is never cancelled.
//!
//! A deadline may also watch a [`Shutdown`]: once the server that created it stops taking
//! requests, uncommitted work stops at its next check, as if its deadline had passed, so a
//! long ingest never holds the process past a SIGTERM.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crate::error::{CoreError, CoreResult};

const RUNNING: u8 = 0;
const COMMITTED: u8 = 1;
const CANCELLED: u8 = 2;

/// A point in time after which uncommitted work is cancelled.
#[derive(Debug, Clone)]
pub struct Deadline {
    at: Instant,
    state: Arc<AtomicU8>,
    shutdown: Option<Shutdown>,
}

/// Set once, when a server begins to shut down; the deadlines it created watch it.
#[derive(Debug, Clone, Default)]
pub struct Shutdown(Arc<AtomicBool>);

impl Shutdown {
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// From now on, uncommitted work under a deadline watching this stops at its next check.
    pub fn begin(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn begun(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Deadline>> = const { RefCell::new(None) };
}

impl Deadline {
    pub fn at(at: Instant) -> Deadline {
        Deadline {
            at,
            state: Arc::new(AtomicU8::new(RUNNING)),
            shutdown: None,
        }
    }

    /// The same deadline, also reached when `shutdown` begins.
    pub fn with_shutdown(mut self, shutdown: &Shutdown) -> Deadline {
        self.shutdown = Some(shutdown.clone());
        self
    }

    fn passed(&self) -> bool {
        Instant::now() >= self.at || self.shutdown.as_ref().is_some_and(Shutdown::begun)
    }

    pub fn after(d: Duration) -> Deadline {
        Deadline::at(Instant::now() + d)
    }

    pub fn instant(&self) -> Instant {
        self.at
    }

    /// Time left (zero once passed).
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// Runs `f` with this deadline as the current thread's, restoring the previous one after.
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        struct Restore(Option<Deadline>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let prev = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = prev);
            }
        }
        let prev = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        let _restore = Restore(prev);
        f()
    }

    /// The waiter gives up: true if the work had not committed (it will write nothing), false
    /// if it already committed (wait for its outcome instead).
    pub fn cancel(&self) -> bool {
        match self
            .state
            .compare_exchange(RUNNING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(s) => s == CANCELLED,
        }
    }

    /// Whether the work has committed something.
    pub fn committed(&self) -> bool {
        self.state.load(Ordering::Acquire) == COMMITTED
    }

    fn expired_error(&self) -> CoreError {
        CoreError::DeadlineExceeded
    }

    fn check_now(&self) -> CoreResult<()> {
        match self.state.load(Ordering::Acquire) {
            COMMITTED => Ok(()),
            CANCELLED => Err(self.expired_error()),
            _ if self.passed() => {
                // Past the deadline and not committed: cancel, so the waiter answers the timeout.
                self.cancel();
                if self.committed() {
                    Ok(())
                } else {
                    Err(self.expired_error())
                }
            }
            _ => Ok(()),
        }
    }

    fn begin_commit_now(&self) -> CoreResult<()> {
        self.check_now()?;
        match self
            .state
            .compare_exchange(RUNNING, COMMITTED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(()),
            Err(COMMITTED) => Ok(()),
            Err(_) => Err(self.expired_error()),
        }
    }
}

/// Cancels a deadline's work when dropped (its waiter is gone: a client hung up, a future
/// was dropped), unless disarmed once the waiter has its answer.
pub struct CancelOnDrop(Option<Deadline>);

impl CancelOnDrop {
    pub fn new(d: Deadline) -> CancelOnDrop {
        CancelOnDrop(Some(d))
    }

    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            d.cancel();
        }
    }
}

/// Fails with [`CoreError::DeadlineExceeded`] when the current work's deadline has passed (or
/// its waiter gave up) and it has committed nothing yet. Without a deadline: always `Ok`.
pub fn check() -> CoreResult<()> {
    CURRENT.with(|c| c.borrow().as_ref().map_or(Ok(()), Deadline::check_now))
}

/// For work that commits in independent steps (the items of a batch): fails when the current
/// deadline has passed, the waiter gave up or the server is shutting down, even after an
/// earlier step committed. A step asks this before its own commit, so nothing is committed
/// after the deadline; the waiter, which waits for committed work, gets the steps' answers.
pub fn check_step() -> CoreResult<()> {
    CURRENT.with(|c| {
        c.borrow().as_ref().map_or(Ok(()), |d| {
            if d.passed() || d.state.load(Ordering::Acquire) == CANCELLED {
                Err(d.expired_error())
            } else {
                Ok(())
            }
        })
    })
}

/// Called by a store before its first write: from here on the work is committed and runs to
/// its end; fails instead when the deadline passed first.
pub fn begin_commit() -> CoreResult<()> {
    CURRENT.with(|c| {
        c.borrow()
            .as_ref()
            .map_or(Ok(()), Deadline::begin_commit_now)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_past_its_deadline_commits_nothing_and_committed_work_is_not_cancelled() {
        let d = Deadline::after(Duration::from_secs(60));
        assert!(d.run(begin_commit).is_ok());
        assert!(!d.cancel(), "a committed run cannot be cancelled");
        assert!(d.run(check).is_ok());

        let late = Deadline::at(Instant::now() - Duration::from_millis(1));
        assert!(matches!(
            late.run(begin_commit),
            Err(CoreError::DeadlineExceeded)
        ));
        assert!(late.cancel());

        let waiter_gave_up = Deadline::after(Duration::from_secs(60));
        assert!(waiter_gave_up.cancel());
        assert!(waiter_gave_up.run(check).is_err());
        assert!(waiter_gave_up.run(begin_commit).is_err());
        // A shutdown reaches uncommitted work only.
        let stop = Shutdown::new();
        let running = Deadline::after(Duration::from_secs(60)).with_shutdown(&stop);
        let committed = Deadline::after(Duration::from_secs(60)).with_shutdown(&stop);
        assert!(committed.run(begin_commit).is_ok());
        assert!(running.run(check).is_ok());
        stop.begin();
        assert!(running.run(check).is_err() && running.run(begin_commit).is_err());
        assert!(committed.run(check).is_ok());
        // A batch's later step does not commit past the deadline, even after an earlier one did.
        assert!(committed.run(check_step).is_err());
        // Outside any deadline nothing is ever cancelled.
        assert!(begin_commit().is_ok() && check().is_ok() && check_step().is_ok());
    }
}
