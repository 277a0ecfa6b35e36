//! `SKILL.md`: YAML front matter between `---` lines, then a Markdown body, per the open Agent
//! Skills format. The rules and their order follow the reference validator `skills-ref` 0.1.1
//! (see the crate README for the few deliberate differences).
//!
//! The front matter comes from anyone, so it is read within fixed bounds before any rule is
//! checked: [`MAX_SKILL_MD_BYTES`], [`MAX_FRONTMATTER_BYTES`], no anchors or aliases at all
//! (`frontmatter.alias`: an alias bomb is refused at its first anchor, before anything is
//! expanded), [`MAX_FRONTMATTER_DEPTH`] and [`MAX_FRONTMATTER_NODES`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

use crate::diagnostic::{Diagnostic, Rule, ValidationMode};
use crate::error::{SdkError, SdkResult};
use crate::yaml::{self, Node, YamlError};

/// Largest `SKILL.md`, in bytes. The biggest public skill's is 74 KB; instructions that need
/// more belong in `references/`.
pub const MAX_SKILL_MD_BYTES: usize = 1024 * 1024;
/// Largest front matter (the YAML between the `---` lines), in bytes. The format's fields fit
/// in under 3 KB (name 64, description 1024, compatibility 500 characters).
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;
pub use crate::yaml::{MAX_FRONTMATTER_DEPTH, MAX_FRONTMATTER_NODES};

pub const MAX_NAME_LEN: usize = 64;
pub const MAX_DESCRIPTION_LEN: usize = 1024;
pub const MAX_COMPATIBILITY_LEN: usize = 500;

/// Top-level front-matter keys the Agent Skills format defines.
pub const KNOWN_FIELDS: &[&str] = &[
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

/// The parsed front matter of a `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Frontmatter {
    pub name: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// `allowed-tools`, split on whitespace when written as one string.
    #[serde(
        default,
        rename = "allowed-tools",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub allowed_tools: Vec<String>,
    /// Keys outside the format, kept (as JSON) when lenient mode let them through.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// `SKILL.md` split into its two parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillMdParts<'a> {
    pub yaml: &'a str,
    pub body: &'a str,
}

/// Splits `content` (already LF-normalised) into front matter and body.
///
/// The first line must be `---`; the front matter ends at the next line that is `---`.
/// Trailing whitespace on the delimiter lines is tolerated.
pub fn split_skill_md(content: &str) -> Result<SkillMdParts<'_>, Rule> {
    let mut lines = content.split_inclusive('\n');
    let first = lines.next().ok_or(Rule::FrontmatterMissing)?;
    if first.trim_end() != "---" {
        return Err(Rule::FrontmatterMissing);
    }
    let yaml_start = first.len();
    let mut offset = yaml_start;
    for line in lines {
        if line.trim_end() == "---" {
            return Ok(SkillMdParts {
                yaml: &content[yaml_start..offset],
                body: &content[offset + line.len()..],
            });
        }
        offset += line.len();
    }
    Err(Rule::FrontmatterUnclosed)
}

/// Reads front matter within the bounds of the module doc; `Err` is the one diagnostic that
/// stopped it.
fn read_yaml(file: &str, yaml: &str) -> Result<Node, Diagnostic> {
    if yaml.len() > MAX_FRONTMATTER_BYTES {
        return Err(Diagnostic::error(
            file,
            None,
            Rule::FrontmatterTooLarge,
            format!(
                "front matter is {} bytes, over the limit of {MAX_FRONTMATTER_BYTES}",
                yaml.len()
            ),
        ));
    }
    yaml::parse(yaml).map_err(|e| match e {
        YamlError::Syntax(msg) => Diagnostic::error(
            file,
            None,
            Rule::FrontmatterSyntax,
            format!("invalid YAML in front matter: {msg}"),
        ),
        YamlError::AnchorOrAlias => Diagnostic::error(
            file,
            None,
            Rule::FrontmatterAlias,
            "YAML anchors (&) and aliases (*) are not allowed in front matter",
        ),
        YamlError::TooDeep => Diagnostic::error(
            file,
            None,
            Rule::FrontmatterTooDeep,
            format!("front matter nests deeper than {MAX_FRONTMATTER_DEPTH} levels"),
        ),
        YamlError::TooManyNodes => Diagnostic::error(
            file,
            None,
            Rule::FrontmatterTooManyNodes,
            format!("front matter has more than {MAX_FRONTMATTER_NODES} YAML nodes"),
        ),
    })
}

