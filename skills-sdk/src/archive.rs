//! The `.skill` archive: a deterministic `tar.gz` of the canonical tree, and a defensive
//! reader for archives that come from anyone.
//!
//! Writing: entries sorted by path, regular files only (no directory entries), mode `0755`
//! or `0644`, mtime/uid/gid `0`, empty user/group names, GNU headers (long names as GNU
//! long-name entries); gzip with no mtime, no file name, OS byte `255`, default level. The same
//! tree packs to the same bytes with the same `flate2` backend; the tree digest, not the
//! archive bytes, is what identifies a version.
//!
//! Reading: every entry is checked before any byte of it is used; limits are enforced while
//! streaming, so a decompression bomb is stopped after at most about `max_total_size` bytes of
//! output.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;
use std::rc::Rc;

use flate2::Compression;
use flate2::GzBuilder;
use flate2::read::GzDecoder;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::{SdkError, SdkResult};
use crate::tree::{
    CanonicalTree, FileRecord, PathSet, TreeDigest, canonical_path, hash_reader, is_ignored,
    tree_of_dir, walk_dir,
};

/// File-name extension of packed skills.
pub const ARCHIVE_EXTENSION: &str = "skill";

/// Bounds applied when packing and unpacking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveLimits {
    pub max_file_size: u64,
    pub max_total_size: u64,
    pub max_files: usize,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        Self {
            max_file_size: 10 * 1024 * 1024,
            max_total_size: 50 * 1024 * 1024,
            max_files: 1000,
        }
    }
}

impl ArchiveLimits {
    /// Decompressed bytes a well-formed archive within the limits can need: the contents plus,
    /// per entry, a header, a GNU long-name header with its name block(s), and padding.
    fn stream_budget(&self) -> u64 {
        const PER_ENTRY: u64 = 512 * 8;
        self.max_total_size
            .saturating_add((self.max_files as u64 + 16).saturating_mul(PER_ENTRY))
            .saturating_add(64 * 1024)
    }
}

/// A packed skill: the archive bytes, the tree digest and the files it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedSkill {
    pub bytes: Vec<u8>,
    pub digest: TreeDigest,
    pub files: Vec<FileRecord>,
}

/// One file read from an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedFile {
    pub executable: bool,
    pub contents: Vec<u8>,
}

/// A whole archive checked and held in memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillArchive {
    tree: CanonicalTree,
    contents: BTreeMap<String, Vec<u8>>,
}

impl SkillArchive {
    pub fn tree(&self) -> &CanonicalTree {
        &self.tree
    }

    pub fn digest(&self) -> TreeDigest {
        self.tree.digest()
    }

    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.tree.files().iter().map(|f| f.path.as_str())
    }

    pub fn file(&self, path: &str) -> Option<ArchivedFile> {
        let rec = self.tree.get(path)?;
        Some(ArchivedFile {
            executable: rec.executable,
            contents: self.contents.get(path)?.clone(),
        })
    }

    pub fn contents(&self, path: &str) -> Option<&[u8]> {
        self.contents.get(path).map(Vec::as_slice)
    }
}

/// Packs the skill directory `dir` (see the module doc for the format).
///
/// Refuses symlinks and special files, and trees that break `limits`, so that everything
/// packed can be unpacked with the same limits.
pub fn pack_dir(dir: &Path, limits: &ArchiveLimits) -> SdkResult<PackedSkill> {
    let mut files = walk_dir(dir)?;
    files.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    if files.len() > limits.max_files {
        return Err(SdkError::TooManyFiles {
            limit: limits.max_files,
        });
    }
    let mut builder = tar::Builder::new(Vec::new());
    let mut records = Vec::with_capacity(files.len());
    let mut total = 0u64;
    for f in &files {
        if f.size > limits.max_file_size {
            return Err(SdkError::FileTooLarge {
                path: f.path.clone(),
                size: f.size,
                limit: limits.max_file_size,
            });
        }
        let data = fs::read(&f.abs).map_err(|e| SdkError::io(&f.abs, e))?;
        total += data.len() as u64;
        if total > limits.max_total_size {
            return Err(SdkError::TotalTooLarge {
                limit: limits.max_total_size,
            });
        }
        append_file(&mut builder, &f.path, f.executable, &data)
            .map_err(|e| SdkError::io(&f.abs, e))?;
        records.push(FileRecord {
            path: f.path.clone(),
            executable: f.executable,
            size: data.len() as u64,
            sha256: Sha256::digest(&data).into(),
        });
    }
    let tar_bytes = builder.into_inner().map_err(|e| SdkError::io(dir, e))?;
    let bytes = gzip(&tar_bytes).map_err(|e| SdkError::io(dir, e))?;
    let tree = CanonicalTree::new(records)?;
    Ok(PackedSkill {
        bytes,
        digest: tree.digest(),
        files: tree.files().to_vec(),
    })
}

