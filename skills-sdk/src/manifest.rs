//! `skill.toml`: the registry's own manifest, kept beside `SKILL.md`. It carries what the
//! Agent Skills format has no room for: owner, semver version, scope, requirements, the
//! input/output/acceptance contract, supported models and the declared tests.
//!
//! ```toml
//! owner = "platform-team"
//! version = "1.2.0"
//! scope = "tenant"            # or "global", "project:<name>"
//! models = ["claude-sonnet-4"]
//!
//! [requires]
//! tools = ["bash"]
//! permissions = ["network"]
//! environment = ["GITHUB_TOKEN"]
//!
//! [contract]
//! inputs = "a PDF file"
//! outputs = ["extracted text"]
//! acceptance = "text matches the fixture"
//!
//! [[tests]]
//! name = "smoke"
//! command = ["python3", "scripts/selftest.py"]
//! timeout_secs = 60
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use toml::{Table, Value};

use crate::diagnostic::{Diagnostic, Rule, ValidationMode};

pub const MANIFEST_FILE: &str = "skill.toml";
/// Largest `skill.toml`, in bytes; a manifest is a few hundred.
pub const MAX_MANIFEST_BYTES: usize = 64 * 1024;
pub const DEFAULT_TEST_TIMEOUT_SECS: u64 = 300;
pub const MAX_TEST_TIMEOUT_SECS: u64 = 3600;

const TOP_FIELDS: &[&str] = &[
    "owner", "version", "scope", "requires", "contract", "models", "tests",
];
const REQUIRES_FIELDS: &[&str] = &["tools", "permissions", "environment"];
const CONTRACT_FIELDS: &[&str] = &["inputs", "outputs", "acceptance"];
const TEST_FIELDS: &[&str] = &["name", "command", "timeout_secs"];

/// Where a published skill is visible.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SkillScope {
    Global,
    Tenant,
    Project(String),
}

impl fmt::Display for SkillScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Global => f.write_str("global"),
            Self::Tenant => f.write_str("tenant"),
            Self::Project(p) => write!(f, "project:{p}"),
        }
    }
}

impl FromStr for SkillScope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "global" => Ok(Self::Global),
            "tenant" => Ok(Self::Tenant),
            _ => match s.strip_prefix("project:") {
                Some(p)
                    if !p.is_empty()
                        && p.len() <= 128
                        && p.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
                {
                    Ok(Self::Project(p.to_owned()))
                }
                Some(_) => Err(format!(
                    "project name in scope {s:?} must be 1-128 of A-Z a-z 0-9 - _ ."
                )),
                None => Err(format!(
                    "scope {s:?} must be \"global\", \"tenant\" or \"project:<name>\""
                )),
            },
        }
    }
}

impl Serialize for SkillScope {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SkillScope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// What a skill needs from the harness that runs it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requirements {
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub permissions: Vec<String>,
    /// Environment variables the skill reads.
    #[serde(default)]
    pub environment: Vec<String>,
}

/// What goes in, what comes out, and how to tell the result is acceptable. Each part may be
/// written as one string or a list of strings; it is kept as a list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contract {
    #[serde(default)]
    pub inputs: Vec<String>,
    #[serde(default)]
    pub outputs: Vec<String>,
    #[serde(default)]
    pub acceptance: Vec<String>,
}

/// A test the registry runs before a version may leave Draft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestSpec {
    pub name: String,
    /// argv; run from the skill directory, never through a shell.
    pub command: Vec<String>,
    pub timeout_secs: u64,
}

/// The parsed `skill.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub owner: String,
    pub version: semver::Version,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<SkillScope>,
    #[serde(default)]
    pub requires: Requirements,
    #[serde(default)]
    pub contract: Contract,
    #[serde(default)]
    pub models: Vec<String>,
    #[serde(default)]
    pub tests: Vec<TestSpec>,
}

