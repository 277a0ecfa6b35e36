//! The lifecycle of a skill version: the typed state machine every step is checked against
//! ([`state`]: one transition table), and the steps that move a version through it ([`ops`]:
//! review, promote, the scan override, deprecate, yank, unyank, rollback, delete). The tester's
//! step (Test) is in [`crate::proof`].

pub mod ops;
pub mod state;

pub use state::{Action, LifecycleState, TRANSITIONS, check, invalid};
