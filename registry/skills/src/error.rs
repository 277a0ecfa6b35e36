//! The skills domain's error: a refusal already mapped onto the core's code table (code,
//! message, machine-readable details), so every door answers it the same way.

use registry_core::{CoreError, ErrorCode};

/// Why the skills domain refused a step of a version's life: the stable code its error's
/// `details.reason` carries (`TEST_EVIDENCE_MISSING`, a tester's or reviewer's refusal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Refusal {
    /// The version declares no test and holds no waiver.
    NoDeclaredTests,
    /// The only results are the author's own.
    SelfReportedOnly,
    /// No run of the declared tests is recorded.
    NoTestRun,
    /// The last run failed a declared test.
    TestsFailed,
    /// The tester wrote the version.
    TesterIsAuthor,
    /// The tester is the version's reviewer.
    TesterIsReviewer,
    /// The key lacks the tester role.
    TesterRoleRequired,
    /// An author waiving the tests of their own version.
    SelfWaiver,
    /// A waiver for a version that declares tests.
    TestsDeclared,
    /// An author reviewing their own version.
    SelfReview,
    /// Not an admin of the release's tenant nor its author.
    NotReleaseGovernor,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
    pub details: serde_json::Value,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
            details: serde_json::Value::Null,
        }
    }

    pub fn with_details(mut self, details: impl Into<serde_json::Value>) -> Self {
        self.details = details.into();
        self
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, what)
    }

    pub fn forbidden(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, what)
    }

    pub fn validation(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::ValidationFailed, what)
    }

    /// Something this code did not expect (a corrupt stored body, a missing blob): the caller
    /// sees `INTERNAL`; the message goes to the log.
    pub fn internal(e: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::Internal, e.to_string())
    }
}

impl From<CoreError> for Error {
    fn from(e: CoreError) -> Self {
        Error {
            code: e.code(),
            details: e.details(),
            message: e.to_string(),
        }
    }
}

impl From<Error> for CoreError {
    fn from(e: Error) -> Self {
        match e.code {
            ErrorCode::Internal => CoreError::backend("skills", e.message),
            code => CoreError::Coded {
                code,
                message: e.message,
                details: e.details,
            },
        }
    }
}