/// Parses and checks the text of `skill.toml`. Returns the manifest only when it has no errors.
pub fn parse_manifest(text: &str, mode: ValidationMode) -> (Option<Manifest>, Vec<Diagnostic>) {
    let mut c = Checker {
        diags: Vec::new(),
        mode,
    };
    if text.len() > MAX_MANIFEST_BYTES {
        c.error(
            None,
            Rule::ManifestTooLarge,
            format!(
                "skill.toml is {} bytes, over the limit of {MAX_MANIFEST_BYTES}",
                text.len()
            ),
        );
        return (None, c.diags);
    }
    let table = match text.parse::<Table>() {
        Ok(t) => t,
        Err(e) => {
            c.error(
                None,
                Rule::ManifestSyntax,
                format!("invalid TOML: {}", e.message().trim()),
            );
            return (None, c.diags);
        }
    };
    let manifest = c.manifest(&table);
    let ok = !c.diags.iter().any(Diagnostic::is_error);
    (manifest.filter(|_| ok), c.diags)
}

struct Checker {
    diags: Vec<Diagnostic>,
    mode: ValidationMode,
}

impl Checker {
    fn error(&mut self, field: Option<&str>, rule: Rule, msg: impl Into<String>) {
        self.diags
            .push(Diagnostic::error(MANIFEST_FILE, field, rule, msg));
    }

    fn unknown_keys(&mut self, table: &Table, prefix: &str, known: &[&str]) {
        for key in table.keys().filter(|k| !known.contains(&k.as_str())) {
            let field = format!("{prefix}{key}");
            let msg = format!("unknown field {field:?}; allowed: {}", known.join(", "));
            let d = match self.mode {
                ValidationMode::Strict => {
                    Diagnostic::error(MANIFEST_FILE, Some(&field), Rule::ManifestFieldUnknown, msg)
                }
                ValidationMode::Lenient => Diagnostic::warning(
                    MANIFEST_FILE,
                    Some(&field),
                    Rule::ManifestFieldUnknown,
                    msg,
                ),
            };
            self.diags.push(d);
        }
    }

