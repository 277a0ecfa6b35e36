//! A skill as a whole: `SKILL.md` plus the optional `skill.toml`, read from a directory or
//! from an archive, checked into a [`Report`].

use std::fs;
use std::io::Read as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::archive::SkillArchive;
use crate::diagnostic::{Diagnostic, Rule, ValidationMode, no_errors};
use crate::error::{SdkError, SdkResult};
use crate::frontmatter::{Frontmatter, MAX_SKILL_MD_BYTES, parse_skill_md};
use crate::manifest::{MANIFEST_FILE, MAX_MANIFEST_BYTES, Manifest, parse_manifest};

pub const SKILL_MD: &str = "SKILL.md";
/// Accepted, with a warning, when `SKILL.md` is absent (the reference validator accepts it).
pub const SKILL_MD_LOWERCASE: &str = "skill.md";

/// A skill that passed validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skill {
    pub frontmatter: Frontmatter,
    /// The Markdown body of `SKILL.md`, trimmed: what the model loads as instructions.
    pub instructions: String,
    pub manifest: Option<Manifest>,
}

impl Skill {
    pub fn name(&self) -> &str {
        &self.frontmatter.name
    }

    /// The manifest's version, else a semver `metadata.version` in the front matter.
    pub fn version(&self) -> Option<semver::Version> {
        match &self.manifest {
            Some(m) => Some(m.version.clone()),
            None => self
                .frontmatter
                .metadata
                .get("version")
                .and_then(|v| semver::Version::parse(v).ok()),
        }
    }
}

/// The outcome of validating a skill: every diagnostic, and the skill when there is no error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub diagnostics: Vec<Diagnostic>,
    pub skill: Option<Skill>,
}

impl Report {
    pub fn is_valid(&self) -> bool {
        no_errors(&self.diagnostics)
    }

    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_error())
    }

    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| !d.is_error())
    }

    /// The skill, or [`SdkError::Invalid`] with the errors.
    pub fn into_skill(self) -> SdkResult<Skill> {
        match self.skill {
            Some(s) if no_errors(&self.diagnostics) => Ok(s),
            _ => Err(SdkError::Invalid(
                self.diagnostics
                    .into_iter()
                    .filter(Diagnostic::is_error)
                    .collect(),
            )),
        }
    }
}

/// The raw inputs of validation, wherever they came from.
#[derive(Debug, Clone, Copy)]
pub struct SkillSource<'a> {
    /// The directory name, which must equal the skill name; `None` skips that check (archives).
    pub dir_name: Option<&'a str>,
    /// `(file name, bytes)` of `SKILL.md` (or `skill.md`).
    pub skill_md: Option<(&'a str, &'a [u8])>,
    pub manifest: Option<&'a [u8]>,
}

/// Validates a skill from its raw parts.
pub fn validate_source(src: SkillSource<'_>, mode: ValidationMode) -> Report {
    let mut diags = Vec::new();
    let Some((md_name, md_bytes)) = src.skill_md else {
        diags.push(Diagnostic::error(
            SKILL_MD,
            None,
            Rule::SkillMdMissing,
            "missing required file: SKILL.md",
        ));
        return Report {
            diagnostics: diags,
            skill: None,
        };
    };
    if md_name != SKILL_MD {
        diags.push(Diagnostic::warning(
            md_name,
            None,
            Rule::SkillMdLowercase,
            "the file should be named SKILL.md",
        ));
    }
    let Ok(md_text) = std::str::from_utf8(md_bytes) else {
        diags.push(Diagnostic::error(
            md_name,
            None,
            Rule::SkillMdNotUtf8,
            "SKILL.md is not valid UTF-8",
        ));
        return Report {
            diagnostics: diags,
            skill: None,
        };
    };
    let (frontmatter, instructions, md_diags) =
        parse_skill_md(md_name, md_text, src.dir_name, mode);
    diags.extend(md_diags);

    let manifest = match src.manifest {
        None => None,
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => {
                let (m, d) = parse_manifest(text, mode);
                diags.extend(d);
                m
            }
            Err(_) => {
                diags.push(Diagnostic::error(
                    MANIFEST_FILE,
                    None,
                    Rule::ManifestNotUtf8,
                    "skill.toml is not valid UTF-8",
                ));
                None
            }
        },
    };

    let skill = match frontmatter {
        Some(frontmatter) if no_errors(&diags) => Some(Skill {
            frontmatter,
            instructions,
            manifest,
        }),
        _ => None,
    };
    Report {
        diagnostics: diags,
        skill,
    }
}

/// Reads at most `limit + 1` bytes of `path`: enough for the validator to see that a file is
/// over its limit without reading all of it.
fn read_optional(path: &Path, limit: usize) -> SdkResult<Option<Vec<u8>>> {
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SdkError::io(path, e)),
    };
    let mut buf = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| SdkError::io(path, e))?;
    Ok(Some(buf))
}

/// Validates the skill directory `dir`. Content problems are diagnostics in the report; only
/// an unreadable or missing directory is an error.
pub fn validate_dir(dir: &Path, mode: ValidationMode) -> SdkResult<Report> {
    let meta = fs::metadata(dir).map_err(|e| SdkError::io(dir, e))?;
    if !meta.is_dir() {
        return Err(SdkError::NotADirectory(dir.to_owned()));
    }
    // Canonicalise so that `.` or `..` still yield the real directory name.
    let real = fs::canonicalize(dir).map_err(|e| SdkError::io(dir, e))?;
    let dir_name = real.file_name().map(|n| n.to_string_lossy().into_owned());

    let mut skill_md = None;
    for name in [SKILL_MD, SKILL_MD_LOWERCASE] {
        if let Some(bytes) = read_optional(&dir.join(name), MAX_SKILL_MD_BYTES)? {
            skill_md = Some((name, bytes));
            break;
        }
    }
    let manifest = read_optional(&dir.join(MANIFEST_FILE), MAX_MANIFEST_BYTES)?;
    Ok(validate_source(
        SkillSource {
            dir_name: dir_name.as_deref(),
            skill_md: skill_md.as_ref().map(|(n, b)| (*n, b.as_slice())),
            manifest: manifest.as_deref(),
        },
        mode,
    ))
}

/// Loads a valid skill from `dir`, or fails with [`SdkError::Invalid`] listing the errors.
pub fn load_dir(dir: &Path, mode: ValidationMode) -> SdkResult<Skill> {
    validate_dir(dir, mode)?.into_skill()
}

/// Validates the skill held in an archive. There is no directory name to compare the skill
/// name against.
pub fn validate_archive(archive: &SkillArchive, mode: ValidationMode) -> Report {
    let skill_md = [SKILL_MD, SKILL_MD_LOWERCASE]
        .into_iter()
        .find_map(|n| archive.contents(n).map(|b| (n, b)));
    validate_source(
        SkillSource {
            dir_name: None,
            skill_md,
            manifest: archive.contents(MANIFEST_FILE),
        },
        mode,
    )
}
