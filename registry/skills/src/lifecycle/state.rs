//! The lifecycle of a skill version as a typed state machine: states, actions, and the one
//! transition table every step is checked against (Draft → Test → Review → Published →
//! Deprecated / Yanked).

use registry_core::CoreError;
use registry_core::asset::AssetStatus;
use serde::{Deserialize, Serialize};

/// Where a version is in its lifecycle.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum LifecycleState {
    Draft,
    Tested,
    Approved,
    Rejected,
    Published,
    Deprecated,
    Yanked,
}

/// A step a caller asks for.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Action {
    /// Record the declared tests' results (passed: `tested`; failed: back to `draft`).
    Test,
    /// Approve or reject, by a reviewer who is not the author.
    Review,
    /// Publish: tests passed on this digest and the last review approves it.
    Promote,
    Deprecate,
    /// Out of new resolution; still installable from a lockfile.
    Yank,
    /// Back to the state it was yanked from.
    Unyank,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

use Action::*;
use LifecycleState::*;

/// The one transition table: from a state, an action may lead to these states.
pub const TRANSITIONS: &[(LifecycleState, Action, &[LifecycleState])] = &[
    (Draft, Test, &[Tested, Draft]),
    (Tested, Test, &[Tested, Draft]),
    (Tested, Review, &[Approved, Rejected]),
    (Approved, Review, &[Approved, Rejected]),
    (Approved, Promote, &[Published]),
    (Rejected, Review, &[Approved, Rejected]),
    (Published, Deprecate, &[Deprecated]),
    (Published, Yank, &[Yanked]),
    (Deprecated, Yank, &[Yanked]),
    (
        Yanked,
        Unyank,
        &[Draft, Tested, Approved, Rejected, Published, Deprecated],
    ),
];

impl LifecycleState {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Actions legal from this state, in table order.
    pub fn actions(self) -> Vec<Action> {
        TRANSITIONS
            .iter()
            .filter(|(from, _, _)| *from == self)
            .map(|(_, a, _)| *a)
            .collect()
    }

    /// The names of [`Self::actions`] (the wire form of `allowed_transitions`).
    pub fn allowed(self) -> Vec<&'static str> {
        self.actions().into_iter().map(Action::as_str).collect()
    }

    /// Whether `action` may lead from this state to `to`.
    pub fn can(self, action: Action, to: LifecycleState) -> bool {
        TRANSITIONS
            .iter()
            .any(|(from, a, tos)| *from == self && *a == action && tos.contains(&to))
    }

    pub(crate) fn asset_status(self) -> AssetStatus {
        match self {
            Draft | Tested | Approved | Rejected => AssetStatus::Draft,
            Published => AssetStatus::Active,
            Deprecated => AssetStatus::Deprecated,
            Yanked => AssetStatus::Yanked,
        }
    }

    /// A release can point here.
    pub fn is_released(self) -> bool {
        matches!(self, Published | Deprecated)
    }
}

/// `INVALID_TRANSITION` with the state, the action and what is allowed.
pub fn invalid(state: LifecycleState, action: &str) -> CoreError {
    CoreError::InvalidTransition {
        from: state.as_str().into(),
        action: action.into(),
        allowed: state.allowed().iter().map(|s| s.to_string()).collect(),
    }
}

/// Fails unless `action` is legal from `state` (whatever state it leads to).
pub fn check(state: LifecycleState, action: Action) -> Result<(), CoreError> {
    if state.actions().contains(&action) {
        Ok(())
    } else {
        Err(invalid(state, action.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state's or action's stored name (`as_str`, derived by strum) is its serde name.
    #[test]
    fn stored_names_are_the_serde_names() {
        use strum::IntoEnumIterator;
        for s in LifecycleState::iter() {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str(), "{s:?}");
        }
        for a in Action::iter() {
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str(), "{a:?}");
        }
    }

    const ALL: [LifecycleState; 7] = [
        Draft, Tested, Approved, Rejected, Published, Deprecated, Yanked,
    ];
    const ACTIONS: [Action; 6] = [Test, Review, Promote, Deprecate, Yank, Unyank];

    #[test]
    fn the_transition_table_is_the_lifecycle() {
        // (state, action) → legal? The whole table, written out once more by hand.
        let legal = [
            (Draft, Test),
            (Tested, Test),
            (Tested, Review),
            (Approved, Review),
            (Approved, Promote),
            (Rejected, Review),
            (Published, Deprecate),
            (Published, Yank),
            (Deprecated, Yank),
            (Yanked, Unyank),
        ];
        for s in ALL {
            for a in ACTIONS {
                assert_eq!(
                    check(s, a).is_ok(),
                    legal.contains(&(s, a)),
                    "{s:?} --{a:?}-->"
                );
            }
        }
        // Promotion is the only way to a release; nothing leads out of a release but
        // deprecate and yank.
        for (from, a, tos) in TRANSITIONS {
            if tos.contains(&Published) && *a != Unyank {
                assert_eq!((*from, *a), (Approved, Promote));
            }
            if from.is_released() {
                assert!(matches!(a, Deprecate | Yank));
            }
        }
        assert!(Approved.can(Promote, Published));
        assert!(!Tested.can(Promote, Published));
        assert!(!Draft.can(Review, Approved));
        assert_eq!(Draft.allowed(), ["test"]);
        assert_eq!(Published.allowed(), ["deprecate", "yank"]);
    }
}
