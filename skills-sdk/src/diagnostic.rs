//! Validation findings: one [`Diagnostic`] per problem, each naming the file, the field and
//! the broken rule by a stable [`Rule`] code.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a skill is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ValidationMode {
    /// Unknown keys are errors. This agrees with the reference validator (`skills-ref`).
    #[default]
    Strict,
    /// Unknown keys are warnings; everything else is checked as in strict mode.
    Lenient,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

macro_rules! rules {
    ($($variant:ident => $code:literal),* $(,)?) => {
        /// Every rule a skill can break. The code strings are stable: tools and tests match on
        /// them, and a published code is never reused for another meaning.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Rule { $($variant),* }

        impl Rule {
            /// All rules, in declaration order.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant),*];

            pub fn code(self) -> &'static str {
                match self { $(Rule::$variant => $code),* }
            }

            pub fn from_code(code: &str) -> Option<Rule> {
                match code { $($code => Some(Rule::$variant),)* _ => None }
            }
        }
    };
}

rules! {
    SkillMdMissing => "skill_md.missing",
    SkillMdLowercase => "skill_md.lowercase_name",
    SkillMdNotUtf8 => "skill_md.not_utf8",
    SkillMdTooLarge => "skill_md.too_large",
    FrontmatterMissing => "frontmatter.missing",
    FrontmatterUnclosed => "frontmatter.unclosed",
    FrontmatterSyntax => "frontmatter.syntax",
    FrontmatterTooLarge => "frontmatter.too_large",
    FrontmatterAlias => "frontmatter.alias",
    FrontmatterTooDeep => "frontmatter.too_deep",
    FrontmatterTooManyNodes => "frontmatter.too_many_nodes",
    FrontmatterNotMapping => "frontmatter.not_mapping",
    FieldUnknown => "field.unknown",
    FieldType => "field.type",
    NameMissing => "name.missing",
    NameEmpty => "name.empty",
    NameTooLong => "name.too_long",
    NameUppercase => "name.uppercase",
    NameInvalidChars => "name.invalid_chars",
    NameHyphenEdge => "name.hyphen_edge",
    NameDoubleHyphen => "name.double_hyphen",
    NameMismatchDir => "name.mismatch_dir",
    DescriptionMissing => "description.missing",
    DescriptionEmpty => "description.empty",
    DescriptionTooLong => "description.too_long",
    CompatibilityTooLong => "compatibility.too_long",
    MetadataNotString => "metadata.not_string",
    AllowedToolsInvalid => "allowed_tools.invalid",
    ManifestNotUtf8 => "manifest.not_utf8",
    ManifestSyntax => "manifest.syntax",
    ManifestTooLarge => "manifest.too_large",
    ManifestFieldMissing => "manifest.field_missing",
    ManifestFieldUnknown => "manifest.field_unknown",
    ManifestFieldType => "manifest.field_type",
    OwnerEmpty => "owner.empty",
    VersionInvalid => "version.invalid",
    ScopeInvalid => "scope.invalid",
    RequiresEntryInvalid => "requires.entry_invalid",
    ContractInvalid => "contract.invalid",
    ModelsEntryInvalid => "models.entry_invalid",
    TestNameInvalid => "tests.name_invalid",
    TestNameDuplicate => "tests.name_duplicate",
    TestCommandEmpty => "tests.command_empty",
    TestTimeoutInvalid => "tests.timeout_invalid",
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code())
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let code = String::deserialize(d)?;
        Rule::from_code(&code)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown rule code {code:?}")))
    }
}

/// One problem found in a skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// File the problem is in, relative to the skill directory (`SKILL.md`, `skill.toml`).
    pub file: String,
    /// Dotted field path (`name`, `requires.tools[2]`, `tests[0].command`), when there is one.
    pub field: Option<String>,
    pub rule: Rule,
    pub message: String,
}

impl Diagnostic {
    pub fn error(file: &str, field: Option<&str>, rule: Rule, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            file: file.to_owned(),
            field: field.map(str::to_owned),
            rule,
            message: message.into(),
        }
    }

    pub fn warning(
        file: &str,
        field: Option<&str>,
        rule: Rule,
        message: impl Into<String>,
    ) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(file, field, rule, message)
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{sev}[{}] {}", self.rule, self.file)?;
        if let Some(field) = &self.field {
            write!(f, " ({field})")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// True when none of `diagnostics` is an error.
pub fn no_errors(diagnostics: &[Diagnostic]) -> bool {
    !diagnostics.iter().any(Diagnostic::is_error)
}
