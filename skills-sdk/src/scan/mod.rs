//! The supply-chain scan: reads every file of a skill for what it would do to the machine or to
//! the agent that loads it, and answers `pass`, `warn` or `fail` with its findings.
//!
//! Deterministic and offline: rules (regular expressions, linear time) and the registry's
//! instruction detector (`registry-detect`, its rule and classifier layers; no embedding model,
//! no network, no LLM). The same input always gives the same report.
//!
//! What it reads (the rule table is [`RULES`]; the README lists it):
//! - text (Markdown, plain text, HTML, YAML, JSON, TOML and the comments of scripts) through
//!   the instruction detector and the skill-specific instruction rules (`instr.*`);
//! - scripts (Python, shell, JavaScript/TypeScript, PowerShell, …) and the code shown in
//!   Markdown through the script rules (`script.*`, `persist.*`, `destructive.*`,
//!   `privilege.*`, `install.*`);
//! - every text file for invisible and bidirectional characters, tag characters, text hidden
//!   in HTML comments or after long runs of blank lines (`hidden.*`).
//!
//! A fail usually needs a dangerous pairing (a secret read with egress, a decode feeding an
//! exec, a write into a persistence target); a single weak signal warns. Code that a
//! Markdown file quotes as an example (a fenced block or a quotation labelled as an example,
//! an attack, a sample…) is reported at most as a warning.

mod files;
mod hidden;
mod instructions;
mod lines;
mod packages;
mod scripts;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::archive::SkillArchive;
use crate::error::SdkResult;

pub use packages::{edit_distance, typosquat_of};

/// The scan's conclusion: the worst severity among the findings.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ScanVerdict {
    Pass,
    Warn,
    Fail,
}

impl ScanVerdict {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// How serious one finding is.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FindingSeverity {
    Warn,
    Fail,
}

impl FindingSeverity {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One thing the scan found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Finding {
    /// Stable rule id (`script.exfil`, `hidden.bidi`, …): see the rule table.
    pub rule: String,
    pub severity: FindingSeverity,
    /// Path of the file inside the skill.
    pub file: String,
    /// 1-based line number.
    pub line: u32,
    /// The line, trimmed to at most 160 characters, invisible characters shown as `<U+XXXX>`.
    pub excerpt: String,
    pub message: String,
}

/// The scan's answer for one skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScanReport {
    pub verdict: ScanVerdict,
    pub findings: Vec<Finding>,
}

impl ScanReport {
    pub fn failed(&self) -> bool {
        self.verdict == ScanVerdict::Fail
    }

