//! For tests that need a Qdrant server: where it is, and a collection prefix per test index.
//!
//! A test reads the server's gRPC URL from `REGISTRY_TEST_QDRANT_URL` (e.g.
//! `http://127.0.0.1:6334`). Without it the test says on stderr that it skipped, naming itself,
//! and returns: no Qdrant server is assumed on a developer's machine or in CI.

use std::sync::atomic::{AtomicU64, Ordering};

/// The variable holding the test server's gRPC URL.
pub const URL_VAR: &str = "REGISTRY_TEST_QDRANT_URL";
/// Optional API key for the test server.
pub const API_KEY_VAR: &str = "REGISTRY_TEST_QDRANT_API_KEY";

/// The test server's URL, or `None` (said on stderr with the test's name) when none is set.
pub fn test_qdrant_url(test: &str) -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!("{test}: skipped, {URL_VAR} is not set (no Qdrant server)");
            None
        }
    }
}

/// The test server's API key, if the run set one.
pub fn test_qdrant_api_key() -> Option<String> {
    std::env::var(API_KEY_VAR).ok().filter(|k| !k.is_empty())
}

/// A collection prefix no other test index (in this process or another) uses.
pub fn unique_prefix() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000_000_000)
        .unwrap_or(0);
    format!(
        "hrtest_{}_{nanos}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
