//! Progressive disclosure, level one: a [`DiscoverEntry`] small enough (about 100 tokens) to
//! list many skills in a prompt, and a token estimate.

use registry_detect::sentence::sentences;
use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::skill::Skill;
use crate::tree::CanonicalTree;

/// Longest short description, in characters (an ellipsis is added when cut).
pub const SHORT_DESCRIPTION_CHARS: usize = 200;

/// A risk a harness should weigh before selecting a skill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    RunsShellCommands,
    NetworkAccess,
    WritesFiles,
    UsesCredentials,
    ShipsExecutables,
    /// Neither `allowed-tools` nor `requires.tools` is declared, so the harness's defaults apply.
    UndeclaredTools,
}

impl Risk {
    pub fn describe(self) -> &'static str {
        match self {
            Self::RunsShellCommands => "runs shell commands",
            Self::NetworkAccess => "network access",
            Self::WritesFiles => "writes files",
            Self::UsesCredentials => "reads credentials from the environment",
            Self::ShipsExecutables => "ships executable scripts",
            Self::UndeclaredTools => "tool use not declared",
        }
    }
}

/// What a harness sees of a skill before choosing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscoverEntry {
    pub name: String,
    pub description: String,
    /// When to use it: the description's "use when …" sentence, compatibility, models.
    pub applicability: Vec<String>,
    pub risks: Vec<Risk>,
    pub version: Option<semver::Version>,
    /// [`estimate_tokens`] of [`DiscoverEntry::render`].
    pub tokens: usize,
}

impl DiscoverEntry {
    /// Builds the entry; `tree`, when given, adds risks that only the files show.
    pub fn from_skill(skill: &Skill, tree: Option<&CanonicalTree>) -> Self {
        let fm = &skill.frontmatter;
        let mut applicability = Vec::new();
        if let Some(s) = applicability_sentence(&fm.description) {
            applicability.push(truncate_chars(&s, SHORT_DESCRIPTION_CHARS));
        }
        if let Some(c) = fm.compatibility.as_deref().filter(|c| !c.trim().is_empty()) {
            applicability.push(truncate_chars(c.trim(), SHORT_DESCRIPTION_CHARS));
        }
        if let Some(m) = skill.manifest.as_ref().filter(|m| !m.models.is_empty()) {
            applicability.push(format!("models: {}", m.models.join(", ")));
        }
        let mut entry = Self {
            name: fm.name.clone(),
            description: short_description(&fm.description),
            applicability,
            risks: risks(skill, tree),
            version: skill.version(),
            tokens: 0,
        };
        entry.tokens = estimate_tokens(&entry.render());
        entry
    }

    /// The entry as the text a model would read.
    pub fn render(&self) -> String {
        let mut out = self.name.clone();
        if let Some(v) = &self.version {
            let _ = write!(out, " {v}");
        }
        let _ = write!(out, ": {}", self.description);
        for a in &self.applicability {
            let _ = write!(out, "\nApplies: {a}");
        }
        if !self.risks.is_empty() {
            let r: Vec<_> = self.risks.iter().map(|r| r.describe()).collect();
            let _ = write!(out, "\nRisks: {}", r.join("; "));
        }
        out
    }
}

/// Approximate token count of `text`: the larger of one token per 4 characters and four
/// tokens per 3 words. A stand-in until the server's real tokenizer counts; it tends to
/// overestimate, which is the safe side for budgets.
pub fn estimate_tokens(text: &str) -> usize {
    let chars = text.chars().count();
    let words = text.split_whitespace().count();
    chars.div_ceil(4).max((words * 4).div_ceil(3))
}

/// The first sentence of `description` (cut as the detector cuts, [`registry_detect::sentence`]),
/// or its first 200 characters cut at a word boundary.
pub fn short_description(description: &str) -> String {
    let d = description.split_whitespace().collect::<Vec<_>>().join(" ");
    let sentences = sentences(&d);
    let first = sentences.first().copied().unwrap_or(&d);
    truncate_chars(first, SHORT_DESCRIPTION_CHARS)
}

fn applicability_sentence(description: &str) -> Option<String> {
    const CUES: &[&str] = &[
        "use when",
        "use this",
        "use for",
        "when the user",
        "when user",
        "trigger",
    ];
    let d = description.split_whitespace().collect::<Vec<_>>().join(" ");
    sentences(&d)
        .into_iter()
        .find(|s| {
            let l = s.to_lowercase();
            CUES.iter().any(|c| l.contains(c))
        })
        .map(str::to_owned)
}

fn truncate_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max - 1).collect();
    let cut = match cut.rfind(' ') {
        Some(i) if i > max / 2 => &cut[..i],
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end_matches([' ', ',', ';', ':']))
}

