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

/// A TCP listener that records whether anything connected: the registry or Git remote an
/// attack would reach. Nothing here may connect to it.
struct Tripwire(std::net::TcpListener);

impl Tripwire {
    fn new() -> Self {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        Tripwire(l)
    }

    fn addr(&self) -> String {
        self.0.local_addr().unwrap().to_string()
    }

    #[track_caller]
    fn assert_untouched(&self) {
        match self.0.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("something connected: {other:?}"),
        }
    }
}

/// Runs the binary with a registry URL and key pointing at `wire`.
fn skillctl_at(wire: &Tripwire, cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skillctl"))
        .current_dir(cwd)
        .args(args)
        .env("REGISTRY_URL", format!("http://{}", wire.addr()))
        .env("REGISTRY_API_KEY", "key")
        .output()
        .unwrap()
}

/// The stable code of a failed run: `error[CODE]: …` on stderr.
#[track_caller]
fn refused_code(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error["))
        .unwrap_or_else(|| panic!("no error code in {stderr}"));
    line["error[".len()..line.find(']').unwrap()].to_owned()
}

fn listing(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|it| {
            it.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

mod lockfile_attacks {
    use super::*;

    const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

    fn lockfile(name: &str, version: &str, digest: &str) -> String {
        format!(
            "version = 1\n[[skill]]\nname = {name:?}\nversion = {version:?}\ndigest = {digest:?}\n"
        )
    }

    /// Installs `lock` into `root/work/skills` and returns the refusal code; nothing may be
    /// fetched and nothing may appear anywhere under `root` but the lockfile.
    fn install_refused(root: &Path, lock: &str) -> String {
        let wire = Tripwire::new();
        let work = root.join("work");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(work.join("skills.lock"), lock).unwrap();
        let o = skillctl_at(&wire, &work, &["install", "--locked", "--dir", "skills"]);
        wire.assert_untouched();
        assert_eq!(listing(root), ["work"]);
        assert_eq!(listing(&work), ["skills.lock"]);
        refused_code(&o)
    }

    #[test]
    fn a_lockfile_name_with_dot_dot_is_refused_before_anything_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let code = install_refused(tmp.path(), &lockfile("../../x", "1.0.0", DIGEST));
        assert_eq!(code, "lockfile.invalid_name");
        assert!(!tmp.path().parent().unwrap().join("x").exists());
    }

    #[test]
    fn an_absolute_lockfile_name_is_refused_before_anything_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let abs = tmp.path().join("abs");
        let code = install_refused(
            tmp.path(),
            &lockfile(abs.to_str().unwrap(), "1.0.0", DIGEST),
        );
        assert_eq!(code, "lockfile.invalid_name");
        assert!(!abs.exists());
    }

    #[test]
    fn lockfile_versions_digests_and_duplicates_are_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let cases = [
            (
                lockfile("ok", "1.0.0/../../admin", DIGEST),
                "lockfile.invalid_version",
            ),
            (lockfile("ok", "^1.0", DIGEST), "lockfile.invalid_version"),
            (
                lockfile("ok", "1.0.0", "sha256:../../x"),
                "lockfile.invalid_digest",
            ),
            (
                lockfile("ok", "1.0.0", &format!("sha256:{}", "AB".repeat(32))),
                "lockfile.invalid_digest",
            ),
            (
                format!(
                    "{}{}",
                    lockfile("ok", "1.0.0", DIGEST),
                    &lockfile("ok", "1.0.1", DIGEST)["version = 1\n".len()..]
                ),
                "lockfile.duplicate_name",
            ),
            ("version = 2\n".to_owned(), "lockfile.unsupported_version"),
        ];
        for (i, (lock, code)) in cases.iter().enumerate() {
            let root = tmp.path().join(i.to_string());
            assert_eq!(install_refused(&root, lock), *code, "{lock}");
        }
    }

    #[test]
    fn the_library_install_validates_a_lockfile_it_did_not_parse() {
        let tmp = tempfile::tempdir().unwrap();
        let wire = Tripwire::new();
        let client = skillctl::Client::new(&format!("http://{}", wire.addr()), "key").unwrap();
        let lock = skillctl::Lockfile {
            version: 1,
            skills: vec![skillctl::LockedSkill {
                name: "../escape".into(),
                version: "1.0.0".into(),
                digest: DIGEST.into(),
            }],
        };
        let target = tmp.path().join("skills");
        let err = skillctl::install(&client, &lock, &target).unwrap_err();
        assert_eq!(skillctl::error_code(&err), Some("lockfile.invalid_name"));
        wire.assert_untouched();
        assert!(!tmp.path().join("escape").exists());
    }

    #[cfg(unix)]
    #[test]
    fn install_never_writes_through_a_symlink_in_the_target() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let work = tmp.path().join("work");
        std::fs::create_dir_all(work.join("skills")).unwrap();
        std::os::unix::fs::symlink(&outside, work.join("skills/demo")).unwrap();
        std::fs::write(work.join("skills.lock"), lockfile("demo", "1.0.0", DIGEST)).unwrap();
        let wire = Tripwire::new();
        let o = skillctl_at(&wire, &work, &["install", "--locked", "--dir", "skills"]);
        assert_eq!(refused_code(&o), "install.symlink");
        wire.assert_untouched();
        assert!(listing(&outside).is_empty());
    }
}
