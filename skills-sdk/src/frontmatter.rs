//! `SKILL.md`: YAML front matter between `---` lines, then a Markdown body, per the open Agent
//! Skills format. The rules and their order follow the reference validator `skills-ref` 0.1.1
//! (see the crate README for the few deliberate differences).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_yaml::Value;
use unicode_normalization::UnicodeNormalization;

use crate::diagnostic::{Diagnostic, Rule, ValidationMode};
use crate::error::{SdkError, SdkResult};

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

/// The front matter `yaml` (the first part of [`split_skill_md`]) as a JSON object, value for
/// value as YAML reads it (numbers stay numbers), for serving it beside the file.
pub fn frontmatter_json(yaml: &str) -> SdkResult<serde_json::Map<String, serde_json::Value>> {
    serde_yaml::from_str(yaml).map_err(|e| {
        SdkError::FrontMatter(Box::new(Diagnostic::error(
            "SKILL.md",
            None,
            Rule::FrontmatterSyntax,
            format!("invalid YAML in front matter: {e}"),
        )))
    })
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
    let map = match serde_yaml::from_str::<Value>(parts.yaml) {
        Ok(Value::Mapping(m)) => m,
        Ok(_) => {
            diags.push(Diagnostic::error(
                file,
                None,
                Rule::FrontmatterNotMapping,
                "SKILL.md front matter must be a YAML mapping",
            ));
            return (None, body, diags);
        }
        Err(e) => {
            diags.push(Diagnostic::error(
                file,
                None,
                Rule::FrontmatterSyntax,
                format!("invalid YAML in front matter: {e}"),
            ));
            return (None, body, diags);
        }
    };

    let mut fields: BTreeMap<String, Value> = BTreeMap::new();
    for (k, v) in map {
        match scalar_string(&k) {
            Some(k) => {
                fields.insert(k, v);
            }
            None => diags.push(Diagnostic::error(
                file,
                None,
                Rule::FieldType,
                "front matter keys must be strings",
            )),
        }
    }

    let fm = check_fields(file, &fields, dir_name, mode, &mut diags);
    (fm, body, diags)
}

fn check_fields(
    file: &str,
    fields: &BTreeMap<String, Value>,
    dir_name: Option<&str>,
    mode: ValidationMode,
    diags: &mut Vec<Diagnostic>,
) -> Option<Frontmatter> {
    let mut extra = BTreeMap::new();
    for (key, value) in fields {
        if KNOWN_FIELDS.contains(&key.as_str()) {
            continue;
        }
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
                extra.insert(key.clone(), serde_json::to_value(value).unwrap_or_default());
            }
        }
    }

    let name = required_string(file, fields, "name", Rule::NameMissing, diags)
        .map(|n| n.trim().to_owned());
    if let Some(name) = &name {
        check_name(file, name, dir_name, diags);
    }
    let description = required_string(file, fields, "description", Rule::DescriptionMissing, diags);
    if let Some(d) = &description {
        check_description(file, d, diags);
    }
    let compatibility = optional_string(file, fields, "compatibility", diags);
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
    let license = optional_string(file, fields, "license", diags);
    let metadata = check_metadata(file, fields.get("metadata"), diags);
    let allowed_tools = check_allowed_tools(file, fields.get("allowed-tools"), diags);

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

/// YAML scalars read as strings, as the reference parser (strictyaml) reads them; `~`/empty
/// becomes the empty string.
fn scalar_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some(String::new()),
        Value::Tagged(t) => scalar_string(&t.value),
        Value::Sequence(_) | Value::Mapping(_) => None,
    }
}

fn required_string(
    file: &str,
    fields: &BTreeMap<String, Value>,
    key: &str,
    missing: Rule,
    diags: &mut Vec<Diagnostic>,
) -> Option<String> {
    let Some(v) = fields.get(key) else {
        diags.push(Diagnostic::error(
            file,
            Some(key),
            missing,
            format!("missing required field in front matter: {key}"),
        ));
        return None;
    };
    let s = scalar_string(v);
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

fn optional_string(
    file: &str,
    fields: &BTreeMap<String, Value>,
    key: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<String> {
    let v = fields.get(key)?;
    let s = scalar_string(v);
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
    value: Option<&Value>,
    diags: &mut Vec<Diagnostic>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(value) = value else { return out };
    let map = match value {
        Value::Mapping(m) => m,
        Value::Null => return out,
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
        match (scalar_string(k), scalar_string(v)) {
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
    value: Option<&Value>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<String> {
    let f = Some("allowed-tools");
    match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        Some(Value::Sequence(items)) => {
            let mut out = Vec::new();
            for item in items {
                match item {
                    Value::String(s) if !s.trim().is_empty() => out.push(s.trim().to_owned()),
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
