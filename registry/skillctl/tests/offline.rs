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

mod git_attacks {
    use super::*;

    #[test]
    fn publish_git_refuses_network_remotes_before_reaching_them() {
        let tmp = tempfile::tempdir().unwrap();
        let wire = Tripwire::new();
        let a = wire.addr();
        let host = a.split(':').next().unwrap().to_owned();
        for remote in [
            format!("http://{a}/repo.git"),
            format!("https://{a}/repo.git"),
            format!("git://{a}/repo.git"),
            format!("ssh://git@{a}/repo.git"),
            format!("git@{host}:repo.git"),
            format!("file://{a}/repo.git"),
        ] {
            let o = skillctl_at(
                &wire,
                tmp.path(),
                &["publish", "--git", &remote, "--rev", "main"],
            );
            assert_eq!(refused_code(&o), "git.remote_refused", "{remote}");
            wire.assert_untouched();
        }
    }

    /// A repository at `dir` whose HEAD commit has the tree `build` makes.
    fn repo_with(dir: &Path, build: impl FnOnce(&git2::Repository, &mut git2::TreeBuilder<'_>)) {
        let repo = git2::Repository::init(dir).unwrap();
        let skill_md = repo
            .blob(b"---\nname: big\ndescription: A skill too large to publish.\n---\nbody\n")
            .unwrap();
        let mut root = repo.treebuilder(None).unwrap();
        root.insert("SKILL.md", skill_md, 0o100644).unwrap();
        build(&repo, &mut root);
        let tree = repo.find_tree(root.write().unwrap()).unwrap();
        let sig = git2::Signature::now("Ann", "ann@example.com").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "skill", &tree, &[])
            .unwrap();
    }

    fn pack_code(dir: &Path) -> Option<&'static str> {
        let err = skillctl::pack_from_git(dir.to_str().unwrap(), "HEAD", None).unwrap_err();
        skillctl::error_code(&err)
    }

    #[test]
    fn a_git_tree_of_too_many_directories_is_refused() {
        // Directories holding only ignored names pack to nothing, so counting files alone
        // (as packing does) would let any number of them through.
        let tmp = tempfile::tempdir().unwrap();
        repo_with(tmp.path(), |repo, root| {
            let litter = repo.blob(b"\0").unwrap();
            let mut sub = repo.treebuilder(None).unwrap();
            sub.insert(".DS_Store", litter, 0o100644).unwrap();
            let sub = sub.write().unwrap();
            for i in 0..3000 {
                root.insert(format!("d{i}"), sub, 0o040000).unwrap();
            }
        });
        assert_eq!(pack_code(tmp.path()), Some("archive.too_many_entries"));
    }

    #[test]
    fn a_git_tree_over_the_total_size_is_refused() {
        // Six entries of one 9 MiB blob: a small repository, 54 MiB once written out.
        let tmp = tempfile::tempdir().unwrap();
        repo_with(tmp.path(), |repo, root| {
            let big = repo.blob(&vec![0u8; 9 * 1024 * 1024]).unwrap();
            for i in 0..6 {
                root.insert(format!("z{i}.bin"), big, 0o100644).unwrap();
            }
        });
        assert_eq!(pack_code(tmp.path()), Some("archive.total_too_large"));
    }

    #[test]
    fn a_git_tree_with_an_oversize_file_or_too_deep_a_path_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let one = tmp.path().join("one");
        repo_with(&one, |repo, root| {
            let big = repo.blob(&vec![0u8; 11 * 1024 * 1024]).unwrap();
            root.insert("big.bin", big, 0o100644).unwrap();
        });
        assert_eq!(pack_code(&one), Some("archive.file_too_large"));
        let deep = tmp.path().join("deep");
        repo_with(&deep, |repo, root| {
            let leaf = repo.blob(b"x").unwrap();
            let mut tb = repo.treebuilder(None).unwrap();
            tb.insert("f", leaf, 0o100644).unwrap();
            let mut tree = tb.write().unwrap();
            for _ in 0..40 {
                let mut tb = repo.treebuilder(None).unwrap();
                tb.insert("d", tree, 0o040000).unwrap();
                tree = tb.write().unwrap();
            }
            root.insert("d", tree, 0o040000).unwrap();
        });
        assert_eq!(pack_code(&deep), Some("archive.path_too_deep"));
    }

    #[test]
    fn a_local_path_and_a_file_url_still_publish() {
        let tmp = tempfile::tempdir().unwrap();
        repo_with(tmp.path(), |_, _| {});
        let path = tmp.path().to_str().unwrap();
        let (a, _) = skillctl::pack_from_git(path, "HEAD", None).unwrap();
        let (b, _) = skillctl::pack_from_git(&format!("file://{path}"), "HEAD", None).unwrap();
        assert_eq!(a.digest, b.digest);
        assert_eq!(a.files.len(), 1);
    }
}

