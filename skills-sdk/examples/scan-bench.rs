//! `scan-bench`: the scan's latency, p50/p95, over a directory of skills and over a generated
//! 1,000-file archive.
//!
//! ```text
//! cargo run --release -p skills-sdk --example scan-bench [-- DIR] [--rounds N]
//! ```
//!
//! `DIR` defaults to `$REGISTRY_SHARED_DATA/skills-public`, else `../shared/data/skills-public`
//! (from the repository root). Each skill (a directory holding `SKILL.md`) is scanned from disk
//! `rounds` times (default 20); the archive (1,000 files: Markdown, Python, shell, JavaScript,
//! JSON, about 2 KB each, with a few findings) is packed once and scanned from its bytes
//! (unpacking included) `rounds` times.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use skills_sdk::{ArchiveLimits, pack_dir, scan_archive_bytes, scan_dir};

fn skills_under(d: &Path, out: &mut Vec<PathBuf>) {
    if d.join("SKILL.md").is_file() {
        out.push(d.to_path_buf());
        return;
    }
    let Ok(rd) = std::fs::read_dir(d) else { return };
    let mut dirs: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for p in dirs {
        skills_under(&p, out);
    }
}

fn pct(sorted: &[Duration], q: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(label: &str, mut xs: Vec<Duration>) {
    xs.sort();
    println!(
        "{label}: n={} p50={:.2} ms p95={:.2} ms max={:.2} ms",
        xs.len(),
        pct(&xs, 0.50).as_secs_f64() * 1e3,
        pct(&xs, 0.95).as_secs_f64() * 1e3,
        xs.last().copied().unwrap_or_default().as_secs_f64() * 1e3
    );
}

/// A skill with 1,000 files in a fresh temporary directory.
fn thousand_file_skill() -> PathBuf {
    let root = std::env::temp_dir().join(format!("scan-bench-{}", std::process::id()));
    let dir = root.join("big-skill");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::create_dir_all(dir.join("references")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: big-skill\ndescription: A large generated skill for the scan bench.\n---\n\n# Big skill\n\nRead the references and run the scripts as needed.\n",
    )
    .unwrap();
    let para = "This section explains how the report is assembled from the ledger, which totals are carried forward and how rounding is applied to each currency. ";
    for i in 0..999 {
        let (path, body) = match i % 5 {
            0 => (
                format!("references/part-{i:04}.md"),
                format!(
                    "# Part {i}\n\n{}\n\n```bash\npython scripts/run-{i}.py --input data.csv\n```\n",
                    para.repeat(12)
                ),
            ),
            1 => (
                format!("scripts/run-{i:04}.py"),
                format!(
                    "import csv\nimport sys\n\n# Sums column {i} of the input.\ndef main(path):\n    with open(path) as f:\n        rows = list(csv.reader(f))\n    print(sum(float(r[1]) for r in rows[1:]))\n\n{}\nif __name__ == '__main__':\n    main(sys.argv[1])\n",
                    "# note: keep totals exact\n".repeat(60)
                ),
            ),
            2 => (
                format!("scripts/step-{i:04}.sh"),
                format!(
                    "#!/bin/sh\nset -eu\nmkdir -p ./out/{i}\n{}cp data.csv ./out/{i}/\n",
                    "echo processing step\n".repeat(80)
                ),
            ),
            3 => (
                format!("scripts/fmt-{i:04}.js"),
                format!(
                    "const fs = require('fs');\n{}module.exports = (p) => JSON.parse(fs.readFileSync(p, 'utf8'));\n",
                    "// formats one record\n".repeat(80)
                ),
            ),
            _ => (
                format!("references/table-{i:04}.json"),
                format!(
                    "{{\"rows\": [{}1]}}\n",
                    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ".repeat(60)
                ),
            ),
        };
        std::fs::write(dir.join(path), body).unwrap();
    }
    dir
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut dir: Option<PathBuf> = None;
    let mut rounds = 20usize;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => {
                rounds = args
                    .next()
                    .and_then(|r| r.parse().ok())
                    .expect("--rounds N")
            }
            _ => dir = Some(PathBuf::from(a)),
        }
    }
    let dir = dir.unwrap_or_else(|| match std::env::var_os("REGISTRY_SHARED_DATA") {
        Some(p) => PathBuf::from(p).join("skills-public"),
        None => PathBuf::from("../shared/data/skills-public"),
    });
    let mut skills = vec![];
    skills_under(&dir, &mut skills);
    if skills.is_empty() {
        eprintln!("no skills under {}", dir.display());
        std::process::exit(2);
    }
    let mut times = vec![];
    let mut verdicts = std::collections::BTreeMap::<&str, usize>::new();
    for round in 0..rounds {
        for s in &skills {
            let t = Instant::now();
            let r = scan_dir(s).expect("scan");
            times.push(t.elapsed());
            if round == 0 {
                *verdicts.entry(r.verdict.as_str()).or_default() += 1;
            }
        }
    }
    println!(
        "skills: {} under {} ({verdicts:?}), {rounds} rounds",
        skills.len(),
        dir.display()
    );
    report("per skill (directory)", times);

    let big = thousand_file_skill();
    let packed = pack_dir(&big, &ArchiveLimits::default()).expect("pack");
    let mut times = vec![];
    let mut verdict = "";
    for _ in 0..rounds {
        let t = Instant::now();
        let r = scan_archive_bytes(&packed.bytes, &ArchiveLimits::default()).expect("scan");
        times.push(t.elapsed());
        verdict = r.verdict.as_str();
    }
    println!(
        "archive: {} files, {} bytes packed, verdict {verdict}",
        packed.files.len(),
        packed.bytes.len()
    );
    report("1,000-file archive", times);
    let _ = std::fs::remove_dir_all(big.parent().unwrap());
}
