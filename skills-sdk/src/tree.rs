//! The canonical file tree of a skill and its content digest.
//!
//! Invariant: the digest depends only on (relative path, executable bit, content) of each
//! regular file. Paths are NFC, `/`-separated and sorted by their UTF-8 bytes; mtimes, owners,
//! permission bits other than "executable", directory entries and walk order do not count.
//!
//! The digest is `sha256` over this listing (format `v1`):
//!
//! ```text
//! harness-skill-tree-v1\n
//! <path> \0 <0|1> \0 <hex sha256 of content> \n      (one line per file, sorted)
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use unicode_normalization::UnicodeNormalization;

use crate::error::{SdkError, SdkResult};

/// First line of the canonical listing; a new listing format gets a new line.
pub const TREE_FORMAT: &str = "harness-skill-tree-v1";

/// Names skipped anywhere in a skill directory when packing or digesting: version-control
/// metadata, OS and editor litter, Python byte-code, and packed `.skill` archives (so packing
/// into the skill directory does not change the next digest).
pub const IGNORED_NAMES: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    ".bzr",
    "__pycache__",
    ".DS_Store",
    "Thumbs.db",
];
/// File-name suffixes skipped like [`IGNORED_NAMES`].
pub const IGNORED_SUFFIXES: &[&str] = &[".pyc", ".skill"];

pub fn is_ignored(name: &str) -> bool {
    IGNORED_NAMES.contains(&name) || IGNORED_SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// A sha256 over a canonical file tree, shown as `sha256:<hex>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TreeDigest(pub [u8; 32]);

impl fmt::Display for TreeDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", hex::encode(self.0))
    }
}

impl fmt::Debug for TreeDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for TreeDigest {
    type Err = SdkError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || SdkError::InvalidDigest(s.to_owned());
        let hex_part = s.strip_prefix("sha256:").ok_or_else(bad)?;
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut out).map_err(|_| bad())?;
        Ok(Self(out))
    }
}

impl Serialize for TreeDigest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TreeDigest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// One regular file of a canonical tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// Relative, `/`-separated, NFC.
    pub path: String,
    pub executable: bool,
    pub size: u64,
    #[serde(with = "hex_bytes")]
    pub sha256: [u8; 32],
}

mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
        let s = String::deserialize(d)?;
        let mut out = [0u8; 32];
        hex::decode_to_slice(&s, &mut out).map_err(serde::de::Error::custom)?;
        Ok(out)
    }
}

/// The files of a skill in canonical order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanonicalTree {
    files: Vec<FileRecord>,
}

impl CanonicalTree {
    /// Sorts `files` and refuses duplicate paths and paths used both as file and directory.
    pub fn new(mut files: Vec<FileRecord>) -> SdkResult<Self> {
        files.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        let mut seen = PathSet::default();
        for f in &files {
            seen.insert(&f.path)?;
        }
        Ok(Self { files })
    }

    pub fn files(&self) -> &[FileRecord] {
        &self.files
    }

    pub fn get(&self, path: &str) -> Option<&FileRecord> {
        self.files
            .binary_search_by(|f| f.path.as_bytes().cmp(path.as_bytes()))
            .ok()
            .map(|i| &self.files[i])
    }

    pub fn total_size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// The canonical listing the digest is taken over.
    pub fn listing(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + self.files.len() * 100);
        out.extend_from_slice(TREE_FORMAT.as_bytes());
        out.push(b'\n');
        for f in &self.files {
            out.extend_from_slice(f.path.as_bytes());
            out.push(0);
            out.push(if f.executable { b'1' } else { b'0' });
            out.push(0);
            out.extend_from_slice(hex::encode(f.sha256).as_bytes());
            out.push(b'\n');
        }
        out
    }

    pub fn digest(&self) -> TreeDigest {
        TreeDigest(Sha256::digest(self.listing()).into())
    }
}

