//! The `.skill` archive: a deterministic `tar.gz` of the canonical tree, and a defensive
//! reader for archives that come from anyone.
//!
//! Writing: entries sorted by path, regular files only (no directory entries), mode `0755`
//! or `0644`, mtime/uid/gid `0`, empty user/group names, GNU headers (long names as GNU
//! long-name entries); gzip with no mtime, no file name, OS byte `255`, default level. The same
//! tree packs to the same bytes with the same `flate2` backend; the tree digest, not the
//! archive bytes, is what identifies a version.
//!
//! Reading: every entry is counted and checked before any byte of it is used; limits are
//! enforced while streaming, so a decompression bomb is stopped after at most about
//! `max_total_size` bytes of output, and no allocation is larger than what the limits allow.
//! The archive must end where its data ends: after the tar end-of-archive marker only zero
//! padding may follow (`archive.data_after_end`), and after the gzip stream nothing at all
//! (`archive.trailing_data`). That also refuses multi-member gzip (concatenated streams):
//! `pack_dir` writes one member, and a second one is content that some readers see and others
//! do not.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;
use std::rc::Rc;

use flate2::Compression;
use flate2::GzBuilder;
use flate2::bufread::GzDecoder;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::{SdkError, SdkResult};
use crate::tree::{
    CanonicalTree, FileRecord, PathSet, TreeDigest, canonical_path, hash_reader, is_ignored,
    tree_of_dir, walk_dir,
};

/// File-name extension of packed skills.
pub const ARCHIVE_EXTENSION: &str = "skill";

/// Default [`ArchiveLimits::max_file_size`]: 10 MiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 10 * 1024 * 1024;
/// Default [`ArchiveLimits::max_total_size`]: 50 MiB.
pub const DEFAULT_MAX_TOTAL_SIZE: u64 = 50 * 1024 * 1024;
/// Default [`ArchiveLimits::max_files`].
pub const DEFAULT_MAX_FILES: usize = 1000;
/// Default [`ArchiveLimits::max_entries`]: room for a directory entry beside every file, as
/// archives made by `tar` have.
pub const DEFAULT_MAX_ENTRIES: usize = 2 * DEFAULT_MAX_FILES;
/// Default [`ArchiveLimits::max_path_bytes`].
pub const DEFAULT_MAX_PATH_BYTES: usize = 1024;
/// Default [`ArchiveLimits::max_path_depth`].
pub const DEFAULT_MAX_PATH_DEPTH: usize = 32;

/// Bounds applied when packing and unpacking, and (by `skillctl`) when reading a Git tree.
/// Each is checked before the work it bounds: a count before the entry is used, a size before
/// its bytes are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ArchiveLimits {
    /// Largest regular file, in bytes (`archive.file_too_large`).
    pub max_file_size: u64,
    /// Largest sum of regular file sizes, in bytes (`archive.total_too_large`); the
    /// decompressed stream is capped near it too.
    pub max_total_size: u64,
    /// Most regular files (`archive.too_many_files`).
    pub max_files: usize,
    /// Most entries of any kind: files, directories, ignored names, extended headers that reach
    /// the reader (`archive.too_many_entries`).
    pub max_entries: usize,
    /// Longest canonical path, in bytes (`archive.path_too_long`).
    pub max_path_bytes: usize,
    /// Most components in a path: `a/b/c` has 3 (`archive.path_too_deep`).
    pub max_path_depth: usize,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        Self {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            max_total_size: DEFAULT_MAX_TOTAL_SIZE,
            max_files: DEFAULT_MAX_FILES,
            max_entries: DEFAULT_MAX_ENTRIES,
            max_path_bytes: DEFAULT_MAX_PATH_BYTES,
            max_path_depth: DEFAULT_MAX_PATH_DEPTH,
        }
    }
}

impl ArchiveLimits {
    /// Decompressed bytes a well-formed archive within the limits can need: the contents plus,
    /// per entry, a header, a GNU long-name header with its name block(s), and padding.
    fn stream_budget(&self) -> u64 {
        const PER_ENTRY: u64 = 512 * 8;
        self.max_total_size
            .saturating_add((self.max_entries as u64 + 16).saturating_mul(PER_ENTRY))
            .saturating_add(64 * 1024)
    }

    /// Refuses a canonical path over [`Self::max_path_bytes`] or [`Self::max_path_depth`].
    pub fn check_path(&self, path: &str) -> SdkResult<()> {
        if path.len() > self.max_path_bytes {
            return Err(SdkError::PathTooLong {
                path: path.chars().take(64).collect(),
                limit: self.max_path_bytes,
            });
        }
        if path.split('/').count() > self.max_path_depth {
            return Err(SdkError::PathTooDeep {
                path: path.chars().take(64).collect(),
                limit: self.max_path_depth,
            });
        }
        Ok(())
    }
}

/// Counts entries, files and bytes against [`ArchiveLimits`] as a tree is read, so that every
/// reader (archives here, Git trees in `skillctl`) refuses at the same point with the same
/// code. Call it before doing the work an entry would cost.
#[derive(Debug, Clone)]
pub struct EntryBudget {
    limits: ArchiveLimits,
    entries: usize,
    files: usize,
    total: u64,
}

