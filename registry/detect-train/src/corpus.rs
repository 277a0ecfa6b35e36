//! The attack and legitimate-memory corpus (`registry/detect/corpus/*.jsonl`, the development
//! sets in `registry/detect/dev/`) and the figures computed on it. Tooling for the trainer, the
//! report and the tests; nothing at run time reads the corpus.
//!
//! A directory's `manifest.json` ([`Manifest`]) lists its files in the order they are read:
//! training depends on the order of its examples (the classifier's seeded shuffle, the
//! prototypes' rows), so the order is recorded there, never taken from the file names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use registry_detect::{Detection, FindingKind, scan_sensitive};

pub use registry_detect::{blocked_as_external, blocked_as_user_statement};

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

/// A corpus directory's record of its files: their reading order, what they were first called,
/// their sha256 and what they hold. `corpus-manifest` writes it; a test checks it against the
/// files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Every `*.jsonl` file of the directory, in reading (training) order.
    pub files: Vec<FileRecord>,
}

/// One file of a [`Manifest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRecord {
    /// Its name in the directory.
    pub file: String,
    /// The name it was written under, as the experiment log (the crate's README) calls it.
    pub written_as: String,
    /// sha256 of its bytes, lower-case hex.
    pub sha256: String,
    /// What it holds.
    pub counts: Counts,
}

/// Examples of a file by label, split, language and class.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    pub examples: usize,
    pub attack: usize,
    pub legit: usize,
    pub train: usize,
    pub test: usize,
    pub en: usize,
    pub zh: usize,
    pub mixed: usize,
    /// By attack family or legitimate topic.
    pub classes: BTreeMap<String, usize>,
}

impl Counts {
    /// What `examples` hold.
    pub fn of(examples: &[Example]) -> Counts {
        let mut c = Counts::default();
        for e in examples {
            c.examples += 1;
            *if e.is_attack() {
                &mut c.attack
            } else {
                &mut c.legit
            } += 1;
            *if e.split == "train" {
                &mut c.train
            } else {
                &mut c.test
            } += 1;
            *match e.lang.as_str() {
                "en" => &mut c.en,
                "zh" => &mut c.zh,
                _ => &mut c.mixed,
            } += 1;
            *c.classes.entry(e.class.clone()).or_default() += 1;
        }
        c
    }
}

/// The manifest's name in a corpus directory.
pub const MANIFEST: &str = "manifest.json";

impl Manifest {
    /// `dir`'s manifest, or `None` when it has none.
    pub fn read(dir: &Path) -> Result<Option<Manifest>, String> {
        let path = dir.join(MANIFEST);
        match std::fs::read_to_string(&path) {
            Ok(s) => serde_json::from_str(&s)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// What `dir`'s files hold now, in this manifest's order; a file it does not list goes
    /// last (in name order), a listed file that is gone is dropped.
    pub fn refreshed(&self, dir: &Path) -> Result<Manifest, String> {
        let present = jsonl_files(dir)?;
        let listed: Vec<PathBuf> = self.files.iter().map(|f| dir.join(&f.file)).collect();
        let mut files = vec![];
        for (f, rec) in listed.iter().zip(&self.files) {
            if present.contains(f) {
                files.push(record(f, Some(&rec.written_as))?);
            }
        }
        for f in present.iter().filter(|f| !listed.contains(f)) {
            files.push(record(f, None)?);
        }
        Ok(Manifest { files })
    }

    /// The manifest as written to disk (pretty JSON, a final newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a manifest serialises") + "\n"
    }
}

fn record(path: &Path, written_as: Option<&str>) -> Result<FileRecord, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{}: not a UTF-8 file name", path.display()))?
        .to_string();
    Ok(FileRecord {
        written_as: written_as.unwrap_or(&file).to_string(),
        sha256: hex::encode(Sha256::digest(&bytes)),
        counts: Counts::of(&parse(path, &bytes)?),
        file,
    })
}

/// The `*.jsonl` files of `dir`, in name order.
fn jsonl_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    Ok(files)
}

/// The examples of one file, checked.
fn parse(f: &Path, body: &[u8]) -> Result<Vec<Example>, String> {
    let body = std::str::from_utf8(body).map_err(|e| format!("{}: {e}", f.display()))?;
    let mut out = vec![];
    for (i, line) in body.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let ex: Example =
            serde_json::from_str(line).map_err(|e| format!("{}:{}: {e}", f.display(), i + 1))?;
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
    Ok(out)
}

