//! Content-addressed blobs (skill archives) in the `blobs` table (migration 0006): on a store
//! several nodes share, what one node stored every node serves. Same contract as the embedded
//! `FsBlobStore`: keys are lower-case sha256 hex, storing the same bytes twice is a no-op, a
//! blob is never half-written (one statement, committed or not).

use std::sync::Arc;

use registry_core::hash::sha256_hex;
use registry_core::store::{BlobStore, namespaced_blob_key};
use registry_core::{CoreError, CoreResult};

use crate::pool::off_runtime;
use crate::store::{PgStore, pg};

/// `digest` as a key, or a validation error (as the embedded store answers).
fn key_of(digest: &str) -> CoreResult<String> {
    if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(CoreError::validation(format!(
            "not a sha256 digest: {digest:?}"
        )));
    }
    Ok(digest.to_ascii_lowercase())
}

/// The blobs of a [`PgStore`]'s database, on the store's connections.
#[derive(Debug, Clone)]
pub struct PgBlobStore {
    store: Arc<PgStore>,
}

impl PgBlobStore {
    pub fn new(store: Arc<PgStore>) -> Self {
        PgBlobStore { store }
    }

    fn put_keyed(&self, key: &str, bytes: &[u8]) -> CoreResult<String> {
        off_runtime(|| {
            self.store.read(|db| {
                db.execute(
                    "INSERT INTO blobs (key, bytes) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                    &[&key, &bytes],
                )
                .map_err(pg)
            })?;
            Ok(key.to_string())
        })
    }
}

impl BlobStore for PgBlobStore {
    fn put(&self, bytes: &[u8]) -> CoreResult<String> {
        self.put_keyed(&sha256_hex(bytes), bytes)
    }

    fn put_in(&self, namespace: &str, bytes: &[u8]) -> CoreResult<String> {
        self.put_keyed(&namespaced_blob_key(namespace, &sha256_hex(bytes)), bytes)
    }

    fn get(&self, digest: &str) -> CoreResult<Option<Vec<u8>>> {
        let key = key_of(digest)?;
        off_runtime(|| {
            self.store.read(|db| {
                Ok(db
                    .query_opt("SELECT bytes FROM blobs WHERE key = $1", &[&key])
                    .map_err(pg)?
                    .map(|r| r.get(0)))
            })
        })
    }

    /// Deletes the row, then runs `VACUUM` on `blobs` as a purge does (see
    /// [`PgStore::purge`](registry_core::store::AssetStore::purge) for what may survive it).
    fn delete(&self, digest: &str) -> CoreResult<bool> {
        let key = key_of(digest)?;
        off_runtime(|| {
            let (n, xid) = self.store.write(|db| {
                let n = db
                    .execute("DELETE FROM blobs WHERE key = $1", &[&key])
                    .map_err(pg)?;
                Ok((n, crate::store::current_xid(db)?))
            })?;
            if n > 0 {
                self.store.vacuum_after(xid, "blobs")?;
            }
            Ok(n > 0)
        })
    }
}