impl EntryBudget {
    pub fn new(limits: &ArchiveLimits) -> Self {
        Self {
            limits: *limits,
            entries: 0,
            files: 0,
            total: 0,
        }
    }

    /// Counts one entry of any kind (`archive.too_many_entries`).
    pub fn entry(&mut self) -> SdkResult<()> {
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(SdkError::TooManyEntries {
                limit: self.limits.max_entries,
            });
        }
        Ok(())
    }

    /// Counts a regular file of `size` bytes at canonical `path` (not counting it as an entry:
    /// call [`Self::entry`] for that).
    pub fn file(&mut self, path: &str, size: u64) -> SdkResult<()> {
        self.files += 1;
        if self.files > self.limits.max_files {
            return Err(SdkError::TooManyFiles {
                limit: self.limits.max_files,
            });
        }
        if size > self.limits.max_file_size {
            return Err(SdkError::FileTooLarge {
                path: path.to_owned(),
                size,
                limit: self.limits.max_file_size,
            });
        }
        self.total = self.total.saturating_add(size);
        if self.total > self.limits.max_total_size {
            return Err(SdkError::TotalTooLarge {
                limit: self.limits.max_total_size,
            });
        }
        Ok(())
    }

    /// Checks a canonical path against the path limits.
    pub fn path(&self, path: &str) -> SdkResult<()> {
        self.limits.check_path(path)
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

/// A whole archive checked and held in memory: what a server keeps (e.g. in an
/// `Arc<SkillArchive>` keyed by digest) to serve files without decompressing again. It is
/// immutable once read, `Send + Sync`, and holds at most `max_total_size` bytes of contents.
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

    /// Whether the file at `path` is executable; `None` when there is no such file.
    pub fn executable(&self, path: &str) -> Option<bool> {
        self.tree.get(path).map(|f| f.executable)
    }

    /// Bytes of file contents held, for weighing the archive in a cache.
    pub fn retained_bytes(&self) -> u64 {
        self.contents.values().map(|c| c.len() as u64).sum()
    }
}

/// Packs the skill directory `dir` (see the module doc for the format).
///
/// Refuses symlinks and special files, and trees that break `limits`, so that everything
/// packed can be unpacked with the same limits.
pub fn pack_dir(dir: &Path, limits: &ArchiveLimits) -> SdkResult<PackedSkill> {
    let mut files = walk_dir(dir)?;
    files.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    // The archive has one entry per file and no directory entries.
    let mut budget = EntryBudget::new(limits);
    for f in &files {
        budget.entry()?;
        budget.path(&f.path)?;
        budget.file(&f.path, f.size)?;
    }
    let mut builder = tar::Builder::new(Vec::new());
    let mut records = Vec::with_capacity(files.len());
    let mut total = 0u64;
    for f in &files {
        // Sizes were checked from metadata; the read is capped too, in case a file grew since.
        let mut data = Vec::new();
        fs::File::open(&f.abs)
            .and_then(|file| file.take(limits.max_file_size + 1).read_to_end(&mut data))
            .map_err(|e| SdkError::io(&f.abs, e))?;
        if data.len() as u64 > limits.max_file_size {
            return Err(SdkError::FileTooLarge {
                path: f.path.clone(),
                size: data.len() as u64,
                limit: limits.max_file_size,
            });
        }
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
    // `bufread` so that the decoder consumes exactly the gzip member and what follows it stays
    // in the slice, to be refused.
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
    let mut budget = EntryBudget::new(limits);
    for entry in archive.entries().map_err(stream_err)? {
        let mut entry = entry.map_err(stream_err)?;
        // Every entry counts, whatever it is, before any work is done on it.
        budget.entry()?;
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
        budget.path(&path)?;
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
        let declared = entry.size();
        budget.file(&path, declared)?;
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
    check_end(archive.into_inner()).map_err(|e| match e {
        EndError::Stream(e) => stream_err(e),
        EndError::Sdk(e) => e,
    })?;
    Ok((CanonicalTree::new(records)?, kept))
}

enum EndError {
    Stream(io::Error),
    Sdk(SdkError),
}

/// After the tar end-of-archive marker: only zero padding, then the end of the gzip stream
/// (its CRC and length checked by the decoder), then nothing.
fn check_end(mut reader: Budget<GzDecoder<&[u8]>>) -> Result<(), EndError> {
    let mut buf = [0u8; 8192];
    loop {
        let n = reader.read(&mut buf).map_err(EndError::Stream)?;
        if n == 0 {
            break;
        }
        if buf[..n].iter().any(|&b| b != 0) {
            return Err(EndError::Sdk(SdkError::DataAfterEnd));
        }
    }
    let rest = reader.inner.into_inner();
    if !rest.is_empty() {
        return Err(EndError::Sdk(SdkError::TrailingData { bytes: rest.len() }));
    }
    Ok(())
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
