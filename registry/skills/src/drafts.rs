//! Skill drafts generated from procedures: a `SKILL.md` with the procedure, when to use it and
//! its evidence (each source by id, version and content hash), and a `skill.toml` with the
//! owner, version and scope, packed and published through the normal path
//! ([`SkillsService::publish`]: the validator and the scan), with a `Cites` edge from each
//! source to the new version, in the same commit. Deleting a source then flags the version, as
//! deleting any cited asset does.
//!
//! Which memories qualify is the services layer's rule (it knows memory); this module only
//! writes what it is given.

use registry_core::asset::AssetId;
use registry_core::derivation::{ChildStore, DerivationEdge, Relation};
use registry_core::principal::Principal;
use registry_core::{FieldError, FieldReason, Scope};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::Published;
use crate::service::SkillsService;

/// Most procedures one draft is made from.
pub const MAX_DRAFT_SOURCES: usize = 20;
/// Longest description a draft may be given (the Agent Skills limit).
pub const MAX_DRAFT_DESCRIPTION_CHARS: usize = 1024;
/// Longest memory id a draft names, in characters.
pub const MAX_MEMORY_ID_CHARS: usize = 128;

/// `POST /v1/skills/drafts/from-memory`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DraftFromMemoryRequest {
    /// The procedural memories the skill is made from, in the order the procedure follows
    /// (1-20, each once).
    #[schemars(length(min = 1, max = 20), inner(length(max = MAX_MEMORY_ID_CHARS)))]
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 20))]
    pub memory_ids: Vec<String>,
    /// The skill's name (Agent Skills rules: 1-64 of `a-z0-9-`).
    pub name: String,
    /// What the skill does and when to use it (default: generated from the procedures).
    #[serde(default)]
    pub description: Option<String>,
    /// Semver version of the draft (default `0.1.0`).
    #[serde(default)]
    pub version: Option<String>,
}

/// One procedure a draft is made from.
#[derive(Debug, Clone)]
pub struct ProcedureSource {
    pub id: AssetId,
    pub version: u32,
    pub content_hash: String,
    pub content: String,
    pub applicability: Vec<String>,
}

/// What a draft's sources were, as the answer shows them (ids and hashes only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DraftEvidence {
    pub memory_id: String,
    pub version: u32,
    pub content_hash: String,
}

fn invalid(field: &str, msg: impl Into<String>) -> Error {
    Error::validation(msg).with_details(FieldError::new(field).reason(FieldReason::Invalid))
}

/// One line of YAML: a double-quoted scalar with its escapes.
fn yaml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    yaml_string(s)
}

/// The first line of a procedure, cut to `max` characters on a word boundary.
fn gist(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.chars().count() <= max {
        return line.to_string();
    }
    let cut: String = line.chars().take(max).collect();
    match cut.rfind(' ') {
        Some(i) if i > max / 2 => format!("{}…", &cut[..i]),
        _ => format!("{cut}…"),
    }
}

