//! `skillctl init`: a new skill directory that validates in strict mode.

use std::fs;
use std::path::{Path, PathBuf};

use crate::diagnostic::{Diagnostic, no_errors};
use crate::error::{SdkError, SdkResult};
use crate::frontmatter::check_name;
use crate::manifest::MANIFEST_FILE;
use crate::skill::SKILL_MD;

/// Creates `parent/name/` with a skeleton `SKILL.md` and `skill.toml` (version `0.1.0`,
/// scope `tenant`) and returns its path. Refuses an invalid name or a non-empty target.
pub fn init_skill(parent: &Path, name: &str, owner: &str) -> SdkResult<PathBuf> {
    let mut diags: Vec<Diagnostic> = Vec::new();
    check_name(SKILL_MD, name, None, &mut diags);
    if !no_errors(&diags) {
        return Err(SdkError::Invalid(diags));
    }
    let dir = parent.join(name);
    if fs::read_dir(&dir).is_ok_and(|mut it| it.next().is_some()) {
        return Err(SdkError::DestinationNotEmpty(dir));
    }
    fs::create_dir_all(&dir).map_err(|e| SdkError::io(&dir, e))?;
    let write = |file: &str, text: String| {
        let p = dir.join(file);
        fs::write(&p, text).map_err(|e| SdkError::io(&p, e))
    };
    write(SKILL_MD, skill_md_template(name))?;
    write(MANIFEST_FILE, manifest_template(owner))?;
    Ok(dir)
}

fn skill_md_template(name: &str) -> String {
    format!(
        "---\n\
         name: {name}\n\
         description: Describe what this skill does. Use when describe the situations it is for.\n\
         ---\n\
         \n\
         # {name}\n\
         \n\
         Step-by-step instructions for the agent go here. Keep this file short; put long\n\
         material in `references/` and runnable helpers in `scripts/`, and say here when to\n\
         read or run them.\n"
    )
}

fn manifest_template(owner: &str) -> String {
    let owner = toml_string(owner);
    format!(
        "# Registry manifest for this skill (the Agent Skills front matter lives in SKILL.md).\n\
         owner = {owner}\n\
         version = \"0.1.0\"\n\
         scope = \"tenant\"          # \"global\" | \"tenant\" | \"project:<name>\"\n\
         models = []\n\
         \n\
         [requires]\n\
         tools = []\n\
         permissions = []\n\
         environment = []\n\
         \n\
         [contract]\n\
         inputs = \"\"\n\
         outputs = \"\"\n\
         acceptance = \"\"\n\
         \n\
         # [[tests]]\n\
         # name = \"smoke\"\n\
         # command = [\"python3\", \"scripts/selftest.py\"]\n\
         # timeout_secs = 60\n"
    )
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ValidationMode, validate_dir};

    #[test]
    fn the_skeleton_is_valid_and_init_refuses_to_overwrite() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = init_skill(tmp.path(), "my-skill", "team \"a\"").unwrap();
        let report = validate_dir(&dir, ValidationMode::Strict).unwrap();
        assert!(report.is_valid(), "{:?}", report.diagnostics);
        let skill = report.skill.unwrap();
        assert_eq!(skill.manifest.unwrap().owner, "team \"a\"");
        assert_eq!(
            init_skill(tmp.path(), "my-skill", "x").unwrap_err().code(),
            "destination.not_empty"
        );
        assert_eq!(
            init_skill(tmp.path(), "Bad--Name", "x").unwrap_err().code(),
            "skill.invalid"
        );
    }
}