    fn string(&mut self, table: &Table, key: &str, required: bool) -> Option<String> {
        match table.get(key) {
            None if required => {
                self.error(
                    Some(key),
                    Rule::ManifestFieldMissing,
                    format!("missing required field {key:?}"),
                );
                None
            }
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.error(
                    Some(key),
                    Rule::ManifestFieldType,
                    format!("{key:?} must be a string"),
                );
                None
            }
        }
    }

    /// A list of non-blank strings; `allow_single` also takes one bare string.
    fn string_list(
        &mut self,
        field: &str,
        v: Option<&Value>,
        rule: Rule,
        allow_single: bool,
    ) -> Vec<String> {
        let mut out = Vec::new();
        match v {
            None => {}
            Some(Value::String(s)) if allow_single => {
                // A blank single string (the `init` skeleton) means "nothing declared yet".
                out.extend(Some(s.clone()).filter(|s| !s.trim().is_empty()))
            }
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) if !s.trim().is_empty() => out.push(s.clone()),
                        _ => self.error(
                            Some(&format!("{field}[{i}]")),
                            rule,
                            format!("entries of {field:?} must be non-empty strings"),
                        ),
                    }
                }
            }
            Some(_) => {
                let what = if allow_single {
                    "a string or a list of strings"
                } else {
                    "a list of strings"
                };
                self.error(Some(field), rule, format!("{field:?} must be {what}"));
            }
        }
        out
    }

    fn sub_table<'t>(&mut self, table: &'t Table, key: &str) -> Option<&'t Table> {
        match table.get(key) {
            None => None,
            Some(Value::Table(t)) => Some(t),
            Some(_) => {
                self.error(
                    Some(key),
                    Rule::ManifestFieldType,
                    format!("{key:?} must be a table"),
                );
                None
            }
        }
    }

    fn manifest(&mut self, t: &Table) -> Option<Manifest> {
        self.unknown_keys(t, "", TOP_FIELDS);

        let owner = self.string(t, "owner", true);
        if owner.as_deref().is_some_and(|o| o.trim().is_empty()) {
            self.error(Some("owner"), Rule::OwnerEmpty, "owner must not be blank");
        }
        let version =
            self.string(t, "version", true)
                .and_then(|v| match semver::Version::parse(&v) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        self.error(
                            Some("version"),
                            Rule::VersionInvalid,
                            format!("version {v:?} is not semver: {e}"),
                        );
                        None
                    }
                });
        let scope = self
            .string(t, "scope", false)
            .and_then(|s| match s.parse::<SkillScope>() {
                Ok(s) => Some(s),
                Err(msg) => {
                    self.error(Some("scope"), Rule::ScopeInvalid, msg);
                    None
                }
            });

        let mut requires = Requirements::default();
        if let Some(r) = self.sub_table(t, "requires") {
            self.unknown_keys(r, "requires.", REQUIRES_FIELDS);
            let rule = Rule::RequiresEntryInvalid;
            requires.tools = self.string_list("requires.tools", r.get("tools"), rule, false);
            requires.permissions =
                self.string_list("requires.permissions", r.get("permissions"), rule, false);
            requires.environment =
                self.string_list("requires.environment", r.get("environment"), rule, false);
        }

        let mut contract = Contract::default();
        if let Some(ct) = self.sub_table(t, "contract") {
            self.unknown_keys(ct, "contract.", CONTRACT_FIELDS);
            let rule = Rule::ContractInvalid;
            contract.inputs = self.string_list("contract.inputs", ct.get("inputs"), rule, true);
            contract.outputs = self.string_list("contract.outputs", ct.get("outputs"), rule, true);
            contract.acceptance =
                self.string_list("contract.acceptance", ct.get("acceptance"), rule, true);
        }

        let models = self.string_list("models", t.get("models"), Rule::ModelsEntryInvalid, false);
        let tests = self.tests(t.get("tests"));

        Some(Manifest {
            owner: owner?,
            version: version?,
            scope,
            requires,
            contract,
            models,
            tests,
        })
    }

    fn tests(&mut self, v: Option<&Value>) -> Vec<TestSpec> {
        let mut out = Vec::new();
        let items = match v {
            None => return out,
            Some(Value::Array(items)) => items,
            Some(_) => {
                self.error(
                    Some("tests"),
                    Rule::ManifestFieldType,
                    "tests must be an array of tables ([[tests]])",
                );
                return out;
            }
        };
        let mut seen = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let Value::Table(t) = item else {
                self.error(
                    Some(&format!("tests[{i}]")),
                    Rule::ManifestFieldType,
                    "each test must be a table",
                );
                continue;
            };
            self.unknown_keys(t, &format!("tests[{i}]."), TEST_FIELDS);
            let name_field = format!("tests[{i}].name");
            let name = match t.get("name") {
                Some(Value::String(s))
                    if !s.is_empty()
                        && s.len() <= 64
                        && s.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
                {
                    if !seen.insert(s.clone()) {
                        self.error(
                            Some(&name_field),
                            Rule::TestNameDuplicate,
                            format!("test name {s:?} is used twice"),
                        );
                    }
                    Some(s.clone())
                }
                _ => {
                    self.error(
                        Some(&name_field),
                        Rule::TestNameInvalid,
                        "test name must be 1-64 of A-Z a-z 0-9 - _ .",
                    );
                    None
                }
            };
            let cmd_field = format!("tests[{i}].command");
            let command = match t.get("command") {
                Some(Value::Array(_)) => {
                    let argv = self.string_list(
                        &cmd_field,
                        t.get("command"),
                        Rule::TestCommandEmpty,
                        false,
                    );
                    if argv.is_empty() {
                        self.error(
                            Some(&cmd_field),
                            Rule::TestCommandEmpty,
                            "test command must not be empty",
                        );
                    }
                    argv
                }
                _ => {
                    self.error(
                        Some(&cmd_field),
                        Rule::TestCommandEmpty,
                        "test command must be a non-empty argv list, e.g. [\"python3\", \"scripts/test.py\"]",
                    );
                    Vec::new()
                }
            };
            let timeout_secs = match t.get("timeout_secs") {
                None => DEFAULT_TEST_TIMEOUT_SECS,
                Some(Value::Integer(n)) if (1..=MAX_TEST_TIMEOUT_SECS as i64).contains(n) => {
                    *n as u64
                }
                Some(_) => {
                    self.error(
                        Some(&format!("tests[{i}].timeout_secs")),
                        Rule::TestTimeoutInvalid,
                        format!(
                            "timeout_secs must be an integer from 1 to {MAX_TEST_TIMEOUT_SECS}"
                        ),
                    );
                    DEFAULT_TEST_TIMEOUT_SECS
                }
            };
            if let Some(name) = name {
                out.push(TestSpec {
                    name,
                    command,
                    timeout_secs,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &str, mode: ValidationMode) -> Vec<&'static str> {
        parse_manifest(text, mode)
            .1
            .iter()
            .map(|d| d.rule.code())
            .collect()
    }

    #[test]
    fn a_full_manifest_parses() {
        let text = r#"
owner = "team"
version = "1.2.3-beta.1"
scope = "project:web"
models = ["claude-sonnet-4"]
[requires]
tools = ["bash"]
permissions = ["network"]
environment = ["GITHUB_TOKEN"]
[contract]
inputs = "a PDF"
outputs = ["text", "tables"]
[[tests]]
name = "smoke"
command = ["python3", "t.py"]
timeout_secs = 30
[[tests]]
name = "slow"
command = ["true"]
"#;
        let (m, d) = parse_manifest(text, ValidationMode::Strict);
        assert!(d.is_empty(), "{d:?}");
        let m = m.unwrap();
        assert_eq!(m.version, semver::Version::parse("1.2.3-beta.1").unwrap());
        assert_eq!(m.scope, Some(SkillScope::Project("web".into())));
        assert_eq!(m.contract.inputs, ["a PDF"]);
        assert_eq!(m.tests[1].timeout_secs, DEFAULT_TEST_TIMEOUT_SECS);
    }

    #[test]
    fn scope_round_trips() {
        for s in ["global", "tenant", "project:a.b_c-1"] {
            assert_eq!(s.parse::<SkillScope>().unwrap().to_string(), s);
        }
        for s in ["project:", "user", "project:a b"] {
            assert!(s.parse::<SkillScope>().is_err(), "{s}");
        }
    }

    #[test]
    fn each_problem_has_its_code() {
        let m = ValidationMode::Strict;
        assert_eq!(codes("owner = ", m), ["manifest.syntax"]);
        assert_eq!(
            codes("", m),
            ["manifest.field_missing", "manifest.field_missing"]
        );
        assert_eq!(
            codes("owner = \"a\"\nversion = \"1.0\"", m),
            ["version.invalid"]
        );
        assert_eq!(
            codes("owner = \" \"\nversion = \"1.0.0\"", m),
            ["owner.empty"]
        );
        assert_eq!(
            codes("owner = \"a\"\nversion = \"1.0.0\"\nscope = \"planet\"", m),
            ["scope.invalid"]
        );
        assert_eq!(
            codes("owner = \"a\"\nversion = 1", m),
            ["manifest.field_type"]
        );
        assert_eq!(
            codes(
                "owner = \"a\"\nversion = \"1.0.0\"\n[requires]\ntools = [\"\", 3]",
                m
            ),
            ["requires.entry_invalid", "requires.entry_invalid"]
        );
        assert_eq!(
            codes("owner = \"a\"\nversion = \"1.0.0\"\nmodels = \"x\"", m),
            ["models.entry_invalid"]
        );
        assert_eq!(
            codes(
                "owner = \"a\"\nversion = \"1.0.0\"\n[contract]\ninputs = 3",
                m
            ),
            ["contract.invalid"]
        );
        let tests = "owner = \"a\"\nversion = \"1.0.0\"\n[[tests]]\nname = \"t\"\ncommand = []\n[[tests]]\nname = \"t\"\ncommand = \"sh -c x\"\ntimeout_secs = 0\n[[tests]]\ncommand = [\"x\"]";
        assert_eq!(
            codes(tests, m),
            [
                "tests.command_empty",
                "tests.name_duplicate",
                "tests.command_empty",
                "tests.timeout_invalid",
                "tests.name_invalid"
            ]
        );
    }

    #[test]
    fn unknown_keys_error_in_strict_and_warn_in_lenient() {
        let text = "owner = \"a\"\nversion = \"1.0.0\"\nhomepage = \"x\"\n[requires]\nnet = true";
        let (m, d) = parse_manifest(text, ValidationMode::Strict);
        assert!(m.is_none());
        assert_eq!(d.len(), 2);
        assert!(
            d.iter()
                .all(|d| d.rule == Rule::ManifestFieldUnknown && d.is_error())
        );
        assert_eq!(d[1].field.as_deref(), Some("requires.net"));
        let (m, d) = parse_manifest(text, ValidationMode::Lenient);
        assert!(m.is_some());
        assert!(d.iter().all(|d| !d.is_error()));
    }
}