/// Appends one regular file with the normalised header. Public for tools that build archives
/// from memory; `path` must already be canonical.
pub fn append_file<W: Write>(
    builder: &mut tar::Builder<W>,
    path: &str,
    executable: bool,
    data: &[u8],
) -> io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(data.len() as u64);
    h.set_mode(if executable { 0o755 } else { 0o644 });
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    builder.append_data(&mut h, path, data)
}

/// Gzip with a fixed header: no mtime, no file name, OS "unknown".
pub fn gzip(data: &[u8]) -> io::Result<Vec<u8>> {
    let mut enc = GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), Compression::default());
    enc.write_all(data)?;
    enc.finish()
}

/// Caps the decompressed stream; `tripped` tells a cap hit apart from a corrupt stream, since
/// the tar reader wraps the I/O error.
struct Budget<R> {
    inner: R,
    remaining: u64,
    tripped: Rc<Cell<bool>>,
}

impl<R: Read> Read for Budget<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.remaining == 0 {
            // Probe one byte: a stream that ends exactly at the budget is fine.
            let mut probe = [0u8; 1];
            if self.inner.read(&mut probe)? == 0 {
                return Ok(0);
            }
            self.tripped.set(true);
            return Err(io::Error::other("decompressed size budget exceeded"));
        }
        let cap = buf
            .len()
            .min(self.remaining.min(usize::MAX as u64) as usize);
        let n = self.inner.read(&mut buf[..cap])?;
        self.remaining -= n as u64;
        Ok(n)
    }
}

/// Streams through an archive, checking every entry; `keep(path)` decides which contents are
/// kept in memory (all are hashed).
fn scan(
    bytes: &[u8],
    limits: &ArchiveLimits,
    mut keep: impl FnMut(&str) -> bool,
) -> SdkResult<(CanonicalTree, BTreeMap<String, Vec<u8>>)> {
    let tripped = Rc::new(Cell::new(false));
    let reader = Budget {
        inner: GzDecoder::new(bytes),
        remaining: limits.stream_budget(),
        tripped: tripped.clone(),
    };
    let stream_err = |e: io::Error| {
        if tripped.get() {
            SdkError::TotalTooLarge {
                limit: limits.max_total_size,
            }
        } else {
            SdkError::CorruptArchive(e.to_string())
        }
    };
    let mut archive = tar::Archive::new(reader);
    let mut paths = PathSet::default();
    let mut records = Vec::new();
    let mut kept = BTreeMap::new();
    let mut total = 0u64;
    for entry in archive.entries().map_err(stream_err)? {
        let mut entry = entry.map_err(stream_err)?;
        let raw = entry.path_bytes();
        let raw = match std::str::from_utf8(&raw) {
            Ok(s) => s.to_owned(),
            Err(_) => {
                return Err(SdkError::NonUtf8Name(
                    String::from_utf8_lossy(&raw).into_owned(),
                ));
            }
        };
        use tar::EntryType as T;
        let kind = entry.header().entry_type();
        if kind == T::XGlobalHeader {
            continue;
        }
        let path = canonical_path(&raw)?;
        // The canonical tree never holds ignored names (see `tree::is_ignored`); skipping them
        // here keeps the digest of an archive equal to the digest of its unpacked directory.
        if path.split('/').any(is_ignored) {
            continue;
        }
        match kind {
            T::Regular | T::Continuous => {}
            T::Directory => {
                paths.insert_dir(&path)?;
                continue;
            }
            T::Symlink => return Err(SdkError::SymlinkEntry(raw)),
            T::Link => return Err(SdkError::HardlinkEntry(raw)),
            _ => return Err(SdkError::SpecialFileEntry(raw)),
        }
        if records.len() >= limits.max_files {
            return Err(SdkError::TooManyFiles {
                limit: limits.max_files,
            });
        }
        let declared = entry.size();
        if declared > limits.max_file_size {
            return Err(SdkError::FileTooLarge {
                path,
                size: declared,
                limit: limits.max_file_size,
            });
        }
        total = total.saturating_add(declared);
        if total > limits.max_total_size {
            return Err(SdkError::TotalTooLarge {
                limit: limits.max_total_size,
            });
        }
        paths.insert(&path)?;
        let executable = entry.header().mode().map_err(stream_err)? & 0o111 != 0;
        let (sha256, size) = if keep(&path) {
            let mut buf = Vec::with_capacity(declared as usize);
            (&mut entry)
                .take(limits.max_file_size + 1)
                .read_to_end(&mut buf)
                .map_err(stream_err)?;
            let out = (Sha256::digest(&buf).into(), buf.len() as u64);
            kept.insert(path.clone(), buf);
            out
        } else {
            hash_reader((&mut entry).take(limits.max_file_size + 1)).map_err(stream_err)?
        };
        if size != declared {
            return Err(SdkError::CorruptArchive(format!(
                "{path:?}: truncated entry"
            )));
        }
        records.push(FileRecord {
            path,
            executable,
            size,
            sha256,
        });
    }
    Ok((CanonicalTree::new(records)?, kept))
}

