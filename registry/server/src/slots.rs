//! Per-key slots on shared resources that long-lived connections hold: MCP sessions and
//! `/v1/events` streams. The state owns them; the doors take and give back.

use std::collections::HashMap;
use std::sync::Arc;

/// Open MCP sessions per key (by the key's sha256), oldest first: a key that opens more than
/// the limit has its oldest session closed, so sessions stay bounded whatever a client does (and idle
/// ones expire on their own after the session manager's keep-alive).
///
/// Each session is also bound to the key that opened it (by the key's sha256): another key
/// presenting its id is answered as if the session did not exist.
#[derive(Debug)]
pub struct SessionLimits {
    max: usize,
    open: parking_lot::Mutex<std::collections::HashMap<String, std::collections::VecDeque<String>>>,
    /// Session id → sha256 of the key that opened it.
    owner: parking_lot::Mutex<std::collections::HashMap<String, String>>,
}

impl SessionLimits {
    pub fn new(max: usize) -> Self {
        SessionLimits {
            max: max.max(1),
            open: Default::default(),
            owner: Default::default(),
        }
    }

    /// Records a new session of `who`, opened with the key `key_hash`; returns the sessions to
    /// close to stay within the limit.
    pub(crate) fn opened(&self, who: &str, key_hash: &str, session: String) -> Vec<String> {
        let mut open = self.open.lock();
        let q = open.entry(who.to_string()).or_default();
        self.owner
            .lock()
            .insert(session.clone(), key_hash.to_string());
        q.push_back(session);
        let mut evict = vec![];
        while q.len() > self.max {
            if let Some(old) = q.pop_front() {
                self.owner.lock().remove(&old);
                evict.push(old);
            }
        }
        evict
    }

    pub(crate) fn closed(&self, who: &str, session: &str) {
        let mut open = self.open.lock();
        self.owner.lock().remove(session);
        if let Some(q) = open.get_mut(who) {
            q.retain(|s| s != session);
            if q.is_empty() {
                open.remove(who);
            }
        }
    }

    /// Whether `session` was opened with the key `key_hash`.
    pub(crate) fn bound_to(&self, session: &str, key_hash: &str) -> bool {
        self.owner
            .lock()
            .get(session)
            .is_some_and(|k| k == key_hash)
    }

    /// Sessions currently counted for `who`.
    pub fn count(&self, who: &str) -> usize {
        self.open.lock().get(who).map_or(0, |q| q.len())
    }
}

/// Open `/v1/events` streams per key (by the key's sha256).
#[derive(Debug, Default)]
pub struct StreamSlots(parking_lot::Mutex<HashMap<String, usize>>);

/// One open stream; gives its slot back when the stream ends.
pub(crate) struct Slot(Arc<StreamSlots>, String);

impl StreamSlots {
    pub(crate) fn take(self: &Arc<Self>, key: &str, max: usize) -> Option<Slot> {
        let mut open = self.0.lock();
        let n = open.entry(key.to_string()).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Slot(self.clone(), key.to_string()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.0.0.lock();
        if let Some(n) = open.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.1);
            }
        }
    }
}