mod test_sandbox {
    use super::*;

    #[test]
    fn a_test_command_sees_only_the_sandboxed_home_path_and_declared_variables() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("env-probe");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            "---\nname: env-probe\ndescription: Prints what a test command sees.\n---\nbody\n",
        )
        .unwrap();
        let out = tmp.path().join("seen.txt");
        let script = format!(
            "{{ echo \"HOME=$HOME\"; echo \"PATH=$PATH\"; echo \"PWD=$(pwd)\"; \
             [ -d \"$HOME\" ] && [ -z \"$(ls -A \"$HOME\")\" ] && echo HOME_FRESH=yes; \
             env | cut -d= -f1 | sort | sed 's/^/VAR=/'; }} > '{}'",
            out.display()
        );
        std::fs::write(
            dir.join("skill.toml"),
            format!(
                "owner = \"me\"\nversion = \"1.0.0\"\n[requires]\nenvironment = [\"DECLARED_VAR\", \"UNSET_VAR\", \"PATH\"]\n[[tests]]\nname = \"probe\"\ncommand = [\"/bin/sh\", \"-c\", {script:?}]\ntimeout_secs = 30\n"
            ),
        )
        .unwrap();
        let tester_home = tmp.path().join("tester-home");
        std::fs::create_dir(&tester_home).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_skillctl"))
            .current_dir(tmp.path())
            .args(["test", "--local", "env-probe"])
            .env("HOME", &tester_home)
            .env("PATH", format!("{}:/usr/bin:/bin", tmp.path().display()))
            .env("SECRET_TOKEN", "s3cret")
            .env("DECLARED_VAR", "declared")
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        assert!(stdout(&o).contains("PASS probe"), "{}", stdout(&o));
        let seen = std::fs::read_to_string(&out).unwrap();
        let value = |k: &str| {
            seen.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("{k} not in {seen}"))
                .to_owned()
        };
        let home = value("HOME");
        assert_ne!(Path::new(&home), tester_home.as_path());
        assert_eq!(value("HOME_FRESH"), "yes");
        assert_eq!(value("PATH"), skillctl::TEST_PATH);
        // The command runs in an unpacked copy named after the skill, not in the author's dir.
        let pwd = value("PWD");
        assert!(
            pwd.ends_with("/env-probe") && Path::new(&pwd) != dir,
            "{pwd}"
        );
        let vars: Vec<&str> = seen
            .lines()
            .filter_map(|l| l.strip_prefix("VAR="))
            .collect();
        assert!(!vars.contains(&"SECRET_TOKEN"), "{vars:?}");
        assert!(vars.contains(&"DECLARED_VAR"), "{vars:?}");
        // Nothing else of the tester's: only what the sandbox sets, the declared variable, and
        // what the shell itself adds.
        for v in &vars {
            assert!(
                [
                    "HOME",
                    "PATH",
                    "DECLARED_VAR",
                    "PWD",
                    "SHLVL",
                    "_",
                    "OLDPWD"
                ]
                .contains(v),
                "unexpected variable {v} in {vars:?}"
            );
        }
        // The sandbox's temporary HOME is gone afterwards.
        assert!(!Path::new(&home).exists());
    }
}

#[test]
fn scan_prints_the_report_and_exits_1_on_fail() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/skills-scan");
    let bad = fixtures.join("malicious/env-doctor");
    let o = skillctl(&fixtures, &["scan", bad.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["verdict"], "fail");
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["rule"] == "script.exfil" && f["file"] == "scripts/doctor.py")
    );
    // A packed archive scans like its directory; a look-alike exits 0.
    let t = tempfile::tempdir().unwrap();
    let packed = skills_sdk::pack_dir(&bad, &ArchiveLimits::default()).unwrap();
    let file = t.path().join("env-doctor.skill");
    std::fs::write(&file, &packed.bytes).unwrap();
    let o = skillctl(t.path(), &["scan", file.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap(),
        v
    );
    let good = fixtures.join("benign/deploy-site");
    let o = skillctl(&fixtures, &["scan", good.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("scan: pass"), "{}", stdout(&o));
}