/// Checks an archive and holds all of it in memory.
pub fn read_archive(bytes: &[u8], limits: &ArchiveLimits) -> SdkResult<SkillArchive> {
    let (tree, contents) = scan(bytes, limits, |_| true)?;
    Ok(SkillArchive { tree, contents })
}

/// Checks an archive and lists its files, keeping no contents.
pub fn list_archive(bytes: &[u8], limits: &ArchiveLimits) -> SdkResult<CanonicalTree> {
    Ok(scan(bytes, limits, |_| false)?.0)
}

/// The tree digest of an archive, computed in memory after checking every entry.
pub fn digest_of_archive(bytes: &[u8], limits: &ArchiveLimits) -> SdkResult<TreeDigest> {
    Ok(list_archive(bytes, limits)?.digest())
}

/// Reads one file of an archive (for loading a single resource on demand). The whole archive
/// is still checked: a file is never served from an archive that would be refused.
pub fn read_archive_file(
    bytes: &[u8],
    path: &str,
    limits: &ArchiveLimits,
) -> SdkResult<ArchivedFile> {
    let wanted = canonical_path(path)?;
    let (tree, mut kept) = scan(bytes, limits, |p| p == wanted)?;
    let rec = tree
        .get(&wanted)
        .ok_or_else(|| SdkError::FileNotInArchive(path.to_owned()))?;
    let contents = kept.remove(&wanted).unwrap_or_default();
    Ok(ArchivedFile {
        executable: rec.executable,
        contents,
    })
}

/// Unpacks an archive into `dest`, which must not exist or be an empty directory, then walks
/// what was written and checks that its digest equals the archive's.
pub fn unpack_to(bytes: &[u8], dest: &Path, limits: &ArchiveLimits) -> SdkResult<CanonicalTree> {
    let archive = read_archive(bytes, limits)?;
    match fs::read_dir(dest) {
        Ok(mut it) => {
            if it.next().is_some() {
                return Err(SdkError::DestinationNotEmpty(dest.to_owned()));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(dest).map_err(|e| SdkError::io(dest, e))?;
        }
        Err(e) => return Err(SdkError::io(dest, e)),
    }
    for rec in archive.tree.files() {
        let target = dest.join(&rec.path);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(|e| SdkError::io(parent, e))?;
        }
        // create_new: never write through something that already exists at the path.
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .map_err(|e| SdkError::io(&target, e))?;
        f.write_all(&archive.contents[&rec.path])
            .map_err(|e| SdkError::io(&target, e))?;
        set_executable(&target, rec.executable)?;
    }
    let written = tree_of_dir(dest)?;
    let (expected, actual) = (archive.digest(), written.digest());
    if expected != actual {
        return Err(SdkError::DigestMismatch {
            expected: expected.to_string(),
            actual: actual.to_string(),
        });
    }
    Ok(written)
}

#[cfg(unix)]
fn set_executable(path: &Path, executable: bool) -> SdkResult<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = if executable { 0o755 } else { 0o644 };
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(|e| SdkError::io(path, e))
}

#[cfg(not(unix))]
fn set_executable(_path: &Path, _executable: bool) -> SdkResult<()> {
    Ok(())
}