    /// The distinct rule ids that fired at `severity` or above.
    pub fn rules_at(&self, severity: FindingSeverity) -> Vec<&str> {
        let mut ids: Vec<&str> = self
            .findings
            .iter()
            .filter(|f| f.severity >= severity)
            .map(|f| f.rule.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// One rule of the scan: its id, its usual severity, the class it belongs to and what it
/// looks for. A rule marked `Warn` fails only when paired (see its description).
#[derive(Debug, Clone, Copy)]
pub struct RuleInfo {
    pub id: &'static str,
    pub severity: FindingSeverity,
    pub class: &'static str,
    pub what: &'static str,
}

use FindingSeverity::{Fail, Warn};

/// Every rule, in the README's order.
pub const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: "instr.injection",
        severity: Fail,
        class: "instructions",
        what: "the registry's instruction detector finds an injection (override of the agent's instructions, role reassignment, forged role or tool markers)",
    },
    RuleInfo {
        id: "instr.steering",
        severity: Warn,
        class: "instructions",
        what: "the detector finds hostile steering (aimed at approvals, safety, oversight, secrets or the agent's rules)",
    },
    RuleInfo {
        id: "instr.exfiltrate",
        severity: Fail,
        class: "instructions",
        what: "tells the agent to send secrets, credentials, files, the conversation or user data to an outside address, or to add a hidden recipient (BCC) to messages",
    },
    RuleInfo {
        id: "instr.conceal",
        severity: Warn,
        class: "instructions",
        what: "tells the agent to hide an action or its output from the user; fail when the package also does something the rules flag",
    },
    RuleInfo {
        id: "instr.auto_approve",
        severity: Fail,
        class: "instructions",
        what: "turns off tool permission prompts or approves every tool (`--dangerously-skip-permissions`, `bypassPermissions`, approve all tools)",
    },
    RuleInfo {
        id: "instr.skip_confirm",
        severity: Warn,
        class: "instructions",
        what: "tells the agent to act without asking the user; fail when the package also does something the rules flag",
    },
    RuleInfo {
        id: "instr.memory_write",
        severity: Fail,
        class: "instructions",
        what: "stores \"permanent rules\" in the agent's memory, or writes agent memory files (CLAUDE.md, AGENTS.md, .cursorrules, MEMORY.md, …) with lasting or hidden intent; a plain edit of such a file warns",
    },
    RuleInfo {
        id: "instr.other_skills",
        severity: Fail,
        class: "instructions",
        what: "tells the agent to edit, overwrite or delete other skills' files",
    },
    RuleInfo {
        id: "script.exfil",
        severity: Fail,
        class: "scripts",
        what: "network egress in a script (or code block) that also reads secrets, credentials, keys, browser profiles, wallets, shell history or the whole environment; or sends a token to a raw IP, paste site or request collector",
    },
    RuleInfo {
        id: "script.secret_read",
        severity: Warn,
        class: "scripts",
        what: "reads secrets, credentials, keys, browser profiles or the whole environment, without egress",
    },
    RuleInfo {
        id: "script.decode_exec",
        severity: Fail,
        class: "scripts",
        what: "decodes base64, hex, rot13, char codes or compressed data and executes the result (eval, exec, sh, Invoke-Expression, PowerShell -EncodedCommand)",
    },
    RuleInfo {
        id: "script.encoded_blob",
        severity: Warn,
        class: "scripts",
        what: "a long base64 or hex blob in a script",
    },
    RuleInfo {
        id: "script.pipe_shell",
        severity: Fail,
        class: "scripts",
        what: "pipes a download into an interpreter (`curl … | sh`, `iex (iwr …)`, `bash <(curl …)`)",
    },
    RuleInfo {
        id: "script.suspicious_url",
        severity: Fail,
        class: "scripts",
        what: "downloads from, installs from or runs something at a raw IP address, a paste site, a file drop or a tunnel; a bare mention warns",
    },
    RuleInfo {
        id: "persist.shell_rc",
        severity: Fail,
        class: "persistence",
        what: "writes commands into shell start-up files (~/.bashrc, ~/.zshrc, ~/.profile, $PROFILE); appending an `export` or PATH line warns",
    },
    RuleInfo {
        id: "persist.cron",
        severity: Fail,
        class: "persistence",
        what: "installs a crontab entry or a scheduled task",
    },
    RuleInfo {
        id: "persist.ssh_keys",
        severity: Fail,
        class: "persistence",
        what: "writes to ~/.ssh/authorized_keys",
    },
    RuleInfo {
        id: "persist.git_hooks",
        severity: Fail,
        class: "persistence",
        what: "writes into .git/hooks; setting core.hooksPath warns",
    },
    RuleInfo {
        id: "persist.autostart",
        severity: Fail,
        class: "persistence",
        what: "installs a launch agent or daemon, an autostart entry, a Run key, rc.local or an init script; `systemctl enable` warns",
    },
    RuleInfo {
        id: "persist.agent_files",
        severity: Warn,
        class: "persistence",
        what: "a script writes into other skills' directories, agent settings or agent memory files; fail with a lasting or hidden intent or when paired",
    },
    RuleInfo {
        id: "destructive.delete",
        severity: Fail,
        class: "destructive",
        what: "recursive delete of a root, home or system path, or of an unguarded variable path (`rm -rf \"$DIR\"`); a guarded variable (`${DIR:?}`) warns",
    },
    RuleInfo {
        id: "destructive.disk",
        severity: Fail,
        class: "destructive",
        what: "formats or overwrites a disk (mkfs, dd to a device, fork bomb, `format c:`)",
    },
    RuleInfo {
        id: "destructive.force_push",
        severity: Fail,
        class: "destructive",
        what: "`git push --force`; `--force-with-lease` warns",
    },
    RuleInfo {
        id: "destructive.sql_drop",
        severity: Fail,
        class: "destructive",
        what: "`DROP TABLE/DATABASE/SCHEMA`, `TRUNCATE TABLE`",
    },
    RuleInfo {
        id: "privilege.sudo",
        severity: Warn,
        class: "privilege",
        what: "uses sudo; fail when it edits sudoers, grants NOPASSWD, pipes a password into `sudo -S` or adds a user to an admin group",
    },
    RuleInfo {
        id: "privilege.world_writable",
        severity: Fail,
        class: "privilege",
        what: "`chmod 777`, `a+rwx`, `o+w` or an Everyone full-control ACL",
    },
    RuleInfo {
        id: "privilege.setuid",
        severity: Fail,
        class: "privilege",
        what: "sets the setuid/setgid bit or file capabilities, or calls setuid(0)",
    },
    RuleInfo {
        id: "install.unpinned",
        severity: Warn,
        class: "installs",
        what: "installs a package without an exact version (pip, npm, yarn, pnpm, bun, uv, poetry, gem, cargo, go), or from a URL or git without a commit",
    },
    RuleInfo {
        id: "install.typosquat",
        severity: Fail,
        class: "installs",
        what: "installs a package whose name is one or two edits away from a popular package's name",
    },
    RuleInfo {
        id: "hidden.invisible",
        severity: Fail,
        class: "hidden text",
        what: "zero-width or other invisible characters inside text (a single stray one warns; emoji joiners are allowed)",
    },
    RuleInfo {
        id: "hidden.bidi",
        severity: Fail,
        class: "hidden text",
        what: "bidirectional override or isolate characters (Trojan Source)",
    },
    RuleInfo {
        id: "hidden.tags",
        severity: Fail,
        class: "hidden text",
        what: "Unicode tag characters (invisible ASCII) or runs of variation selectors",
    },
    RuleInfo {
        id: "hidden.html_comment",
        severity: Fail,
        class: "hidden text",
        what: "an HTML comment or hidden element whose text is instruction-like or carries a flagged command",
    },
    RuleInfo {
        id: "hidden.after_blank_run",
        severity: Warn,
        class: "hidden text",
        what: "text after a long run of blank lines or of spaces; fail when that text is instruction-like or carries a flagged command",
    },
];

/// The rule with id `id`.
pub fn rule(id: &str) -> Option<&'static RuleInfo> {
    RULES.iter().find(|r| r.id == id)
}

