#![doc = include_str!("../README.md")]

pub mod drafts;
pub mod error;
pub mod lifecycle;
pub mod proof;
pub mod resolve;
pub mod runs;
pub mod service;
pub mod views;

pub use drafts::{DraftEvidence, DraftFromMemoryRequest, ProcedureSource};
pub use error::{Error, Result};
pub use lifecycle::{Action, LifecycleState};
pub use proof::{TestWaiver, TestWaiverRequest};
pub use runs::{
    ObserveFlag, ObservePolicy, RunComparison, RunOutcome, RunReport, RunStats, RunSummary, RunView,
};
pub use service::{
    ArchiveCache, Decision, DeprecateRequest, Deprecation, DiscoverView, Loaded, Published,
    ReleaseBody, ReleaseTarget, ReviewRecord, ReviewRequest, RollbackRequest, ScanOverride,
    ScanOverrideRequest, SkillsService, TestResult, TestResultsRequest, TestRun, VersionBody,
    YankRequest, require_release_governance,
};
pub use views::{DiscoverList, InstructionsView, SelectView, VersionSummary, VersionView};