/// The tool's base name: `Bash(git:*)` → `bash`, `mcp__github__create_pr` stays as is.
fn tool_base(tool: &str) -> String {
    tool.split('(').next().unwrap_or(tool).trim().to_lowercase()
}

fn risks(skill: &Skill, tree: Option<&CanonicalTree>) -> Vec<Risk> {
    let mut out = BTreeSet::new();
    let fm = &skill.frontmatter;
    let mut tools: Vec<String> = fm.allowed_tools.iter().map(|t| tool_base(t)).collect();
    let (mut permissions, mut env) = (Vec::new(), Vec::new());
    if let Some(m) = &skill.manifest {
        tools.extend(m.requires.tools.iter().map(|t| tool_base(t)));
        permissions.extend(m.requires.permissions.iter().map(|p| p.to_lowercase()));
        env.extend(m.requires.environment.iter().map(|e| e.to_uppercase()));
    }
    if tools.is_empty() {
        out.insert(Risk::UndeclaredTools);
    }
    for t in &tools {
        if [
            "bash",
            "shell",
            "sh",
            "exec",
            "terminal",
            "powershell",
            "run_command",
            "command",
        ]
        .contains(&t.as_str())
        {
            out.insert(Risk::RunsShellCommands);
        }
        if [
            "webfetch",
            "websearch",
            "fetch",
            "http",
            "browser",
            "curl",
            "wget",
        ]
        .contains(&t.as_str())
        {
            out.insert(Risk::NetworkAccess);
        }
        if ["write", "edit", "multiedit", "notebookedit"].contains(&t.as_str()) {
            out.insert(Risk::WritesFiles);
        }
    }
    for p in &permissions {
        if ["network", "net", "internet", "http"]
            .iter()
            .any(|k| p.contains(k))
        {
            out.insert(Risk::NetworkAccess);
        }
        if ["shell", "exec", "process", "command"]
            .iter()
            .any(|k| p.contains(k))
        {
            out.insert(Risk::RunsShellCommands);
        }
        if ["write", "filesystem"].iter().any(|k| p.contains(k)) {
            out.insert(Risk::WritesFiles);
        }
        if ["secret", "credential"].iter().any(|k| p.contains(k)) {
            out.insert(Risk::UsesCredentials);
        }
    }
    if env.iter().any(|e| {
        ["TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL"]
            .iter()
            .any(|k| e.contains(k))
    }) {
        out.insert(Risk::UsesCredentials);
    }
    if let Some(tree) = tree {
        let script = |p: &str| {
            p.starts_with("scripts/")
                || [".sh", ".py", ".js", ".ps1"].iter().any(|x| p.ends_with(x))
        };
        if tree.files().iter().any(|f| f.executable || script(&f.path)) {
            out.insert(Risk::ShipsExecutables);
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontmatter::Frontmatter;

    #[test]
    fn short_description_takes_the_first_sentence_or_cuts() {
        assert_eq!(
            short_description("Reads PDFs. Use when a PDF is given."),
            "Reads PDFs."
        );
        assert_eq!(
            short_description("Version 1.2 reads\n  PDFs"),
            "Version 1.2 reads PDFs"
        );
        let long = "word ".repeat(100);
        let s = short_description(&long);
        assert!(
            s.chars().count() <= SHORT_DESCRIPTION_CHARS && s.ends_with('…'),
            "{s}"
        );
    }

    #[test]
    fn tokens_are_estimated_conservatively() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcd"), 2);
        assert_eq!(estimate_tokens("a b c"), 4);
        assert_eq!(estimate_tokens(&"x".repeat(400)), 100);
    }

    #[test]
    fn entry_derives_applicability_and_risks() {
        let skill = Skill {
            frontmatter: Frontmatter {
                name: "gh-fix-ci".into(),
                description: "Fixes CI. Use when checks fail on a PR.".into(),
                license: None,
                compatibility: Some("needs gh".into()),
                metadata: [("version".to_string(), "1.0.0".to_string())].into(),
                allowed_tools: vec!["Bash(gh:*)".into(), "WebFetch".into()],
                extra: Default::default(),
            },
            instructions: String::new(),
            manifest: None,
        };
        let e = DiscoverEntry::from_skill(&skill, None);
        assert_eq!(e.description, "Fixes CI.");
        assert_eq!(
            e.applicability,
            ["Use when checks fail on a PR.", "needs gh"]
        );
        assert_eq!(e.risks, [Risk::RunsShellCommands, Risk::NetworkAccess]);
        assert_eq!(e.version, Some(semver::Version::new(1, 0, 0)));
        assert!(e.tokens > 0 && e.tokens < 100, "{}", e.tokens);
    }
}