/// At most this many findings per (rule, file) are kept, and this many in all.
const MAX_PER_RULE_FILE: usize = 5;
const MAX_FINDINGS: usize = 500;
/// Files larger than this are scanned on their first `MAX_FILE_BYTES` only.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// Scans the skill directory `dir` (the files `pack_dir` would pack).
pub fn scan_dir(dir: &Path) -> SdkResult<ScanReport> {
    let mut files = Vec::new();
    for f in crate::tree::walk_dir(dir)? {
        let bytes = std::fs::read(&f.abs).map_err(|e| crate::SdkError::io(&f.abs, e))?;
        files.push((f.path, bytes));
    }
    Ok(scan_files(
        files.iter().map(|(p, b)| (p.as_str(), b.as_slice())),
    ))
}

/// Scans a checked archive.
pub fn scan_archive(archive: &SkillArchive) -> ScanReport {
    scan_files(
        archive
            .paths()
            .filter_map(|p| archive.contents(p).map(|c| (p, c))),
    )
}

/// Scans archive bytes (checked with `limits` first).
pub fn scan_archive_bytes(bytes: &[u8], limits: &crate::ArchiveLimits) -> SdkResult<ScanReport> {
    Ok(scan_archive(&crate::read_archive(bytes, limits)?))
}

/// Scans `(path, contents)` pairs: the whole package at once, so that pairings across files
/// (concealment with an action) are seen.
pub fn scan_files<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> ScanReport {
    let mut out = Findings::default();
    for (path, bytes) in files {
        files::scan_file(path, bytes, &mut out);
    }
    out.finish()
}

/// The findings of one scan as they are collected.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    items: Vec<Finding>,
}

