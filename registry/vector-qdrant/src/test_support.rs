//! For tests that need a Qdrant server: where it is, and a collection prefix per test index.
//!
//! A test reads the server's gRPC URL from `REGISTRY_TEST_QDRANT_URL` (e.g.
//! `http://127.0.0.1:6334`; `scripts/qdrant-test.sh` starts a throw-away server and sets it).
//! Without it the test says on stderr that it skipped, naming itself, and returns, unless
//! `REGISTRY_REQUIRE_QDRANT=1` (CI), where a skip is a failure.

use std::sync::atomic::{AtomicU64, Ordering};

/// The variable holding the test server's gRPC URL.
pub const URL_VAR: &str = "REGISTRY_TEST_QDRANT_URL";
/// `1` makes a Qdrant test that finds no server fail instead of skipping.
pub const REQUIRE_VAR: &str = "REGISTRY_REQUIRE_QDRANT";
/// The test server's REST API (`http://127.0.0.1:6333`), for tests that ask Qdrant directly.
pub const HTTP_VAR: &str = "REGISTRY_TEST_QDRANT_HTTP";
/// The test server's storage directory, for tests that scan its files.
pub const STORAGE_VAR: &str = "REGISTRY_TEST_QDRANT_STORAGE";
/// Optional API key for the test server.
pub const API_KEY_VAR: &str = "REGISTRY_TEST_QDRANT_API_KEY";

/// The test server's URL, or `None` (said on stderr with the test's name) when none is set.
///
/// # Panics
/// When none is set and `REGISTRY_REQUIRE_QDRANT=1`: the run promised a server.
pub fn test_qdrant_url(test: &str) -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            skip(test, &format!("{URL_VAR} is not set"));
            None
        }
    }
}

/// Says that `test` skipped for want of a server (`why`), or panics under
/// `REGISTRY_REQUIRE_QDRANT=1`.
pub fn skip(test: &str, why: &str) {
    assert!(
        std::env::var(REQUIRE_VAR).as_deref() != Ok("1"),
        "{test}: no Qdrant ({why}) and {REQUIRE_VAR}=1; run it under scripts/qdrant-test.sh"
    );
    eprintln!("{test}: skipped: no Qdrant ({why})");
}

/// The test server's REST API URL (`REGISTRY_TEST_QDRANT_HTTP`), when the run set one.
pub fn test_qdrant_http() -> Option<String> {
    std::env::var(HTTP_VAR).ok().filter(|u| !u.is_empty())
}

/// The test server's storage directory (`REGISTRY_TEST_QDRANT_STORAGE`), when the run set one.
pub fn test_qdrant_storage() -> Option<std::path::PathBuf> {
    std::env::var_os(STORAGE_VAR)
        .filter(|d| !d.is_empty())
        .map(Into::into)
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
