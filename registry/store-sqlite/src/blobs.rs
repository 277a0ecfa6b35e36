//! Content-addressed blobs as files: `blobs/ab/cdef…`. Written to a temporary file, fsynced
//! and renamed, so a crash never leaves a half-written blob under its digest.

use std::io::Write;
use std::path::{Path, PathBuf};

use registry_core::hash::sha256_hex;
use registry_core::store::BlobStore;
use registry_core::{CoreError, CoreResult};

#[derive(Debug, Clone)]
pub struct FsBlobStore {
    root: PathBuf,
}

impl FsBlobStore {
    pub fn open(root: impl Into<PathBuf>) -> std::io::Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root)?;
        Ok(FsBlobStore { root })
    }

    fn path_of(&self, digest: &str) -> CoreResult<PathBuf> {
        if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(CoreError::validation(format!(
                "not a sha256 digest: {digest:?}"
            )));
        }
        let d = digest.to_ascii_lowercase();
        Ok(self.root.join(&d[..2]).join(&d[2..]))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

fn io(e: std::io::Error) -> CoreError {
    CoreError::backend("blobs", e)
}

impl FsBlobStore {
    /// Writes `bytes` under `key` (fsynced, renamed into place); a key present already is kept.
    fn put_keyed(&self, key: &str, bytes: &[u8]) -> CoreResult<String> {
        let digest = key.to_string();
        let path = self.path_of(&digest)?;
        if path.exists() {
            return Ok(digest);
        }
        let dir = path.parent().expect("blob path has a parent");
        std::fs::create_dir_all(dir).map_err(io)?;
        let tmp = dir.join(format!(".tmp-{}", uuid_like()));
        {
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
            f.write_all(bytes).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, &path).map_err(io)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(digest)
    }
}

impl BlobStore for FsBlobStore {
    fn put(&self, bytes: &[u8]) -> CoreResult<String> {
        let digest = sha256_hex(bytes);
        self.put_keyed(&digest, bytes)
    }

    fn put_in(&self, namespace: &str, bytes: &[u8]) -> CoreResult<String> {
        let key = registry_core::store::namespaced_blob_key(namespace, &sha256_hex(bytes));
        self.put_keyed(&key, bytes)
    }

    fn get(&self, digest: &str) -> CoreResult<Option<Vec<u8>>> {
        match std::fs::read(self.path_of(digest)?) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(e)),
        }
    }

    fn delete(&self, digest: &str) -> CoreResult<bool> {
        match std::fs::remove_file(self.path_of(digest)?) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io(e)),
        }
    }
}

fn uuid_like() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{n}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_delete_and_bad_digest() {
        let dir = tempfile::tempdir().unwrap();
        let s = FsBlobStore::open(dir.path()).unwrap();
        let d = s.put(b"hello").unwrap();
        assert_eq!(s.put(b"hello").unwrap(), d);
        assert_eq!(s.get(&d).unwrap().unwrap(), b"hello");
        assert!(s.delete(&d).unwrap());
        assert!(s.get(&d).unwrap().is_none());
        assert!(s.get("../../etc/passwd").is_err());
    }
}