impl Findings {
    pub(crate) fn push(
        &mut self,
        rule: &'static str,
        severity: FindingSeverity,
        file: &str,
        line: usize,
        raw_line: &str,
        message: impl Into<String>,
    ) {
        debug_assert!(self::rule(rule).is_some(), "unknown rule {rule}");
        let same = self
            .items
            .iter()
            .filter(|f| f.rule == rule && f.file == file)
            .count();
        if same >= MAX_PER_RULE_FILE {
            // Keep the worst: a fail replaces a kept warning of the same rule and file.
            if severity == Fail
                && let Some(w) = self
                    .items
                    .iter_mut()
                    .find(|f| f.rule == rule && f.file == file && f.severity == Warn)
            {
                w.severity = Fail;
            }
            return;
        }
        self.items.push(Finding {
            rule: rule.to_string(),
            severity,
            file: file.to_string(),
            line: u32::try_from(line).unwrap_or(u32::MAX),
            excerpt: excerpt(raw_line),
            message: message.into(),
        });
    }

    /// Whether a finding other than hidden-text and weak ones sits on one of `lines` of `file`.
    pub(crate) fn flagged_at(&self, file: &str, lines: &[usize]) -> bool {
        self.items.iter().any(|f| {
            f.file == file
                && !f.rule.starts_with("hidden.")
                && !matches!(f.rule.as_str(), "install.unpinned" | "privilege.sudo")
                && lines.contains(&(f.line as usize))
        })
    }

    fn finish(mut self) -> ScanReport {
        escalate(&mut self.items);
        self.items.sort_by(|a, b| {
            b.severity
                .cmp(&a.severity)
                .then_with(|| a.file.cmp(&b.file))
                .then_with(|| a.line.cmp(&b.line))
                .then_with(|| a.rule.cmp(&b.rule))
        });
        self.items
            .dedup_by(|a, b| a.rule == b.rule && a.file == b.file && a.line == b.line);
        self.items.truncate(MAX_FINDINGS);
        let verdict = match self.items.iter().map(|f| f.severity).max() {
            None => ScanVerdict::Pass,
            Some(Warn) => ScanVerdict::Warn,
            Some(Fail) => ScanVerdict::Fail,
        };
        ScanReport {
            verdict,
            findings: self.items,
        }
    }
}

/// Rules that never pair: they are too common in honest skills to make anything else worse.
const WEAK: &[&str] = &[
    "install.unpinned",
    "privilege.sudo",
    "script.encoded_blob",
    "instr.steering",
    "instr.conceal",
    "instr.skip_confirm",
    "hidden.invisible",
    "hidden.after_blank_run",
];

/// Rules whose warning becomes a fail when the package also does something flagged.
const PAIRING: &[&str] = &[
    "instr.conceal",
    "instr.skip_confirm",
    "persist.agent_files",
    "script.secret_read",
];

/// Combines signals across the package: concealment, skipped confirmation, a write into agent
/// files or a secret read, each a warning alone, fail beside another flagged action.
fn escalate(items: &mut [Finding]) {
    let actions: Vec<String> = items
        .iter()
        .filter(|f| !WEAK.contains(&f.rule.as_str()) && !f.message.ends_with(QUOTED_NOTE))
        .map(|f| f.rule.clone())
        .collect();
    for f in items.iter_mut() {
        if f.severity == Warn
            && PAIRING.contains(&f.rule.as_str())
            && !f.message.ends_with(QUOTED_NOTE)
            && let Some(other) = actions.iter().find(|r| **r != f.rule)
        {
            f.severity = Fail;
            f.message = format!("{} (paired with {other} in the same package)", f.message);
        }
    }
}

/// Appended to the message of a finding downgraded because the text quotes it as an example.
pub(crate) const QUOTED_NOTE: &str = "(quoted as an example: warning only)";

/// The line as shown in a finding: trimmed, at most 160 characters, invisible and control
/// characters spelled `<U+XXXX>` so the excerpt cannot hide anything itself.
pub(crate) fn excerpt(line: &str) -> String {
    let mut out = String::new();
    for (n, c) in line.trim().chars().enumerate() {
        if n >= 160 {
            out.push('…');
            break;
        }
        if lines::is_suspicious_invisible(c) || (c.is_control() && c != '\t') {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}