/// The front matter `yaml` (the first part of [`split_skill_md`]) as a JSON object, value for
/// value as YAML reads it (numbers stay numbers; a value under a foreign tag `!t` becomes
/// `{"!t": value}`), for serving it beside the file. Read with the same bounds as
/// [`parse_skill_md`]: the error's code is the diagnostic's (`frontmatter.alias`,
/// `frontmatter.too_large`, `frontmatter.syntax`, …). Empty front matter is an empty object.
pub fn frontmatter_json(yaml: &str) -> SdkResult<serde_json::Map<String, serde_json::Value>> {
    let fail = |rule: Rule, msg: &str| {
        SdkError::FrontMatter(Box::new(Diagnostic::error("SKILL.md", None, rule, msg)))
    };
    match read_yaml("SKILL.md", yaml).map_err(|d| SdkError::FrontMatter(Box::new(d)))? {
        Node::Null => Ok(serde_json::Map::new()),
        node @ Node::Map(_) => match node.to_json() {
            Some(serde_json::Value::Object(map)) => Ok(map),
            _ => Err(fail(
                Rule::FieldType,
                "front matter mapping keys must be scalars",
            )),
        },
        _ => Err(fail(
            Rule::FrontmatterNotMapping,
            "SKILL.md front matter must be a YAML mapping",
        )),
    }
}

/// The front matter as written: the format's fields, each still the YAML node it was (so that
/// a wrong type is reported per field), and every other key.
#[derive(Debug, Default)]
struct RawFrontmatter {
    name: Option<Node>,
    description: Option<Node>,
    license: Option<Node>,
    compatibility: Option<Node>,
    metadata: Option<Node>,
    allowed_tools: Option<Node>,
    /// Keys outside [`KNOWN_FIELDS`], sorted.
    unknown: BTreeMap<String, Node>,
}

impl RawFrontmatter {
    /// Sorts the entries of the top-level mapping into fields; a key that is not a scalar is
    /// reported and dropped. A repeated key cannot reach here: the reader refuses it.
    fn from_entries(file: &str, entries: Vec<(Node, Node)>, diags: &mut Vec<Diagnostic>) -> Self {
        let mut raw = Self::default();
        for (k, v) in entries {
            let Some(key) = k.scalar_string() else {
                diags.push(Diagnostic::error(
                    file,
                    None,
                    Rule::FieldType,
                    "front matter keys must be strings",
                ));
                continue;
            };
            let slot = match key.as_str() {
                "name" => &mut raw.name,
                "description" => &mut raw.description,
                "license" => &mut raw.license,
                "compatibility" => &mut raw.compatibility,
                "metadata" => &mut raw.metadata,
                "allowed-tools" => &mut raw.allowed_tools,
                _ => {
                    raw.unknown.insert(key, v);
                    continue;
                }
            };
            *slot = Some(v);
        }
        raw
    }
}

