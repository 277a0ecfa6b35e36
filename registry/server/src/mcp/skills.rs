//! The MCP skills extension (`io.modelcontextprotocol/skills`): each current release as
//! `skill://<name>/SKILL.md` with every file's digest and size, and the files themselves as
//! resources.

use base64::Engine;
use registry_core::principal::Principal;
use rmcp::model::{
    JsonObject, MetaObject, ResourceContents, Skill, SkillFrontmatter, SkillResource,
    SkillResources,
};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub const SKILL_SCHEME: &str = "skill://";

/// Skills one listing names at most: the HTTP discover's largest page.
pub const MAX_LISTED: usize = 200;

/// The current releases the principal may see, as skills-extension entries: at most
/// [`MAX_LISTED`], each read under the request's deadline. An entry whose release can no longer
/// be loaded (purged meanwhile) is left out, not the whole list.
pub fn skills_of(s: &AppState, p: &Principal) -> ApiResult<Vec<Skill>> {
    let list = s.services.skills.discover(p, None, MAX_LISTED)?;
    let mut out = Vec::with_capacity(list.len());
    for entry in list {
        registry_core::deadline::check()?;
        match skill_entry(s, p, &entry.name) {
            Ok(skill) => out.push(skill),
            Err(e) if e.code == registry_core::ErrorCode::NotFound => {
                tracing::warn!(skill = %entry.name, "a listed release could not be loaded");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The current release of `name` as the caller would select it, as a skills-extension entry.
pub fn skill_entry(s: &AppState, p: &Principal, name: &str) -> ApiResult<Skill> {
    let l = s.services.skills.current(p, name)?;
    let archive = s.services.skills.archive(&l)?;
    let uri = format!("{SKILL_SCHEME}{name}/SKILL.md");
    let files = l
        .body
        .files
        .iter()
        .map(|f| {
            SkillResource::new(
                format!("{SKILL_SCHEME}{name}/{}", f.path),
                format!("sha256:{}", hex::encode(f.sha256)),
                f.size,
            )
        })
        .collect();
    // The listed frontmatter is the served SKILL.md's, field for field, so that a client can
    // check one against the other.
    let skill_md = archive
        .contents("SKILL.md")
        .ok_or_else(|| ApiError::internal("a stored skill has no SKILL.md"))?;
    let text = std::str::from_utf8(skill_md).map_err(ApiError::internal)?;
    let parts = skills_sdk::frontmatter::split_skill_md(text)
        .map_err(|r| ApiError::internal(format!("stored SKILL.md no longer splits: {r:?}")))?;
    // The SDK's bounded reader: no anchors or aliases, capped size, depth and node count.
    let yaml = skills_sdk::frontmatter::frontmatter_json(parts.yaml).map_err(ApiError::internal)?;
    let field = |k: &str| {
        yaml.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut frontmatter = SkillFrontmatter::new(field("name"), field("description"));
    for (k, v) in yaml {
        match k.as_str() {
            "name" | "description" => {}
            _ => frontmatter = frontmatter.with_field(k, v),
        }
    }
    let mut meta = JsonObject::new();
    meta.insert("version".into(), json!(l.body.version));
    meta.insert("digest".into(), json!(l.body.digest));
    meta.insert("state".into(), json!(l.body.state.as_str()));
    let meta = MetaObject(meta);
    Ok(Skill::new(uri, frontmatter, SkillResources::Files(files)).with_meta(meta))
}

/// `skill://<name>/<path>` → the current release's file.
pub fn read_skill_file(s: &AppState, p: &Principal, uri: &str) -> ApiResult<ResourceContents> {
    let rest = uri
        .strip_prefix(SKILL_SCHEME)
        .ok_or_else(|| ApiError::not_found(format!("no resource {uri}")))?;
    let (name, path) = rest
        .split_once('/')
        .ok_or_else(|| ApiError::not_found(format!("no resource {uri}")))?;
    let l = s.services.skills.current(p, name)?;
    let f = s.services.skills.file(&l, path)?;
    // UTF-8 text without NUL bytes is served as text; anything else as base64 bytes.
    let is_text = std::str::from_utf8(&f.contents).is_ok_and(|t| !t.contains('\0'));
    Ok(if is_text {
        let mime = if path.ends_with(".md") {
            "text/markdown"
        } else {
            "text/plain"
        };
        let text = String::from_utf8(f.contents).map_err(ApiError::internal)?;
        ResourceContents::text(text, uri).with_mime_type(mime)
    } else {
        ResourceContents::blob(
            base64::engine::general_purpose::STANDARD.encode(&f.contents),
            uri,
        )
        .with_mime_type("application/octet-stream")
    })
}
