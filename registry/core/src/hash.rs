//! Content hashing: every asset, audit event and archive is identified by sha256.

use sha2::{Digest, Sha256};

/// Lower-case hex sha256 of `bytes`.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(bytes.as_ref()))
}

/// sha256 over a sequence of fields, each length-prefixed so that field boundaries cannot be
/// shifted to forge a collision (`"ab","c"` and `"a","bc"` hash differently).
pub fn sha256_fields<'a>(fields: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut h = Sha256::new();
    for f in fields {
        h.update((f.len() as u64).to_le_bytes());
        h.update(f);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_boundaries_matter() {
        assert_ne!(
            sha256_fields([b"ab".as_slice(), b"c".as_slice()]),
            sha256_fields([b"a".as_slice(), b"bc".as_slice()])
        );
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