/// Parses and checks the text of `SKILL.md`.
///
/// `file` names the file in diagnostics; `dir_name`, when known, must equal the skill name.
/// Returns the front matter when it could be read far enough to have a name and a
/// description, and the Markdown body (trimmed), plus every diagnostic found.
pub fn parse_skill_md(
    file: &str,
    content: &str,
    dir_name: Option<&str>,
    mode: ValidationMode,
) -> (Option<Frontmatter>, String, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    if content.len() > MAX_SKILL_MD_BYTES {
        diags.push(Diagnostic::error(
            file,
            None,
            Rule::SkillMdTooLarge,
            format!(
                "SKILL.md is {} bytes, over the limit of {MAX_SKILL_MD_BYTES}",
                content.len()
            ),
        ));
        return (None, String::new(), diags);
    }
    let content = content.replace("\r\n", "\n");
    let parts = match split_skill_md(&content) {
        Ok(p) => p,
        Err(rule) => {
            let msg = match rule {
                Rule::FrontmatterMissing => "SKILL.md must start with YAML front matter (---)",
                _ => "SKILL.md front matter is not closed with a --- line",
            };
            diags.push(Diagnostic::error(file, None, rule, msg));
            return (None, String::new(), diags);
        }
    };
    let body = parts.body.trim().to_owned();
    let entries = match read_yaml(file, parts.yaml) {
        Ok(Node::Map(entries)) => entries,
        Ok(_) => {
            diags.push(Diagnostic::error(
                file,
                None,
                Rule::FrontmatterNotMapping,
                "SKILL.md front matter must be a YAML mapping",
            ));
            return (None, body, diags);
        }
        Err(d) => {
            diags.push(d);
            return (None, body, diags);
        }
    };
    let raw = RawFrontmatter::from_entries(file, entries, &mut diags);
    let fm = check_fields(file, &raw, dir_name, mode, &mut diags);
    (fm, body, diags)
}

fn check_fields(
    file: &str,
    fields: &RawFrontmatter,
    dir_name: Option<&str>,
    mode: ValidationMode,
    diags: &mut Vec<Diagnostic>,
) -> Option<Frontmatter> {
    let mut extra = BTreeMap::new();
    for (key, value) in &fields.unknown {
        let msg = format!(
            "unexpected field {key:?} in front matter; allowed: {}",
            KNOWN_FIELDS.join(", ")
        );
        match mode {
            ValidationMode::Strict => {
                diags.push(Diagnostic::error(file, Some(key), Rule::FieldUnknown, msg))
            }
            ValidationMode::Lenient => {
                diags.push(Diagnostic::warning(
                    file,
                    Some(key),
                    Rule::FieldUnknown,
                    msg,
                ));
                extra.insert(key.clone(), value.to_json().unwrap_or_default());
            }
        }
    }

    let name = required_string(file, &fields.name, "name", Rule::NameMissing, diags)
        .map(|n| n.trim().to_owned());
    if let Some(name) = &name {
        check_name(file, name, dir_name, diags);
    }
    let description = required_string(
        file,
        &fields.description,
        "description",
        Rule::DescriptionMissing,
        diags,
    );
    if let Some(d) = &description {
        check_description(file, d, diags);
    }
    let compatibility = optional_string(file, &fields.compatibility, "compatibility", diags);
    if let Some(c) = &compatibility {
        let len = c.chars().count();
        if len > MAX_COMPATIBILITY_LEN {
            diags.push(Diagnostic::error(
                file,
                Some("compatibility"),
                Rule::CompatibilityTooLong,
                format!("compatibility exceeds {MAX_COMPATIBILITY_LEN} characters ({len})"),
            ));
        }
    }
    let license = optional_string(file, &fields.license, "license", diags);
    let metadata = check_metadata(file, fields.metadata.as_ref(), diags);
    let allowed_tools = check_allowed_tools(file, fields.allowed_tools.as_ref(), diags);

    Some(Frontmatter {
        name: name?,
        description: description?,
        license,
        compatibility,
        metadata,
        allowed_tools,
        extra,
    })
}

fn required_string(
    file: &str,
    field: &Option<Node>,
    key: &str,
    missing: Rule,
    diags: &mut Vec<Diagnostic>,
) -> Option<String> {
    let Some(v) = field else {
        diags.push(Diagnostic::error(
            file,
            Some(key),
            missing,
            format!("missing required field in front matter: {key}"),
        ));
        return None;
    };
    let s = v.scalar_string();
    if s.is_none() {
        diags.push(Diagnostic::error(
            file,
            Some(key),
            Rule::FieldType,
            format!("field {key:?} must be a string"),
        ));
    }
    s
}

