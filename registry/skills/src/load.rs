//! Select and load (the second and third disclosure levels): whether a caller's tools,
//! permissions and environment cover a version's requirements, and a version's archive, its
//! `SKILL.md` body and its single files, parsed once and kept in the service's archive cache.

use std::collections::BTreeSet;

use skills_sdk::ValidationMode;

use crate::error::{Error, Result};
use crate::model::Loaded;
use crate::service::{SkillsService, limits};

impl SkillsService {
    /// The archive bytes of a version.
    pub fn archive_bytes(&self, l: &Loaded) -> Result<Vec<u8>> {
        self.blobs
            .get(blob_key(l))?
            .ok_or_else(|| Error::internal(format!("archive blob of {} is missing", l.body.digest)))
    }

    /// The parsed archive of a version, from the cache when it is there.
    pub fn archive(&self, l: &Loaded) -> Result<std::sync::Arc<skills_sdk::SkillArchive>> {
        self.archives.get_or_load(blob_key(l), || {
            let bytes = self.archive_bytes(l)?;
            let size = bytes.len();
            let parsed = skills_sdk::read_archive(&bytes, &limits()).map_err(Error::internal)?;
            let unpacked: u64 = parsed.tree().files().iter().map(|f| f.size).sum();
            Ok((parsed, size.max(unpacked as usize)))
        })
    }

    /// The `SKILL.md` body of a version.
    pub fn instructions(&self, l: &Loaded) -> Result<String> {
        let archive = self.archive(l)?;
        let report = skills_sdk::validate_archive(&archive, ValidationMode::Lenient);
        report
            .skill
            .map(|sk| sk.instructions)
            .ok_or_else(|| Error::internal("a stored skill no longer parses"))
    }

    pub fn file(&self, l: &Loaded, path: &str) -> Result<skills_sdk::ArchivedFile> {
        self.archive(l)?
            .file(path)
            .ok_or_else(|| Error::not_found(format!("no file {path:?} in {}", l.body.digest)))
    }
}

/// Checks a manifest's requirements against what the caller declares it has.
pub fn executable_check(
    l: &Loaded,
    tools: &[String],
    permissions: &[String],
    environment: &[String],
) -> (bool, Vec<String>) {
    let norm_tool = |t: &str| t.split('(').next().unwrap_or(t).trim().to_lowercase();
    let have_tools: BTreeSet<String> = tools.iter().map(|t| norm_tool(t)).collect();
    let have_perms: BTreeSet<String> = permissions.iter().map(|t| t.to_lowercase()).collect();
    let have_env: BTreeSet<&str> = environment.iter().map(String::as_str).collect();
    let mut reasons = vec![];
    let fm_tools: Vec<String> = l
        .body
        .frontmatter
        .get("allowed-tools")
        .or_else(|| l.body.frontmatter.get("allowed_tools"))
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|x| x.as_str()).map(norm_tool).collect())
        .unwrap_or_default();
    let mut need_tools: BTreeSet<String> = fm_tools.into_iter().collect();
    if let Some(m) = &l.body.manifest {
        need_tools.extend(m.requires.tools.iter().map(|t| norm_tool(t)));
        for perm in &m.requires.permissions {
            if !have_perms.contains(&perm.to_lowercase()) {
                reasons.push(format!("missing permission: {perm}"));
            }
        }
        for e in &m.requires.environment {
            if !have_env.contains(e.as_str()) {
                reasons.push(format!("missing environment variable: {e}"));
            }
        }
    }
    for t in &need_tools {
        if !have_tools.contains(t) {
            reasons.push(format!("missing tool: {t}"));
        }
    }
    reasons.sort();
    (reasons.is_empty(), reasons)
}

pub(crate) fn blob_key(l: &Loaded) -> &str {
    l.body
        .archive_blob
        .as_deref()
        .unwrap_or(&l.body.archive_sha256)
}
