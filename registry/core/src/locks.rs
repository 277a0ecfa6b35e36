//! Locks by key: check-then-write sequences (the write gate's duplicate and conflict rules,
//! a skill's lifecycle steps) are serialised per key — a scope, a skill name — instead of by one
//! process-wide lock, so writes under different keys never wait for each other.

use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex};

/// A family of locks, one per key: a key is held by at most one [`KeyGuard`] at a time.
#[derive(Debug, Default, Clone)]
pub struct KeyedLocks {
    inner: Arc<(Mutex<HashSet<String>>, Condvar)>,
}

/// Holds one key until dropped.
#[derive(Debug)]
pub struct KeyGuard {
    locks: KeyedLocks,
    key: String,
}

impl KeyedLocks {
    pub fn new() -> Self {
        Self::default()
    }

    /// Blocks until no other guard holds `key`, then holds it.
    pub fn lock(&self, key: &str) -> KeyGuard {
        let (held, freed) = &*self.inner;
        let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
        while held.contains(key) {
            held = freed.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        held.insert(key.to_string());
        KeyGuard {
            locks: self.clone(),
            key: key.to_string(),
        }
    }
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        let (held, freed) = &*self.locks.inner;
        held.lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
        freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_per_key_and_other_keys_do_not_wait() {
        let locks = KeyedLocks::new();
        let a = locks.lock("a");
        // Another key is free while "a" is held.
        drop(locks.lock("b"));
        let l2 = locks.clone();
        let order = Arc::new(Mutex::new(vec![]));
        let o2 = order.clone();
        let t = std::thread::spawn(move || {
            let _g = l2.lock("a");
            o2.lock().unwrap().push("second");
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        order.lock().unwrap().push("first");
        drop(a);
        t.join().unwrap();
        assert_eq!(*order.lock().unwrap(), vec!["first", "second"]);
    }
}