/// YAML scalars read as strings, as the reference parser (strictyaml) reads them; `~`/empty
/// becomes the empty string.
fn optional_string(
    file: &str,
    field: &Option<Node>,
    key: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<String> {
    let v = field.as_ref()?;
    let s = v.scalar_string();
    if s.is_none() {
        diags.push(Diagnostic::error(
            file,
            Some(key),
            Rule::FieldType,
            format!("field {key:?} must be a string"),
        ));
    }
    s
}

/// Checks a skill name: 1–64 of `a-z0-9-`, no leading/trailing/double hyphen, equal to the
/// directory name when one is given.
pub fn check_name(file: &str, name: &str, dir_name: Option<&str>, diags: &mut Vec<Diagnostic>) {
    let f = Some("name");
    if name.is_empty() {
        diags.push(Diagnostic::error(
            file,
            f,
            Rule::NameEmpty,
            "name must be a non-empty string",
        ));
        return;
    }
    let len = name.chars().count();
    if len > MAX_NAME_LEN {
        diags.push(Diagnostic::error(
            file,
            f,
            Rule::NameTooLong,
            format!("skill name {name:?} exceeds {MAX_NAME_LEN} characters ({len})"),
        ));
    }
    if name.chars().any(|c| c.is_uppercase()) {
        diags.push(Diagnostic::error(
            file,
            f,
            Rule::NameUppercase,
            format!("skill name {name:?} must be lowercase"),
        ));
    }
    if name
        .chars()
        .any(|c| !(c.is_ascii_alphanumeric() || c == '-'))
    {
        diags.push(Diagnostic::error(
            file,
            f,
            Rule::NameInvalidChars,
            format!("skill name {name:?} may contain only a-z, 0-9 and '-'"),
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        diags.push(Diagnostic::error(
            file,
            f,
            Rule::NameHyphenEdge,
            "skill name cannot start or end with a hyphen",
        ));
    }
    if name.contains("--") {
        diags.push(Diagnostic::error(
            file,
            f,
            Rule::NameDoubleHyphen,
            "skill name cannot contain consecutive hyphens",
        ));
    }
    if let Some(dir) = dir_name {
        // NFC on both sides: macOS hands out decomposed directory names.
        if dir.nfc().collect::<String>() != name.nfc().collect::<String>() {
            diags.push(Diagnostic::error(
                file,
                f,
                Rule::NameMismatchDir,
                format!("directory name {dir:?} must match skill name {name:?}"),
            ));
        }
    }
}

/// Checks a description: non-blank, at most 1024 characters (Unicode scalar values, untrimmed,
/// as the reference counts them).
pub fn check_description(file: &str, description: &str, diags: &mut Vec<Diagnostic>) {
    let f = Some("description");
    if description.trim().is_empty() {
        diags.push(Diagnostic::error(
            file,
            f,
            Rule::DescriptionEmpty,
            "description must be a non-empty string",
        ));
        return;
    }
    let len = description.chars().count();
    if len > MAX_DESCRIPTION_LEN {
        diags.push(Diagnostic::error(
            file,
            f,
            Rule::DescriptionTooLong,
            format!("description exceeds {MAX_DESCRIPTION_LEN} characters ({len})"),
        ));
    }
}

fn check_metadata(
    file: &str,
    value: Option<&Node>,
    diags: &mut Vec<Diagnostic>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(value) = value else { return out };
    let map = match value {
        Node::Map(m) => m,
        Node::Null => return out,
        _ => {
            diags.push(Diagnostic::error(
                file,
                Some("metadata"),
                Rule::FieldType,
                "metadata must be a mapping of string keys to string values",
            ));
            return out;
        }
    };
    for (k, v) in map {
        match (k.scalar_string(), v.scalar_string()) {
            (Some(k), Some(v)) => {
                out.insert(k, v);
            }
            (k, _) => {
                let field = format!("metadata.{}", k.unwrap_or_else(|| "?".into()));
                diags.push(Diagnostic::error(
                    file,
                    Some(&field),
                    Rule::MetadataNotString,
                    "metadata keys and values must be strings",
                ));
            }
        }
    }
    out
}

fn check_allowed_tools(
    file: &str,
    value: Option<&Node>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<String> {
    let f = Some("allowed-tools");
    match value {
        None | Some(Node::Null) => Vec::new(),
        Some(Node::Str(s)) => s.split_whitespace().map(str::to_owned).collect(),
        Some(Node::Seq(items)) => {
            let mut out = Vec::new();
            for item in items {
                match item {
                    Node::Str(s) if !s.trim().is_empty() => out.push(s.trim().to_owned()),
                    _ => diags.push(Diagnostic::error(
                        file,
                        f,
                        Rule::AllowedToolsInvalid,
                        "allowed-tools entries must be non-empty strings",
                    )),
                }
            }
            out
        }
        Some(_) => {
            diags.push(Diagnostic::error(
                file,
                f,
                Rule::AllowedToolsInvalid,
                "allowed-tools must be a space-delimited string or a list of strings",
            ));
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(d: &[Diagnostic]) -> Vec<&'static str> {
        d.iter().map(|d| d.rule.code()).collect()
    }

    fn parse(
        text: &str,
        dir: Option<&str>,
        mode: ValidationMode,
    ) -> (Option<Frontmatter>, Vec<Diagnostic>) {
        let (fm, _, d) = parse_skill_md("SKILL.md", text, dir, mode);
        (fm, d)
    }

    #[test]
    fn split_requires_opening_and_closing_lines() {
        assert_eq!(
            split_skill_md("no front matter"),
            Err(Rule::FrontmatterMissing)
        );
        assert_eq!(
            split_skill_md("---\nname: a\n"),
            Err(Rule::FrontmatterUnclosed)
        );
        let p = split_skill_md("---\nname: a\n---\nbody --- text\n").unwrap();
        assert_eq!(p.yaml, "name: a\n");
        assert_eq!(p.body, "body --- text\n");
    }

    #[test]
    fn a_minimal_skill_is_valid() {
        let (fm, d) = parse(
            "---\nname: pdf\ndescription: Reads PDFs.\n---\n# Body\n",
            Some("pdf"),
            ValidationMode::Strict,
        );
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(fm.unwrap().name, "pdf");
    }

    #[test]
    fn crlf_is_accepted() {
        let (_, d) = parse(
            "---\r\nname: pdf\r\ndescription: x\r\n---\r\nbody",
            Some("pdf"),
            ValidationMode::Strict,
        );
        assert!(d.is_empty(), "{d:?}");
    }

    #[test]
    fn name_rules_each_have_a_code() {
        let cases = [
            ("Pdf", "name.uppercase"),
            ("-pdf", "name.hyphen_edge"),
            ("pdf-", "name.hyphen_edge"),
            ("pd--f", "name.double_hyphen"),
            ("pd_f", "name.invalid_chars"),
            ("pdé", "name.invalid_chars"),
            ("\"\"", "name.empty"),
        ];
        for (name, code) in cases {
            let (_, d) = parse(
                &format!("---\nname: {name}\ndescription: x\n---\n"),
                None,
                ValidationMode::Strict,
            );
            assert!(codes(&d).contains(&code), "{name}: {:?}", codes(&d));
        }
        let long = "a".repeat(65);
        let (_, d) = parse(
            &format!("---\nname: {long}\ndescription: x\n---\n"),
            None,
            ValidationMode::Strict,
        );
        assert_eq!(codes(&d), ["name.too_long"]);
        let (_, d) = parse(
            "---\nname: pdf\ndescription: x\n---\n",
            Some("other"),
            ValidationMode::Strict,
        );
        assert_eq!(codes(&d), ["name.mismatch_dir"]);
    }

    #[test]
    fn description_and_compatibility_limits() {
        let d1024 = "é".repeat(1024);
        let (_, d) = parse(
            &format!("---\nname: a\ndescription: {d1024}\n---\n"),
            None,
            ValidationMode::Strict,
        );
        assert!(d.is_empty(), "counted in characters, not bytes: {d:?}");
        let (_, d) = parse(
            &format!("---\nname: a\ndescription: {d1024}x\n---\n"),
            None,
            ValidationMode::Strict,
        );
        assert_eq!(codes(&d), ["description.too_long"]);
        let (_, d) = parse(
            "---\nname: a\ndescription: '  '\n---\n",
            None,
            ValidationMode::Strict,
        );
        assert_eq!(codes(&d), ["description.empty"]);
        let c = "c".repeat(501);
        let (_, d) = parse(
            &format!("---\nname: a\ndescription: x\ncompatibility: {c}\n---\n"),
            None,
            ValidationMode::Strict,
        );
        assert_eq!(codes(&d), ["compatibility.too_long"]);
    }

    #[test]
    fn missing_fields_and_bad_yaml() {
        let (_, d) = parse("---\nlicense: MIT\n---\n", None, ValidationMode::Strict);
        assert_eq!(codes(&d), ["name.missing", "description.missing"]);
        let (_, d) = parse("---\nname: [unclosed\n---\n", None, ValidationMode::Strict);
        assert_eq!(codes(&d), ["frontmatter.syntax"]);
        let (_, d) = parse("---\n- a\n- b\n---\n", None, ValidationMode::Strict);
        assert_eq!(codes(&d), ["frontmatter.not_mapping"]);
        let (_, d) = parse(
            "---\nname:\n  nested: 1\ndescription: x\n---\n",
            None,
            ValidationMode::Strict,
        );
        assert_eq!(codes(&d), ["field.type"]);
    }

    #[test]
    fn strict_rejects_unknown_keys_lenient_warns_and_keeps_them() {
        let text = "---\nname: a\ndescription: x\nversion: 1.2.0\n---\n";
        let (fm, d) = parse(text, None, ValidationMode::Strict);
        assert_eq!(codes(&d), ["field.unknown"]);
        assert!(d[0].is_error());
        assert!(fm.is_some());
        let (fm, d) = parse(text, None, ValidationMode::Lenient);
        assert_eq!(codes(&d), ["field.unknown"]);
        assert!(!d[0].is_error());
        assert_eq!(fm.unwrap().extra["version"], serde_json::json!("1.2.0"));
    }

    #[test]
    fn allowed_tools_string_or_list_and_metadata_map() {
        let (fm, d) = parse(
            "---\nname: a\ndescription: x\nallowed-tools: Bash(git:*) Read\nmetadata:\n  author: me\n  rev: 3\n---\n",
            None,
            ValidationMode::Strict,
        );
        assert!(d.is_empty(), "{d:?}");
        let fm = fm.unwrap();
        assert_eq!(fm.allowed_tools, ["Bash(git:*)", "Read"]);
        assert_eq!(fm.metadata["rev"], "3");
        let (fm, d) = parse(
            "---\nname: a\ndescription: x\nallowed-tools:\n  - Read\n  - Write\n---\n",
            None,
            ValidationMode::Strict,
        );
        assert!(d.is_empty());
        assert_eq!(fm.unwrap().allowed_tools, ["Read", "Write"]);
        let (_, d) = parse(
            "---\nname: a\ndescription: x\nallowed-tools: {a: 1}\nmetadata:\n  k: [1]\n---\n",
            None,
            ValidationMode::Strict,
        );
        assert_eq!(codes(&d), ["metadata.not_string", "allowed_tools.invalid"]);
    }
}