fn description_of(req: &DraftFromMemoryRequest, sources: &[ProcedureSource]) -> Result<String> {
    if let Some(d) = &req.description {
        if registry_core::text::is_blank(d) || d.chars().count() > MAX_DRAFT_DESCRIPTION_CHARS {
            return Err(invalid(
                "description",
                format!("description must be 1-{MAX_DRAFT_DESCRIPTION_CHARS} characters"),
            ));
        }
        return Ok(d.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    let when: Vec<&str> = sources
        .iter()
        .flat_map(|s| s.applicability.iter().map(String::as_str))
        .collect();
    let first = gist(&sources[0].content, 300);
    let d = if when.is_empty() {
        format!("A reviewed procedure: {first} Use when a task calls for this procedure.")
    } else {
        format!(
            "A reviewed procedure: {first} Use when {}.",
            gist(&when.join("; "), 300)
        )
    };
    Ok(d.chars().take(MAX_DRAFT_DESCRIPTION_CHARS).collect())
}

/// The generated `SKILL.md`.
fn skill_md(name: &str, description: &str, sources: &[ProcedureSource]) -> String {
    let mut md = format!(
        "---\nname: {name}\ndescription: {}\nmetadata:\n  generated-from: procedural-memory\n---\n# {name}\n\n",
        yaml_string(description)
    );
    md.push_str("## When to use\n\n");
    let when: Vec<&String> = sources.iter().flat_map(|s| &s.applicability).collect();
    if when.is_empty() {
        md.push_str("- When a task calls for the procedure below.\n");
    } else {
        for w in when {
            md.push_str(&format!("- {}\n", w.trim()));
        }
    }
    md.push_str("\n## Procedure\n\n");
    for (i, s) in sources.iter().enumerate() {
        if sources.len() > 1 {
            md.push_str(&format!("### Part {}\n\n", i + 1));
        }
        md.push_str(s.content.trim());
        md.push_str("\n\n");
    }
    md.push_str("## Evidence\n\nReviewed procedural memories this skill was drafted from:\n\n");
    for s in sources {
        md.push_str(&format!(
            "- memory `{}` version {} (sha256 `{}`)\n",
            s.id, s.version, s.content_hash
        ));
    }
    md
}

fn skill_toml(owner: &str, version: &str, scope: &Scope) -> String {
    let scope = match &scope.project {
        Some(p) => format!("project:{p}"),
        None => "tenant".into(),
    };
    format!(
        "owner = {}\nversion = {}\nscope = {}\n",
        toml_string(owner),
        toml_string(version),
        toml_string(&scope)
    )
}

/// Packs the two files as a skill archive (the canonical form `pack_dir` writes).
fn archive(files: &[(&str, String)]) -> Result<Vec<u8>> {
    let mut sorted: Vec<&(&str, String)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut builder = tar::Builder::new(Vec::new());
    for (path, text) in sorted {
        skills_sdk::archive::append_file(&mut builder, path, false, text.as_bytes())
            .map_err(Error::internal)?;
    }
    let tar = builder.into_inner().map_err(Error::internal)?;
    skills_sdk::archive::gzip(&tar).map_err(Error::internal)
}

/// Generates and publishes a draft from `sources` (already checked by the caller) in `scope`,
/// citing each source. Returns the draft and the evidence it names.
pub fn draft_from_procedures(
    s: &SkillsService,
    p: &Principal,
    req: &DraftFromMemoryRequest,
    scope: &Scope,
    sources: &[ProcedureSource],
) -> Result<(Published, Vec<DraftEvidence>)> {
    if sources.is_empty() {
        return Err(invalid("memory_ids", "name at least one memory"));
    }
    // Checked before it is written into YAML: a name is the only unquoted scalar there.
    let mut diags = vec![];
    skills_sdk::frontmatter::check_name("SKILL.md", &req.name, None, &mut diags);
    if let Some(d) = diags.first() {
        return Err(invalid("name", d.to_string()));
    }
    let version = req.version.clone().unwrap_or_else(|| "0.1.0".into());
    if skills_sdk::semver::Version::parse(&version).is_err() {
        return Err(invalid(
            "version",
            format!("version {version:?} is not semver"),
        ));
    }
    let description = description_of(req, sources)?;
    let files = [
        ("SKILL.md", skill_md(&req.name, &description, sources)),
        ("skill.toml", skill_toml(&p.user, &version, scope)),
    ];
    let bytes = archive(&files)?;
    let cites: Vec<DerivationEdge> = sources
        .iter()
        .map(|src| DerivationEdge {
            parent: src.id.clone(),
            child: String::new(),
            relation: Relation::Cites,
            child_store: ChildStore::Assets,
        })
        .collect();
    let published = s.publish_citing(p, &bytes, None, cites)?;
    let evidence = sources
        .iter()
        .map(|s| DraftEvidence {
            memory_id: s.id.clone(),
            version: s.version,
            content_hash: s.content_hash.clone(),
        })
        .collect();
    Ok((published, evidence))
}