/// Tracks files and the directories they imply, to refuse duplicates and file/dir clashes.
#[derive(Default)]
pub(crate) struct PathSet {
    files: BTreeSet<String>,
    dirs: BTreeSet<String>,
}

impl PathSet {
    pub(crate) fn insert(&mut self, path: &str) -> SdkResult<()> {
        if self.files.contains(path) {
            return Err(SdkError::DuplicatePath(path.to_owned()));
        }
        if self.dirs.contains(path) {
            return Err(SdkError::PathConflict(path.to_owned()));
        }
        for (i, _) in path.match_indices('/') {
            let dir = &path[..i];
            if self.files.contains(dir) {
                return Err(SdkError::PathConflict(dir.to_owned()));
            }
            self.dirs.insert(dir.to_owned());
        }
        self.files.insert(path.to_owned());
        Ok(())
    }

    /// Records a directory entry (from an archive); it only needs to not clash with a file.
    pub(crate) fn insert_dir(&mut self, path: &str) -> SdkResult<()> {
        if self.files.contains(path) {
            return Err(SdkError::PathConflict(path.to_owned()));
        }
        Ok(())
    }
}

/// Checks one raw relative path (from an archive) and returns its canonical form.
///
/// A leading `./` and a trailing `/` are dropped; `..`, absolute paths, empty or `.`
/// components, backslashes and control characters are refused.
pub fn canonical_path(raw: &str) -> SdkResult<String> {
    let mut p = raw;
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    let p = p.strip_suffix('/').unwrap_or(p);
    let bytes = p.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if p.starts_with('/') || p.starts_with('\\') || drive {
        return Err(SdkError::AbsolutePath(raw.to_owned()));
    }
    if p.split(['/', '\\']).any(|c| c == "..") {
        return Err(SdkError::PathTraversal(raw.to_owned()));
    }
    if p.is_empty()
        || p.contains('\\')
        || p.chars().any(char::is_control)
        || p.split('/').any(|c| c.is_empty() || c == ".")
    {
        return Err(SdkError::InvalidPath(raw.to_owned()));
    }
    Ok(p.nfc().collect())
}

/// A regular file found on disk: canonical path, absolute location, executable bit.
#[derive(Debug, Clone)]
pub(crate) struct DiskFile {
    pub path: String,
    pub abs: PathBuf,
    pub executable: bool,
    pub size: u64,
}

/// Walks `root`, skipping ignored names; refuses symlinks and special files.
pub(crate) fn walk_dir(root: &Path) -> SdkResult<Vec<DiskFile>> {
    let meta = fs::metadata(root).map_err(|e| SdkError::io(root, e))?;
    if !meta.is_dir() {
        return Err(SdkError::NotADirectory(root.to_owned()));
    }
    let mut out = Vec::new();
    walk_into(root, "", &mut out)?;
    Ok(out)
}

fn walk_into(dir: &Path, prefix: &str, out: &mut Vec<DiskFile>) -> SdkResult<()> {
    let entries = fs::read_dir(dir).map_err(|e| SdkError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| SdkError::io(dir, e))?;
        let abs = entry.path();
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(SdkError::NonUtf8Name(abs.display().to_string()));
        };
        if is_ignored(name) {
            continue;
        }
        let rel = format!("{prefix}{name}");
        let meta = fs::symlink_metadata(&abs).map_err(|e| SdkError::io(&abs, e))?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            return Err(SdkError::SymlinkInTree(abs));
        } else if ft.is_dir() {
            walk_into(&abs, &format!("{rel}/"), out)?;
        } else if ft.is_file() {
            let path = canonical_path(&rel)?;
            out.push(DiskFile {
                path,
                abs,
                executable: is_executable(&meta),
                size: meta.len(),
            });
        } else {
            return Err(SdkError::UnsupportedFileType(abs));
        }
    }
    Ok(())
}

