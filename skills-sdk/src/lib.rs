#![doc = include_str!("../README.md")]

pub mod archive;
pub mod diagnostic;
pub mod disclosure;
pub mod error;
pub mod frontmatter;
pub mod manifest;
pub mod scaffold;
pub mod scan;
pub mod skill;
pub mod tree;
mod yaml;

/// Re-exported because [`Manifest::version`] and [`Skill::version`] are `semver::Version`s.
pub use semver;

pub use archive::{
    ArchiveLimits, ArchivedFile, EntryBudget, PackedSkill, SkillArchive, digest_of_archive,
    list_archive, pack_dir, read_archive, read_archive_file, unpack_to,
};
pub use diagnostic::{Diagnostic, Rule, Severity, ValidationMode};
pub use disclosure::{DiscoverEntry, Risk, estimate_tokens, short_description};
pub use error::{SdkError, SdkResult};
pub use frontmatter::{Frontmatter, frontmatter_json, parse_skill_md};
pub use manifest::{Contract, Manifest, Requirements, SkillScope, TestSpec, parse_manifest};
pub use scaffold::init_skill;
pub use scan::{
    Finding, FindingSeverity, RULES, RuleInfo, ScanReport, ScanVerdict, scan_archive,
    scan_archive_bytes, scan_dir, scan_files,
};
pub use skill::{
    Report, Skill, SkillSource, load_dir, validate_archive, validate_dir, validate_source,
};
pub use tree::{CanonicalTree, FileRecord, TreeDigest, digest_dir, tree_of_dir};

#[cfg(test)]
mod wire_names {
    use crate::scan::{FindingSeverity, ScanVerdict};

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
        names_match_serde::<FindingSeverity>();
        names_match_serde::<ScanVerdict>();
    }
}
