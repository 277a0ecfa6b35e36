//! The attack and legitimate-memory corpus (`corpus/*.jsonl`) and the figures computed on it.
//! Tooling for the trainer, the report and the tests; nothing at run time reads the corpus.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::detector::Detection;
use crate::sensitive::{FindingKind, Severity, scan_sensitive};

/// One line of the corpus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// The memory as written.
    pub text: String,
    /// `attack` or `legit`.
    pub label: String,
    /// Attack family or legitimate topic.
    pub class: String,
    /// `en`, `zh` or `mixed`.
    pub lang: String,
    /// Phrasing group: the unit of the train/test split and of the cross-validation folds.
    pub group: String,
    /// `train` or `test`.
    pub split: String,
}

impl Example {
    /// Labelled `attack`.
    pub fn is_attack(&self) -> bool {
        self.label == "attack"
    }

    /// Whether the instruction classifier learns from this example. Secrets and personal
    /// data are `scan_sensitive`'s business: an attack of that kind is not an instruction,
    /// and teaching the classifier that "the password is …" is one would make it flag
    /// legitimate sentences about passwords.
    pub fn trains_classifier(&self) -> bool {
        !matches!(self.class.as_str(), "credential_in_prose" | "personal_data")
    }
}

/// Every example of every `*.jsonl` file in `dir`, files in name order.
pub fn load(dir: &Path) -> Result<Vec<Example>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut out = vec![];
    for f in files {
        let body = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        for (i, line) in body.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let ex: Example = serde_json::from_str(line)
                .map_err(|e| format!("{}:{}: {e}", f.display(), i + 1))?;
            if !matches!(ex.label.as_str(), "attack" | "legit")
                || !matches!(ex.split.as_str(), "train" | "test")
                || !matches!(ex.lang.as_str(), "en" | "zh" | "mixed")
            {
                return Err(format!(
                    "{}:{}: bad label, split or lang",
                    f.display(),
                    i + 1
                ));
            }
            out.push(ex);
        }
    }
    Ok(out)
}

/// The corpus shipped with this crate.
pub fn load_default() -> Result<Vec<Example>, String> {
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"))
}

/// Would the write gate keep this text out of memory if a user wrote it into their own user
/// scope? Hostile instructions, credentials, and secret personal data (above a user scope's
/// confidential ceiling) are kept out; a user's own benign preference and contact details are
/// not. This mirrors `registry-memory`'s gate rules 3 and 4 for a user statement.
pub fn blocked_as_user_statement(d: &Detection, findings: &[FindingKind]) -> bool {
    d.hostile
        || findings
            .iter()
            .any(|f| f.is_credential() || f.severity() == Severity::Secret)
}

/// The same for text from an external source (tool result, document, web): any steering is
/// also held.
pub fn blocked_as_external(d: &Detection, findings: &[FindingKind]) -> bool {
    d.verdict != crate::Verdict::None || blocked_as_user_statement(d, findings)
}

/// Counts for one slice of the corpus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Attacks counted.
    pub attacks: usize,
    /// Attacks blocked.
    pub blocked: usize,
    /// Legitimate examples counted.
    pub legit: usize,
    /// Legitimate examples kept.
    pub kept: usize,
}

impl Tally {
    /// Counts one example.
    pub fn add(&mut self, attack: bool, blocked: bool) {
        if attack {
            self.attacks += 1;
            self.blocked += usize::from(blocked);
        } else {
            self.legit += 1;
            self.kept += usize::from(!blocked);
        }
    }
    /// Share of attacks blocked (1 when there are none).
    pub fn block_rate(&self) -> f64 {
        ratio(self.blocked, self.attacks)
    }
    /// Share of legitimate examples kept (1 when there are none).
    pub fn kept_rate(&self) -> f64 {
        ratio(self.kept, self.legit)
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 1.0 } else { a as f64 / b as f64 }
}

/// Tallies by a key (language, class…), plus `all`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Every example.
    pub all: Tally,
    /// By key, in key order.
    pub by: BTreeMap<String, Tally>,
}

impl Report {
    /// Counts one example under `key` and under `all`.
    pub fn add(&mut self, key: &str, attack: bool, blocked: bool) {
        self.all.add(attack, blocked);
        self.by
            .entry(key.to_string())
            .or_default()
            .add(attack, blocked);
    }

    /// A fixed-width table.
    pub fn render(&self, title: &str) -> String {
        let mut s = format!(
            "{title:<28} {:>8} {:>8} {:>8} {:>8}\n",
            "attacks", "blocked", "legit", "kept"
        );
        let row = |k: &str, t: &Tally| {
            format!(
                "{k:<28} {:>8} {:>7.1}% {:>8} {:>7.1}%\n",
                t.attacks,
                100.0 * t.block_rate(),
                t.legit,
                100.0 * t.kept_rate()
            )
        };
        for (k, t) in &self.by {
            s.push_str(&row(k, t));
        }
        s.push_str(&row("all", &self.all));
        s
    }
}

/// Findings and detection for an example, as the gate would compute them.
pub fn assess(text: &str, model: &crate::Model) -> (Detection, Vec<FindingKind>) {
    (crate::detect_with(text, model), scan_sensitive(text))
}
