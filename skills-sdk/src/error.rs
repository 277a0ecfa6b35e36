//! The crate's error type. Every variant has a stable code (`SdkError::code`); callers and
//! tests match on the code, never on the message text.

use std::path::PathBuf;

use crate::diagnostic::Diagnostic;

/// Result alias used throughout the crate.
pub type SdkResult<T> = Result<T, SdkError>;

/// What can go wrong while loading, packing or unpacking a skill.
///
/// Validation problems of a skill's *content* are not errors: they are [`Diagnostic`]s. An
/// error means the operation itself could not proceed (an unreadable directory, a hostile
/// archive, a skill that failed validation where a valid one was required).
#[derive(Debug, thiserror::Error)]
pub enum SdkError {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("not a directory: {0}")]
    NotADirectory(PathBuf),
    #[error("skill is invalid ({} error(s)); first: {}", .0.len(), .0.first().map(|d| d.to_string()).unwrap_or_default())]
    Invalid(Vec<Diagnostic>),
    #[error("symlinks are not allowed in a skill: {0}")]
    SymlinkInTree(PathBuf),
    #[error("unsupported file type (not a regular file or directory): {0}")]
    UnsupportedFileType(PathBuf),

    #[error("archive entry escapes the skill directory: {0:?}")]
    PathTraversal(String),
    #[error("archive entry has an absolute path: {0:?}")]
    AbsolutePath(String),
    #[error("archive entry has an invalid path: {0:?}")]
    InvalidPath(String),
    #[error("archive entry name is not UTF-8: {0:?}")]
    NonUtf8Name(String),
    #[error("archive entry is a symlink: {0:?}")]
    SymlinkEntry(String),
    #[error("archive entry is a hard link: {0:?}")]
    HardlinkEntry(String),
    #[error("archive entry is a device, FIFO or other special file: {0:?}")]
    SpecialFileEntry(String),
    #[error("file {path:?} is {size} bytes, over the limit of {limit}")]
    FileTooLarge { path: String, size: u64, limit: u64 },
    #[error("archive expands to more than {limit} bytes")]
    TotalTooLarge { limit: u64 },
    #[error("archive has more than {limit} files")]
    TooManyFiles { limit: usize },
    #[error("archive has more than {limit} entries (files, directories and others)")]
    TooManyEntries { limit: usize },
    #[error("path {path:?}… is longer than {limit} bytes")]
    PathTooLong { path: String, limit: usize },
    #[error("path {path:?} has more than {limit} components")]
    PathTooDeep { path: String, limit: usize },
    #[error("archive has {bytes} bytes after the end of its gzip stream")]
    TrailingData { bytes: usize },
    #[error("archive has data after the tar end-of-archive marker")]
    DataAfterEnd,
    #[error("archive has the path {0:?} twice")]
    DuplicatePath(String),
    #[error("archive uses {0:?} both as a file and as a directory")]
    PathConflict(String),
    #[error("archive is corrupt: {0}")]
    CorruptArchive(String),
    #[error("digest mismatch: expected {expected}, found {actual}")]
    DigestMismatch { expected: String, actual: String },
    #[error("destination exists and is not an empty directory: {0}")]
    DestinationNotEmpty(PathBuf),
    #[error("no such file in the archive: {0:?}")]
    FileNotInArchive(String),
    #[error("invalid digest string: {0:?}")]
    InvalidDigest(String),
    /// Front matter that cannot be read at all (bad YAML, too large, anchors): its code is the
    /// diagnostic's rule code, so the same problem has the same code in both places.
    #[error("{0}")]
    FrontMatter(Box<Diagnostic>),
}

impl SdkError {
    /// The stable, machine-readable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Io { .. } => "io",
            Self::NotADirectory(_) => "skill.not_a_directory",
            Self::Invalid(_) => "skill.invalid",
            Self::SymlinkInTree(_) => "pack.symlink",
            Self::UnsupportedFileType(_) => "pack.unsupported_file_type",
            Self::PathTraversal(_) => "archive.path_traversal",
            Self::AbsolutePath(_) => "archive.absolute_path",
            Self::InvalidPath(_) => "archive.invalid_path",
            Self::NonUtf8Name(_) => "archive.non_utf8_name",
            Self::SymlinkEntry(_) => "archive.symlink",
            Self::HardlinkEntry(_) => "archive.hardlink",
            Self::SpecialFileEntry(_) => "archive.special_file",
            Self::FileTooLarge { .. } => "archive.file_too_large",
            Self::TotalTooLarge { .. } => "archive.total_too_large",
            Self::TooManyFiles { .. } => "archive.too_many_files",
            Self::TooManyEntries { .. } => "archive.too_many_entries",
            Self::PathTooLong { .. } => "archive.path_too_long",
            Self::PathTooDeep { .. } => "archive.path_too_deep",
            Self::TrailingData { .. } => "archive.trailing_data",
            Self::DataAfterEnd => "archive.data_after_end",
            Self::DuplicatePath(_) => "archive.duplicate_path",
            Self::PathConflict(_) => "archive.path_conflict",
            Self::CorruptArchive(_) => "archive.corrupt",
            Self::DigestMismatch { .. } => "archive.digest_mismatch",
            Self::DestinationNotEmpty(_) => "destination.not_empty",
            Self::FileNotInArchive(_) => "archive.file_not_found",
            Self::InvalidDigest(_) => "digest.invalid",
            Self::FrontMatter(d) => d.rule.code(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
