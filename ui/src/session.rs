//! Console sessions: an API key, given once on the sign-in form, is exchanged for a random
//! session id carried in an HttpOnly, SameSite=Strict cookie that expires. The server keeps,
//! per session, the key's sha256 (never the key) and a CSRF token; every request resolves the
//! key's principal again through the same lookup as the HTTP API, so a revoked key ends its
//! sessions at once.
//!
//! The table lives in this process's memory: a restart, or another replica, asks for a new
//! sign-in. The session id is stored hashed too, so a dump of the table opens nothing.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use parking_lot::Mutex;
use rand::RngCore;
use registry_core::hash::sha256_hex;

/// The session cookie's name.
pub const COOKIE: &str = "hr_console";
/// How long a session lives after sign-in (the cookie's `Max-Age` too).
pub const LIFETIME: Duration = Duration::from_secs(8 * 60 * 60);
/// Most sessions one key holds at once; its own oldest goes first. One key's sign-ins never
/// end another key's sessions.
pub const MAX_SESSIONS_PER_KEY: usize = 16;
/// Most sessions kept at once, over all keys. When the table is full (after expired sessions
/// go), a sign-in of a key that has none to give up is refused rather than ending another
/// key's session: 6,250 keys at their own cap would be needed to fill it.
pub const MAX_SESSIONS: usize = 100_000;

#[derive(Debug, Clone)]
pub struct Session {
    /// sha256 of the API key the session was opened with.
    pub key_hash: String,
    /// Sent back in every form; a POST without it is refused.
    pub csrf: String,
    pub expires: Instant,
}

#[derive(Debug, Default)]
pub struct Sessions {
    by_id_hash: Mutex<HashMap<String, Session>>,
}

fn random_token() -> String {
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The session table is full of other keys' sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

impl Sessions {
    /// Opens a session for a key already checked; returns the cookie value. A key at
    /// [`MAX_SESSIONS_PER_KEY`] gives up its own oldest session; only that key's sessions are
    /// ever evicted.
    pub fn open(&self, key_hash: String) -> Result<String, Full> {
        let id = random_token();
        let now = Instant::now();
        let mut t = self.by_id_hash.lock();
        t.retain(|_, s| s.expires > now);
        let mine: Vec<(&String, Instant)> = t
            .iter()
            .filter(|(_, s)| s.key_hash == key_hash)
            .map(|(k, s)| (k, s.expires))
            .collect();
        if mine.len() >= MAX_SESSIONS_PER_KEY || t.len() >= MAX_SESSIONS {
            let Some(oldest) = mine
                .iter()
                .min_by_key(|(_, e)| *e)
                .map(|(k, _)| (*k).clone())
            else {
                return Err(Full);
            };
            t.remove(&oldest);
        }
        t.insert(
            sha256_hex(&id),
            Session {
                key_hash,
                csrf: random_token(),
                expires: now + LIFETIME,
            },
        );
        Ok(id)
    }

    /// Live sessions of the key `key_hash`.
    pub fn count_for(&self, key_hash: &str) -> usize {
        let now = Instant::now();
        self.by_id_hash
            .lock()
            .values()
            .filter(|s| s.key_hash == key_hash && s.expires > now)
            .count()
    }

    /// The live session a cookie value names.
    pub fn get(&self, id: &str) -> Option<Session> {
        let h = sha256_hex(id);
        let mut t = self.by_id_hash.lock();
        match t.get(&h) {
            Some(s) if s.expires > Instant::now() => Some(s.clone()),
            Some(_) => {
                t.remove(&h);
                None
            }
            None => None,
        }
    }

    pub fn close(&self, id: &str) {
        self.by_id_hash.lock().remove(&sha256_hex(id));
    }
}

/// The session id in the request's cookies, if any.
pub fn cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `Set-Cookie` for a new session.
pub fn set_cookie(id: &str) -> String {
    format!(
        "{COOKIE}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}",
        LIFETIME.as_secs()
    )
}

/// `Set-Cookie` that removes the session cookie.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// Whether a state-changing request comes from this site: `Sec-Fetch-Site` (when the browser
/// sends it) is `same-origin` or `none`, and `Origin` (when sent) names the host the request
/// was addressed to.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let get = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    if let Some(site) = get("sec-fetch-site")
        && site != "same-origin"
        && site != "none"
    {
        return false;
    }
    match (get("origin"), get("host")) {
        (None, _) => true,
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, authority)| authority == host),
        (Some(_), None) => false,
    }
}

/// Compares two tokens in time that does not depend on where they differ.
pub fn tokens_match(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn cross_site_posts_are_told_apart_from_same_origin_ones() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080")])));
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("sec-fetch-site", "cross-site"),
        ])));
    }

    #[test]
    fn one_keys_sign_ins_evict_only_its_own_sessions() {
        let s = Sessions::default();
        let admin = s.open("admin".into()).unwrap();
        let first = s.open("reader".into()).unwrap();
        for _ in 0..MAX_SESSIONS_PER_KEY * 4 {
            s.open("reader".into()).unwrap();
        }
        assert_eq!(s.count_for("reader"), MAX_SESSIONS_PER_KEY);
        assert!(s.get(&first).is_none(), "the reader's oldest session went");
        assert_eq!(s.get(&admin).unwrap().key_hash, "admin");
    }

    #[test]
    fn a_session_is_found_by_its_cookie_until_closed() {
        let s = Sessions::default();
        let id = s.open("h".into()).unwrap();
        let h = headers(&[("cookie", &format!("a=b; {COOKIE}={id}"))]);
        assert_eq!(cookie_value(&h).as_deref(), Some(id.as_str()));
        assert_eq!(s.get(&id).unwrap().key_hash, "h");
        s.close(&id);
        assert!(s.get(&id).is_none());
        assert!(tokens_match("abc", "abc") && !tokens_match("abc", "abd"));
    }
}
