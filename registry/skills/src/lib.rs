#![doc = include_str!("../README.md")]

pub mod discovery;
pub mod drafts;
pub mod error;
pub mod lifecycle;
pub mod load;
pub mod model;
pub mod proof;
pub mod publish;
pub mod resolve;
pub mod runs;
pub mod service;
pub mod views;

pub use drafts::{DraftEvidence, DraftFromMemoryRequest, ProcedureSource};
pub use error::{Error, Result};
pub use lifecycle::ops::require_release_governance;
pub use lifecycle::{Action, LifecycleState};
pub use model::{
    Decision, DeprecateRequest, Deprecation, DiscoverView, Loaded, ObserveFlag, ObservePolicy,
    Published, ReleaseBody, ReleaseTarget, ReviewRecord, ReviewRequest, RollbackRequest,
    ScanOverride, ScanOverrideRequest, TestResult, TestResultsRequest, TestRun, TestWaiver,
    VersionBody, YankRequest,
};
pub use proof::TestWaiverRequest;
pub use runs::{RunComparison, RunOutcome, RunReport, RunStats, RunSummary, RunView};
pub use service::{ArchiveCache, SkillsService};
pub use views::{DiscoverList, InstructionsView, SelectView, VersionSummary, VersionView};