#[cfg(unix)]
fn is_executable(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

/// Without Unix modes nothing is executable; such trees digest as if every file were `0644`.
#[cfg(not(unix))]
fn is_executable(_meta: &fs::Metadata) -> bool {
    false
}

pub(crate) fn hash_reader(mut r: impl Read) -> std::io::Result<([u8; 32], u64)> {
    let mut h = Sha256::new();
    let mut buf = [0u8; 64 * 1024];
    let mut n_total = 0u64;
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        n_total += n as u64;
    }
    Ok((h.finalize().into(), n_total))
}

/// The canonical tree of a skill directory on disk.
pub fn tree_of_dir(root: &Path) -> SdkResult<CanonicalTree> {
    let mut records = Vec::new();
    for f in walk_dir(root)? {
        let file = fs::File::open(&f.abs).map_err(|e| SdkError::io(&f.abs, e))?;
        let (sha256, size) = hash_reader(file).map_err(|e| SdkError::io(&f.abs, e))?;
        records.push(FileRecord {
            path: f.path,
            executable: f.executable,
            size,
            sha256,
        });
    }
    CanonicalTree::new(records)
}

/// Shorthand for `tree_of_dir(root)?.digest()`.
pub fn digest_dir(root: &Path) -> SdkResult<TreeDigest> {
    Ok(tree_of_dir(root)?.digest())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(path: &str, exec: bool, content: &[u8]) -> FileRecord {
        FileRecord {
            path: path.into(),
            executable: exec,
            size: content.len() as u64,
            sha256: Sha256::digest(content).into(),
        }
    }

    #[test]
    fn listing_is_sorted_and_versioned() {
        let t = CanonicalTree::new(vec![rec("b", false, b"2"), rec("a/x", true, b"1")]).unwrap();
        let listing = String::from_utf8(t.listing()).unwrap();
        let lines: Vec<_> = listing.lines().collect();
        assert_eq!(lines[0], TREE_FORMAT);
        assert!(lines[1].starts_with("a/x\u{0}1\u{0}"));
        assert!(lines[2].starts_with("b\u{0}0\u{0}"));
    }

    #[test]
    fn exec_bit_and_content_change_the_digest() {
        let a = CanonicalTree::new(vec![rec("a", false, b"1")])
            .unwrap()
            .digest();
        let b = CanonicalTree::new(vec![rec("a", true, b"1")])
            .unwrap()
            .digest();
        let c = CanonicalTree::new(vec![rec("a", false, b"2")])
            .unwrap()
            .digest();
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.to_string().parse::<TreeDigest>().unwrap(), a);
        assert!("md5:00".parse::<TreeDigest>().is_err());
    }

    #[test]
    fn duplicates_and_file_dir_clashes_are_refused() {
        let dup = CanonicalTree::new(vec![rec("a", false, b""), rec("a", true, b"")]);
        assert_eq!(dup.unwrap_err().code(), "archive.duplicate_path");
        let clash = CanonicalTree::new(vec![rec("a", false, b""), rec("a/b", false, b"")]);
        assert_eq!(clash.unwrap_err().code(), "archive.path_conflict");
    }

    #[test]
    fn canonical_paths() {
        assert_eq!(canonical_path("./a/b.md").unwrap(), "a/b.md");
        assert_eq!(canonical_path("dir/").unwrap(), "dir");
        assert_eq!(canonical_path("e\u{301}.md").unwrap(), "\u{e9}.md");
        let code = |p: &str| canonical_path(p).unwrap_err().code();
        assert_eq!(code("../x"), "archive.path_traversal");
        assert_eq!(code("a/../../x"), "archive.path_traversal");
        assert_eq!(code("/etc/passwd"), "archive.absolute_path");
        assert_eq!(code("C:/x"), "archive.absolute_path");
        assert_eq!(code("a//b"), "archive.invalid_path");
        assert_eq!(code("a\\b"), "archive.invalid_path");
        assert_eq!(code("a/./b"), "archive.invalid_path");
        assert_eq!(code(""), "archive.invalid_path");
        assert_eq!(code("a\nb"), "archive.invalid_path");
    }
}
