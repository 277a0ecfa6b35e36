//! Each tool of this crate takes its arguments through one parser: `--help` prints its usage
//! and options and exits 0, and an unknown option is refused before any work starts.

use std::process::Command;

const TOOLS: [(&str, &str, &[&str]); 3] = [
    (
        "train",
        env!("CARGO_BIN_EXE_train"),
        &["--no-write", "--vector-cache", "--eval", "--at"],
    ),
    (
        "detect-report",
        env!("CARGO_BIN_EXE_detect-report"),
        &["--corpus", "--errors"],
    ),
    (
        "corpus-manifest",
        env!("CARGO_BIN_EXE_corpus-manifest"),
        &["--check"],
    ),
];

#[test]
fn every_tool_answers_help_with_its_usage() {
    for (name, exe, options) in TOOLS {
        let out = Command::new(exe).arg("--help").output().expect("runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name} --help: {out:?}");
        assert!(
            stdout.contains(&format!("Usage: {name}")),
            "{name} --help: {stdout}"
        );
        for o in options {
            assert!(stdout.contains(o), "{name} --help does not name {o}");
        }
    }
}

#[test]
fn an_unknown_option_is_refused_before_any_work() {
    for (name, exe, _) in TOOLS {
        let out = Command::new(exe)
            .arg("--no-such-option")
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {out:?}");
        assert!(stderr.contains("--no-such-option"), "{name}: {stderr}");
        assert!(out.stdout.is_empty(), "{name} did work: {out:?}");
    }
}