/// Every example of `dir`: with a manifest, its files in the manifest's order, and a `*.jsonl`
/// file it does not list is an error; without one (a directory of texts to evaluate on, where
/// the order changes no figure), in name order.
pub fn load(dir: &Path) -> Result<Vec<Example>, String> {
    let files = match Manifest::read(dir)? {
        Some(m) => {
            let listed: Vec<PathBuf> = m.files.iter().map(|f| dir.join(&f.file)).collect();
            if let Some(f) = jsonl_files(dir)?.iter().find(|f| !listed.contains(f)) {
                return Err(format!(
                    "{}: not in {MANIFEST} (run corpus-manifest)",
                    f.display()
                ));
            }
            listed
        }
        None => jsonl_files(dir)?,
    };
    let mut out = vec![];
    for f in files {
        let body = std::fs::read(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        out.extend(parse(&f, &body)?);
    }
    Ok(out)
}

/// `registry-detect`'s directory, which holds the corpus, the development sets and the model.
pub fn detect_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../detect")
}

/// The training corpus (`registry/detect/corpus`).
pub fn corpus_dir() -> PathBuf {
    detect_dir().join("corpus")
}

/// The development sets (`registry/detect/dev`).
pub fn dev_dir() -> PathBuf {
    detect_dir().join("dev")
}

/// The model files (`registry/detect/model`), which `registry-detect` embeds.
pub fn model_dir() -> PathBuf {
    detect_dir().join("model")
}

/// The corpus shipped with `registry-detect`, in its manifest's order (which it must have).
pub fn load_default() -> Result<Vec<Example>, String> {
    let dir = corpus_dir();
    if Manifest::read(&dir)?.is_none() {
        return Err(format!("{}: no {MANIFEST}", dir.display()));
    }
    load(&dir)
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
pub fn assess(text: &str, model: &registry_detect::Model) -> (Detection, Vec<FindingKind>) {
    (
        registry_detect::detect_with(text, model),
        scan_sensitive(text),
    )
}

impl FileRecord {
    /// Its row in the counts table of `corpus/CARDS.md`: file, examples, attacks, legitimate,
    /// train, test, English, Chinese, mixed.
    pub fn card_row(&self) -> String {
        let c = &self.counts;
        format!(
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} |",
            self.file, c.examples, c.attack, c.legit, c.train, c.test, c.en, c.zh, c.mixed
        )
    }

    /// Its classes line in `corpus/CARDS.md`: every attack family or legitimate topic with
    /// its count, by name.
    pub fn card_classes(&self) -> String {
        let classes: Vec<String> = self
            .counts
            .classes
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        format!("Classes: {}.", classes.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> String {
        format!(
            r#"{{"text":"{text}","label":"legit","class":"everyday","lang":"en","group":"g","split":"train"}}"#
        ) + "\n"
    }

    #[test]
    fn files_are_read_in_the_manifests_order_not_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.jsonl"), line("from a")).unwrap();
        std::fs::write(dir.path().join("b.jsonl"), line("from b")).unwrap();
        let texts =
            |d: &Path| -> Vec<String> { load(d).unwrap().into_iter().map(|e| e.text).collect() };
        // Without a manifest, by name.
        assert_eq!(texts(dir.path()), ["from a", "from b"]);
        // With one, in its order; a refresh keeps the order and records what the files hold.
        let mut m = Manifest { files: vec![] }.refreshed(dir.path()).unwrap();
        m.files.reverse();
        let m = m.refreshed(dir.path()).unwrap();
        assert_eq!(m.files[0].file, "b.jsonl");
        assert_eq!(m.files[0].counts.legit, 1);
        std::fs::write(dir.path().join(MANIFEST), m.to_json()).unwrap();
        assert_eq!(texts(dir.path()), ["from b", "from a"]);
        // A file the manifest does not list is refused, not read in some order.
        std::fs::write(dir.path().join("c.jsonl"), line("from c")).unwrap();
        assert!(load(dir.path()).unwrap_err().contains("c.jsonl"));
        let m = m.refreshed(dir.path()).unwrap();
        assert_eq!(m.files[2].file, "c.jsonl");
    }
}
