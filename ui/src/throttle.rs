//! Sign-in throttling: failed sign-ins are counted per client address (an IPv6 client by its
//! /64) in a fixed window; a client over its budget is answered 429 `TOO_MANY_REQUESTS` before
//! its key is looked at, until the window ends. Keys are never locked: another client signs in
//! with any key, and a good sign-in does not reset the count (a key of one's own would
//! otherwise buy more guesses).
//!
//! The address is the TCP peer: behind a reverse proxy every client shares the proxy's budget.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Failed sign-ins one client may make per [`WINDOW`].
pub const FAILED_SIGN_INS: u32 = 10;
/// The window failures are counted in.
pub const WINDOW: Duration = Duration::from_secs(5 * 60);
/// Most clients tracked at once; the oldest windows go first.
const MAX_CLIENTS: usize = 100_000;

/// Where a request comes from, as the throttle counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Client(Option<IpAddr>);

impl Client {
    pub fn new(addr: Option<IpAddr>) -> Client {
        Client(addr.map(|a| match a {
            IpAddr::V4(_) => a,
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let mut o = v6.octets();
                    o[8..].fill(0);
                    IpAddr::V6(o.into())
                }
            },
        }))
    }
}

#[derive(Debug, Default)]
pub struct Throttle {
    failures: Mutex<HashMap<Client, (Instant, u32)>>,
}

impl Throttle {
    /// `Err(retry_after)` when `client` has used its failures for this window.
    pub fn check(&self, client: Client) -> Result<(), Duration> {
        let now = Instant::now();
        match self.failures.lock().get(&client) {
            Some((start, n)) if *n >= FAILED_SIGN_INS && now < *start + WINDOW => {
                Err(*start + WINDOW - now)
            }
            _ => Ok(()),
        }
    }

    /// Counts a failed sign-in of `client`.
    pub fn failed(&self, client: Client) {
        let now = Instant::now();
        let mut t = self.failures.lock();
        if t.len() >= MAX_CLIENTS && !t.contains_key(&client) {
            t.retain(|_, (start, _)| now < *start + WINDOW);
            if t.len() >= MAX_CLIENTS
                && let Some(oldest) = t.iter().min_by_key(|(_, (s, _))| *s).map(|(c, _)| *c)
            {
                t.remove(&oldest);
            }
        }
        let e = t.entry(client).or_insert((now, 0));
        if now >= e.0 + WINDOW {
            *e = (now, 0);
        }
        e.1 += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_over_its_failures_waits_and_others_do_not() {
        let t = Throttle::default();
        let a = Client::new(Some("10.0.0.1".parse().unwrap()));
        let b = Client::new(Some("10.0.0.2".parse().unwrap()));
        for _ in 0..FAILED_SIGN_INS {
            assert!(t.check(a).is_ok());
            t.failed(a);
        }
        assert!(t.check(a).is_err());
        assert!(t.check(b).is_ok());
        // One IPv6 client is its /64.
        let v6 = |s: &str| Client::new(Some(s.parse().unwrap()));
        assert_eq!(v6("2001:db8::1"), v6("2001:db8::ffff"));
        assert_ne!(v6("2001:db8::1"), v6("2001:db8:0:1::1"));
    }
}
