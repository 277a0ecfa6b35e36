//! The offline commands, run as the real binary.

use std::path::Path;
use std::process::{Command, Output};

use skills_sdk::{ArchiveLimits, digest_of_archive};

fn skillctl(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skillctl"))
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn init_validate_pack_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    assert!(
        skillctl(cwd, &["init", "hello", "--owner", "me"])
            .status
            .success()
    );
    let v = skillctl(cwd, &["validate", "hello", "--json"]);
    assert!(v.status.success(), "{}", stdout(&v));
    let json: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(json["valid"], true);

    let p = skillctl(cwd, &["pack", "hello"]);
    assert!(p.status.success(), "{}", String::from_utf8_lossy(&p.stderr));
    let out = stdout(&p);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("hello-0.1.0.skill"));
    let digest = lines.next().unwrap();
    let bytes = std::fs::read(cwd.join("hello-0.1.0.skill")).unwrap();
    assert_eq!(
        digest_of_archive(&bytes, &ArchiveLimits::default())
            .unwrap()
            .to_string(),
        digest
    );
}

#[test]
fn invalid_skills_exit_1_and_modes_differ() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("odd");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: odd\ndescription: d\nauthor: x\n---\n",
    )
    .unwrap();
    let strict = skillctl(tmp.path(), &["validate", "odd"]);
    assert_eq!(strict.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&strict.stderr).contains("field.unknown"));
    assert!(
        skillctl(tmp.path(), &["validate", "odd", "--lenient"])
            .status
            .success()
    );
    // No skill.toml: pack needs a version from the command line.
    assert_eq!(
        skillctl(tmp.path(), &["pack", "odd", "--lenient"])
            .status
            .code(),
        Some(1)
    );
    let p = skillctl(
        tmp.path(),
        &[
            "pack",
            "odd",
            "--lenient",
            "--set-version",
            "2.0.0",
            "-o",
            "o.skill",
        ],
    );
    assert!(p.status.success(), "{}", String::from_utf8_lossy(&p.stderr));
    assert!(tmp.path().join("o.skill").exists());
}
