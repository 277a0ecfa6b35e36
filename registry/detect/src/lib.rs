#![doc = include_str!("../README.md")]

pub mod classifier;
pub mod concepts;
mod detector;
pub mod normalize;
pub mod rules;
mod sensitive;
pub mod sentence;
pub mod vector;

pub use classifier::{MODEL, Model};
pub use detector::{
    Analysis, Detection, RuleOutcome, SURE_BELOW, Verdict, analyse, analyse_with,
    blocked_as_external, blocked_as_user_statement, decide, decide_at, detect_instruction,
    detect_instruction_with, detect_stacked, detect_with, score, unsure, wants_second_opinion,
};
pub use normalize::{MAX_SCAN_BYTES, Normalized, normalize};
pub use rules::Signal;
pub use sensitive::{FindingKind, Severity, cn_id_valid, iban_valid, luhn_valid, scan_sensitive};

#[cfg(test)]
mod wire_names {
    use crate::rules::Signal;
    use crate::sensitive::FindingKind;

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
        names_match_serde::<Signal>();
        names_match_serde::<FindingKind>();
    }
}
