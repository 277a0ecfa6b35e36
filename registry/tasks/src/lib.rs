#![doc = include_str!("../README.md")]

pub mod continuation;
pub mod service;
pub mod wire;

pub use service::TaskService;
pub use wire::*;

/// The working layer's limits (README "Security"): each is checked before any work, with a
/// stable refusal code.
pub mod limits {
    /// Longest goal, acceptance and next step, in characters (every text cap here counts
    /// characters, as the document's `maxLength` does).
    pub const MAX_GOAL_CHARS: usize = 4096;
    /// Longest event content and summary, in characters (as a memory's content).
    pub const MAX_EVENT_CHARS: usize = 16 * 1024;
    /// Longest event id, actor and `caused_by`, in characters.
    pub const MAX_ID_CHARS: usize = 128;
    /// Most events one append carries.
    pub const MAX_EVENTS_PER_APPEND: usize = 100;
    /// Most events one task holds.
    pub const MAX_TASK_EVENTS: u64 = 1_000_000;
    /// Most events one page answers.
    pub const MAX_PAGE: usize = 1000;
    /// Largest artifact, in bytes.
    pub const MAX_ARTIFACT_BYTES: usize = 8 * 1024 * 1024;
    /// Longest artifact name (1-200 of `[A-Za-z0-9._-]`) and media type, in bytes.
    pub const MAX_NAME_BYTES: usize = 200;
    /// Longest artifact summary and checkpoint label, in characters.
    pub const MAX_LABEL_CHARS: usize = 256;
    /// Most artifacts one task holds.
    pub const MAX_TASK_ARTIFACTS: usize = 1000;
    /// Most lines one line range answers.
    pub const MAX_RANGE_LINES: u64 = 100_000;
    /// Largest Continuation Package budget, in tokens (as a context pack's).
    pub const MAX_BUDGET: usize = 200_000;
    /// Newest events after the summary a Continuation Package considers.
    pub const MAX_CONTINUATION_EVENTS: usize = 1000;
    /// Newest open and resolved items a Continuation Package considers (each).
    pub const MAX_CONTINUATION_ITEMS: usize = 1000;
    /// Newest decisions and approvals a Continuation Package considers (each).
    pub const MAX_CONTINUATION_DECISIONS: usize = 50;
    /// Most working memories a Continuation Package considers.
    pub const MAX_CONTINUATION_MEMORIES: usize = 50;
}

#[cfg(test)]
mod wire_names {
    use crate::wire::TaskStatus;

    /// A variant's stored name (`as_str`, derived by strum) must be its serde name.
    fn names_match_serde<T>()
    where
        T: strum::IntoEnumIterator + serde::Serialize + Into<&'static str> + Copy + std::fmt::Debug,
    {
        for v in T::iter() {
            let name: &'static str = v.into();
            assert_eq!(serde_json::to_value(v).unwrap(), name, "{v:?}");
        }
    }

    #[test]
    fn stored_names_are_the_serde_names() {
        names_match_serde::<TaskStatus>();
    }
}
