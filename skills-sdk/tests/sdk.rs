//! Integration tests for skills-sdk: one binary, a module per feature.

use std::fs;
use std::path::{Path, PathBuf};

use skills_sdk::{ArchiveLimits, ValidationMode};

fn write(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

const SKILL_MD: &str =
    "---\nname: demo\ndescription: Demonstrates things. Use when testing.\n---\n# Demo\n\nDo it.\n";

/// A small valid skill at `parent/demo`.
fn demo_skill(parent: &Path) -> PathBuf {
    let dir = parent.join("demo");
    write(&dir, "SKILL.md", SKILL_MD.as_bytes());
    write(&dir, "skill.toml", b"owner = \"me\"\nversion = \"1.0.0\"\n");
    write(&dir, "references/guide.md", b"guide\n");
    write(&dir, "scripts/run.sh", b"#!/bin/sh\necho hi\n");
    #[cfg(unix)]
    set_mode(&dir.join("scripts/run.sh"), 0o755);
    dir
}

mod reference_agreement {
    use super::*;
    use skills_sdk::{Rule, validate_dir};

    /// The repository's `fixtures/` (every test reads its data from there).
    pub(super) fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
    }

    /// The rule our validator must report for a reference message.
    fn rule_for(message: &str) -> Option<Rule> {
        let table = [
            ("Description exceeds", Rule::DescriptionTooLong),
            ("Directory name", Rule::NameMismatchDir),
            ("Unexpected fields", Rule::FieldUnknown),
            (
                "Missing required field in frontmatter: name",
                Rule::NameMissing,
            ),
            (
                "Missing required field in frontmatter: description",
                Rule::DescriptionMissing,
            ),
            ("Compatibility exceeds", Rule::CompatibilityTooLong),
            ("SKILL.md must start with", Rule::FrontmatterMissing),
            ("Missing required file: SKILL.md", Rule::SkillMdMissing),
        ];
        let m = message.trim().trim_start_matches("- ");
        table
            .iter()
            .find(|(prefix, _)| m.starts_with(prefix))
            .map(|(_, r)| *r)
    }

    #[test]
    fn verdicts_match_skills_ref_on_every_public_skill() {
        let root = fixtures().join("skills-public");
        let tsv = fs::read_to_string(root.join("expected-verdicts.tsv")).unwrap_or_else(|e| {
            panic!(
                "cannot read expected-verdicts.tsv under {}: {e}",
                root.display()
            )
        });
        let mut checked = 0;
        let mut failures = Vec::new();
        for line in tsv.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            let cols: Vec<&str> = line.split('\t').collect();
            let (expected, rel, message) = (cols[0], cols[1], cols.get(2).copied().unwrap_or(""));
            let report = validate_dir(&root.join(rel), ValidationMode::Strict).unwrap();
            let verdict = if report.is_valid() {
                "valid"
            } else {
                "invalid"
            };
            if verdict != expected {
                failures.push(format!(
                    "{rel}: expected {expected}, got {verdict}: {:?}",
                    report.diagnostics
                ));
            } else if expected == "invalid" {
                let rule = rule_for(message)
                    .unwrap_or_else(|| panic!("unmapped reference message {message:?}"));
                if !report.errors().any(|d| d.rule == rule) {
                    failures.push(format!(
                        "{rel}: expected rule {rule}, got {:?}",
                        report.diagnostics
                    ));
                }
            }
            checked += 1;
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert!(checked >= 24, "only {checked} rows checked");
    }
}

mod validation {
    use super::*;
    use skills_sdk::{Risk, validate_dir};

    fn codes(dir: &Path, mode: ValidationMode) -> Vec<(&'static str, bool)> {
        validate_dir(dir, mode)
            .unwrap()
            .diagnostics
            .iter()
            .map(|d| (d.rule.code(), d.is_error()))
            .collect()
    }

    #[test]
    fn strict_rejects_what_lenient_only_warns_about() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = demo_skill(tmp.path());
        write(
            &dir,
            "SKILL.md",
            b"---\nname: demo\ndescription: d\nversion: 2\n---\nbody\n",
        );
        write(
            &dir,
            "skill.toml",
            b"owner = \"me\"\nversion = \"1.0.0\"\nhomepage = \"x\"\n",
        );
        assert_eq!(
            codes(&dir, ValidationMode::Strict),
            [("field.unknown", true), ("manifest.field_unknown", true)]
        );
        assert_eq!(
            codes(&dir, ValidationMode::Lenient),
            [("field.unknown", false), ("manifest.field_unknown", false)]
        );
        let skill = skills_sdk::load_dir(&dir, ValidationMode::Lenient).unwrap();
        assert_eq!(skill.frontmatter.extra["version"], serde_json::json!(2));
        let err = skills_sdk::load_dir(&dir, ValidationMode::Strict).unwrap_err();
        assert_eq!(err.code(), "skill.invalid");
    }

    #[test]
    fn diagnostics_name_file_field_and_rule() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("wrong-dir");
        write(
            &dir,
            "SKILL.md",
            b"---\nname: Demo--x\ndescription: d\n---\n",
        );
        let report = validate_dir(&dir, ValidationMode::Strict).unwrap();
        let rules: Vec<_> = report.diagnostics.iter().map(|d| d.rule.code()).collect();
        assert_eq!(
            rules,
            ["name.uppercase", "name.double_hyphen", "name.mismatch_dir"]
        );
        let d = &report.diagnostics[0];
        assert_eq!(
            (d.file.as_str(), d.field.as_deref()),
            ("SKILL.md", Some("name"))
        );
        assert!(report.skill.is_none());
    }

    #[test]
    fn missing_files_and_front_matter() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("demo");
        fs::create_dir(&dir).unwrap();
        assert_eq!(
            codes(&dir, ValidationMode::Strict),
            [("skill_md.missing", true)]
        );
        write(&dir, "SKILL.md", b"# no front matter\n");
        assert_eq!(
            codes(&dir, ValidationMode::Strict),
            [("frontmatter.missing", true)]
        );
        write(&dir, "SKILL.md", b"---\nname: demo\n");
        assert_eq!(
            codes(&dir, ValidationMode::Strict),
            [("frontmatter.unclosed", true)]
        );
        assert_eq!(
            validate_dir(&dir.join("SKILL.md"), ValidationMode::Strict)
                .unwrap_err()
                .code(),
            "skill.not_a_directory"
        );
    }

    #[test]
    fn manifest_errors_are_reported_with_codes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = demo_skill(tmp.path());
        write(
            &dir,
            "skill.toml",
            b"owner = \"me\"\nversion = \"one\"\nscope = \"galaxy\"\n[[tests]]\nname = \"t\"\ncommand = []\ntimeout_secs = -1\n",
        );
        let report = validate_dir(&dir, ValidationMode::Strict).unwrap();
        let rules: Vec<_> = report
            .diagnostics
            .iter()
            .map(|d| (d.file.as_str(), d.rule.code()))
            .collect();
        assert_eq!(
            rules,
            [
                ("skill.toml", "version.invalid"),
                ("skill.toml", "scope.invalid"),
                ("skill.toml", "tests.command_empty"),
                ("skill.toml", "tests.timeout_invalid"),
            ]
        );
        write(&dir, "skill.toml", b"owner = [\n");
        assert_eq!(
            codes(&dir, ValidationMode::Strict),
            [("manifest.syntax", true)]
        );
        fs::remove_file(dir.join("skill.toml")).unwrap();
        let skill = skills_sdk::load_dir(&dir, ValidationMode::Strict).unwrap();
        assert!(skill.manifest.is_none() && skill.version().is_none());
    }

    #[test]
    fn a_public_skill_discovers_in_about_a_hundred_tokens() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = demo_skill(tmp.path());
        write(
            &dir,
            "skill.toml",
            b"owner = \"me\"\nversion = \"1.2.0\"\n[requires]\ntools = [\"Bash\"]\nenvironment = [\"GITHUB_TOKEN\"]\n",
        );
        let skill = skills_sdk::load_dir(&dir, ValidationMode::Strict).unwrap();
        let tree = skills_sdk::tree_of_dir(&dir).unwrap();
        let entry = skills_sdk::DiscoverEntry::from_skill(&skill, Some(&tree));
        assert_eq!(entry.description, "Demonstrates things.");
        assert_eq!(
            entry.risks,
            [
                Risk::RunsShellCommands,
                Risk::UsesCredentials,
                Risk::ShipsExecutables
            ]
        );
        assert_eq!(entry.version.as_ref().unwrap().to_string(), "1.2.0");
        assert!(
            entry.tokens <= 120,
            "{} tokens: {}",
            entry.tokens,
            entry.render()
        );
    }
}

mod digest {
    use super::*;
    use skills_sdk::{digest_dir, pack_dir};

    #[test]
    fn two_packs_of_one_tree_are_identical() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = demo_skill(tmp.path());
        let a = pack_dir(&dir, &ArchiveLimits::default()).unwrap();
        let b = pack_dir(&dir, &ArchiveLimits::default()).unwrap();
        assert_eq!(a.bytes, b.bytes);
        assert_eq!(a.digest, b.digest);
        assert_eq!(a.digest, digest_dir(&dir).unwrap());
        let paths: Vec<_> = a.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "SKILL.md",
                "references/guide.md",
                "scripts/run.sh",
                "skill.toml"
            ]
        );
    }

    #[test]
    fn a_copy_with_other_mtimes_order_and_modes_has_the_same_digest_and_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let a = demo_skill(&tmp.path().join("a"));
        let b = tmp.path().join("b").join("demo");
        // Creation order reversed from `demo_skill`; other mtimes; other non-exec mode bits.
        let files = [
            "scripts/run.sh",
            "references/guide.md",
            "skill.toml",
            "SKILL.md",
        ];
        for (i, rel) in files.iter().enumerate() {
            write(&b, rel, &fs::read(a.join(rel)).unwrap());
            let f = fs::File::options().write(true).open(b.join(rel)).unwrap();
            let t = std::time::SystemTime::UNIX_EPOCH
                + std::time::Duration::from_secs(1_000_000 * (i as u64 + 1));
            f.set_modified(t).unwrap();
        }
        #[cfg(unix)]
        {
            set_mode(&b.join("scripts/run.sh"), 0o700);
            set_mode(&b.join("SKILL.md"), 0o600);
        }
        // Ignored litter does not count either.
        write(&b, ".git/HEAD", b"ref: refs/heads/main\n");
        write(&b, "scripts/__pycache__/x.pyc", b"\0");
        write(&b, ".DS_Store", b"\0");
        let limits = ArchiveLimits::default();
        let (pa, pb) = (
            pack_dir(&a, &limits).unwrap(),
            pack_dir(&b, &limits).unwrap(),
        );
        assert_eq!(pa.digest, pb.digest);
        assert_eq!(pa.bytes, pb.bytes);
    }

    #[test]
    fn content_and_exec_bit_change_the_digest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = demo_skill(tmp.path());
        let before = digest_dir(&dir).unwrap();
        write(&dir, "references/guide.md", b"guide!\n");
        let edited = digest_dir(&dir).unwrap();
        assert_ne!(before, edited);
        #[cfg(unix)]
        {
            set_mode(&dir.join("references/guide.md"), 0o755);
            assert_ne!(edited, digest_dir(&dir).unwrap());
        }
    }

    #[cfg(unix)]
    #[test]
    fn packing_refuses_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = demo_skill(tmp.path());
        std::os::unix::fs::symlink("/etc/passwd", dir.join("references/passwd")).unwrap();
        assert_eq!(
            pack_dir(&dir, &ArchiveLimits::default())
                .unwrap_err()
                .code(),
            "pack.symlink"
        );
    }

    #[test]
    fn packing_enforces_the_limits_unpacking_will_apply() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = demo_skill(tmp.path());
        let small = ArchiveLimits {
            max_file_size: 10,
            ..ArchiveLimits::default()
        };
        assert_eq!(
            pack_dir(&dir, &small).unwrap_err().code(),
            "archive.file_too_large"
        );
        let few = ArchiveLimits {
            max_files: 3,
            ..ArchiveLimits::default()
        };
        assert_eq!(
            pack_dir(&dir, &few).unwrap_err().code(),
            "archive.too_many_files"
        );
    }
}

mod unpack {
    use super::*;
    use skills_sdk::{
        digest_of_archive, list_archive, pack_dir, read_archive, read_archive_file, tree_of_dir,
        unpack_to, validate_archive,
    };

    #[test]
    fn round_trip_preserves_the_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = demo_skill(tmp.path());
        let limits = ArchiveLimits::default();
        let packed = pack_dir(&dir, &limits).unwrap();
        assert_eq!(
            digest_of_archive(&packed.bytes, &limits).unwrap(),
            packed.digest
        );
        assert_eq!(
            list_archive(&packed.bytes, &limits).unwrap().files(),
            packed.files.as_slice()
        );

        let out = tmp.path().join("out");
        let tree = unpack_to(&packed.bytes, &out, &limits).unwrap();
        assert_eq!(tree.digest(), packed.digest);
        assert_eq!(tree_of_dir(&out).unwrap().digest(), packed.digest);
        assert_eq!(fs::read(out.join("SKILL.md")).unwrap(), SKILL_MD.as_bytes());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(out.join("scripts/run.sh"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o755);
        }
        // A second unpack into the now non-empty directory is refused.
        assert_eq!(
            unpack_to(&packed.bytes, &out, &limits).unwrap_err().code(),
            "destination.not_empty"
        );

        let script = read_archive_file(&packed.bytes, "scripts/run.sh", &limits).unwrap();
        assert!(script.executable);
        assert_eq!(script.contents, b"#!/bin/sh\necho hi\n");
        let missing = read_archive_file(&packed.bytes, "nope.md", &limits).unwrap_err();
        assert_eq!(missing.code(), "archive.file_not_found");

        let archive = read_archive(&packed.bytes, &limits).unwrap();
        let report = validate_archive(&archive, ValidationMode::Strict);
        assert!(report.is_valid(), "{:?}", report.diagnostics);
        assert_eq!(
            report.skill.unwrap().manifest.unwrap().version.to_string(),
            "1.0.0"
        );
    }
}

mod attacks {
    use super::*;
    use skills_sdk::archive::gzip;
    use skills_sdk::{digest_of_archive, read_archive, read_archive_file, unpack_to};
    use tar::{EntryType, Header};

    /// Appends an entry with raw header fields: the tar crate's path setters refuse `..` and
    /// absolute paths, which is exactly what these tests need to write.
    fn raw(b: &mut tar::Builder<Vec<u8>>, name: &[u8], kind: EntryType, data: &[u8], link: &[u8]) {
        let mut h = Header::new_gnu();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append(&h, data).unwrap();
    }

    fn archive(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        raw(
            &mut b,
            b"SKILL.md",
            EntryType::Regular,
            SKILL_MD.as_bytes(),
            b"",
        );
        build(&mut b);
        gzip(&b.into_inner().unwrap()).unwrap()
    }

    /// The error code, and that nothing was written by `unpack_to`.
    fn refused(bytes: &[u8], limits: &ArchiveLimits) -> &'static str {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("out");
        let code = unpack_to(bytes, &dest, limits).unwrap_err().code();
        assert!(
            !dest.exists(),
            "{code}: the destination must not be created"
        );
        assert_eq!(digest_of_archive(bytes, limits).unwrap_err().code(), code);
        code
    }

    fn one(name: &[u8], kind: EntryType, data: &[u8], link: &[u8]) -> &'static str {
        refused(
            &archive(|b| raw(b, name, kind, data, link)),
            &ArchiveLimits::default(),
        )
    }

    #[test]
    fn path_traversal() {
        assert_eq!(
            one(b"../../etc/passwd", EntryType::Regular, b"x", b""),
            "archive.path_traversal"
        );
        assert_eq!(
            one(b"scripts/../../x", EntryType::Regular, b"x", b""),
            "archive.path_traversal"
        );
    }

    #[test]
    fn absolute_path() {
        assert_eq!(
            one(b"/abs", EntryType::Regular, b"x", b""),
            "archive.absolute_path"
        );
    }

    #[test]
    fn symlink_and_hardlink() {
        assert_eq!(
            one(b"evil", EntryType::Symlink, b"", b"/etc/passwd"),
            "archive.symlink"
        );
        assert_eq!(
            one(b"evil", EntryType::Link, b"", b"SKILL.md"),
            "archive.hardlink"
        );
    }

    #[test]
    fn devices_and_fifos() {
        assert_eq!(
            one(b"tty", EntryType::Char, b"", b""),
            "archive.special_file"
        );
        assert_eq!(
            one(b"sda", EntryType::Block, b"", b""),
            "archive.special_file"
        );
        assert_eq!(
            one(b"pipe", EntryType::Fifo, b"", b""),
            "archive.special_file"
        );
    }

    #[test]
    fn non_utf8_and_duplicate_names() {
        assert_eq!(
            one(b"bad\xff.md", EntryType::Regular, b"x", b""),
            "archive.non_utf8_name"
        );
        assert_eq!(
            one(b"SKILL.md", EntryType::Regular, b"x", b""),
            "archive.duplicate_path"
        );
        assert_eq!(
            one(b"./SKILL.md", EntryType::Regular, b"x", b""),
            "archive.duplicate_path"
        );
        assert_eq!(
            one(b"SKILL.md/x", EntryType::Regular, b"x", b""),
            "archive.path_conflict"
        );
    }

    #[test]
    fn oversize_file() {
        let big = vec![0u8; 11 * 1024 * 1024];
        assert_eq!(
            one(b"big.bin", EntryType::Regular, &big, b""),
            "archive.file_too_large"
        );
    }

    #[test]
    fn gzip_bomb_of_files_stops_at_the_total() {
        let chunk = vec![0u8; 9 * 1024 * 1024];
        let bytes = archive(|b| {
            for i in 0..8 {
                raw(
                    b,
                    format!("z{i}").as_bytes(),
                    EntryType::Regular,
                    &chunk,
                    b"",
                );
            }
        });
        assert!(
            bytes.len() < 1024 * 1024,
            "the bomb should be small: {}",
            bytes.len()
        );
        assert_eq!(
            refused(&bytes, &ArchiveLimits::default()),
            "archive.total_too_large"
        );
    }

    #[test]
    fn ninety_thousand_directory_entries_are_refused_by_count() {
        // The review's attack: 90,000 directory entries were accepted, since only regular files
        // counted and the stream budget (58 MB) is larger than their 46 MB of headers.
        let bytes = archive(|b| {
            for i in 0..90_000 {
                raw(
                    b,
                    format!("d{i}/").as_bytes(),
                    EntryType::Directory,
                    b"",
                    b"",
                );
            }
        });
        assert_eq!(
            refused(&bytes, &ArchiveLimits::default()),
            "archive.too_many_entries"
        );
        assert_eq!(
            read_archive_file(&bytes, "SKILL.md", &ArchiveLimits::default())
                .unwrap_err()
                .code(),
            "archive.too_many_entries"
        );
    }

    #[test]
    fn ignored_names_and_global_headers_count_as_entries() {
        let bytes = archive(|b| {
            for i in 0..20 {
                raw(
                    b,
                    format!("__pycache__/{i}.pyc").as_bytes(),
                    EntryType::Regular,
                    b"x",
                    b"",
                );
            }
        });
        let limits = ArchiveLimits {
            max_entries: 10,
            ..ArchiveLimits::default()
        };
        assert_eq!(refused(&bytes, &limits), "archive.too_many_entries");
    }

    #[test]
    fn trailing_garbage_after_the_gzip_stream_is_refused() {
        let mut bytes = archive(|_| {});
        assert!(read_archive(&bytes, &ArchiveLimits::default()).is_ok());
        bytes.extend_from_slice(b"<script>served as part of the archive</script>");
        assert_eq!(
            refused(&bytes, &ArchiveLimits::default()),
            "archive.trailing_data"
        );
        assert_eq!(
            read_archive_file(&bytes, "SKILL.md", &ArchiveLimits::default())
                .unwrap_err()
                .code(),
            "archive.trailing_data"
        );
    }

    #[test]
    fn a_second_gzip_member_is_refused() {
        let mut bytes = archive(|_| {});
        let mut hidden = tar::Builder::new(Vec::new());
        raw(&mut hidden, b"hidden.md", EntryType::Regular, b"x", b"");
        bytes.extend_from_slice(&gzip(&hidden.into_inner().unwrap()).unwrap());
        assert_eq!(
            refused(&bytes, &ArchiveLimits::default()),
            "archive.trailing_data"
        );
    }

    #[test]
    fn data_after_the_tar_end_marker_is_refused_but_zero_padding_is_not() {
        let mut b = tar::Builder::new(Vec::new());
        raw(
            &mut b,
            b"SKILL.md",
            EntryType::Regular,
            SKILL_MD.as_bytes(),
            b"",
        );
        let mut tar_bytes = b.into_inner().unwrap();
        // `tar` pads archives to 10 KiB records with zeros: that is fine.
        tar_bytes.resize(10 * 1024, 0);
        let padded = gzip(&tar_bytes).unwrap();
        assert!(read_archive(&padded, &ArchiveLimits::default()).is_ok());
        tar_bytes.extend_from_slice(b"smuggled after the end marker");
        assert_eq!(
            refused(&gzip(&tar_bytes).unwrap(), &ArchiveLimits::default()),
            "archive.data_after_end"
        );
    }

    #[test]
    fn a_corrupt_gzip_trailer_is_refused() {
        let mut bytes = archive(|_| {});
        let crc = bytes.len() - 8;
        bytes[crc] ^= 0xff;
        assert_eq!(
            refused(&bytes, &ArchiveLimits::default()),
            "archive.corrupt"
        );
    }

    #[test]
    fn paths_over_the_length_or_depth_limit_are_refused() {
        let deep = vec!["d"; skills_sdk::archive::DEFAULT_MAX_PATH_DEPTH + 1].join("/");
        assert_eq!(
            one(deep.as_bytes(), EntryType::Regular, b"x", b""),
            "archive.path_too_deep"
        );
        let mut b = tar::Builder::new(Vec::new());
        raw(
            &mut b,
            b"SKILL.md",
            EntryType::Regular,
            SKILL_MD.as_bytes(),
            b"",
        );
        let long = "n".repeat(skills_sdk::archive::DEFAULT_MAX_PATH_BYTES + 1);
        skills_sdk::archive::append_file(&mut b, &long, false, b"x").unwrap();
        let bytes = gzip(&b.into_inner().unwrap()).unwrap();
        assert_eq!(
            refused(&bytes, &ArchiveLimits::default()),
            "archive.path_too_long"
        );
    }

    #[test]
    fn a_read_archive_can_be_kept_and_shared() {
        fn shareable<T: Send + Sync + 'static>(_: &T) {}
        let bytes = archive(|b| raw(b, b"scripts/run.sh", EntryType::Regular, b"echo", b""));
        let kept = std::sync::Arc::new(read_archive(&bytes, &ArchiveLimits::default()).unwrap());
        shareable(&kept);
        assert_eq!(
            kept.retained_bytes(),
            (SKILL_MD.len() + "echo".len()) as u64
        );
        assert_eq!(kept.contents("scripts/run.sh"), Some(&b"echo"[..]));
        assert_eq!(kept.executable("scripts/run.sh"), Some(false));
        assert_eq!(kept.executable("nope"), None);
    }

    #[test]
    fn too_many_files() {
        let bytes = archive(|b| {
            for i in 0..2000 {
                raw(
                    b,
                    format!("f/{i}.md").as_bytes(),
                    EntryType::Regular,
                    b"x",
                    b"",
                );
            }
        });
        assert_eq!(
            refused(&bytes, &ArchiveLimits::default()),
            "archive.too_many_files"
        );
    }

    #[test]
    fn garbage_is_corrupt() {
        assert_eq!(
            refused(b"not a gzip stream", &ArchiveLimits::default()),
            "archive.corrupt"
        );
    }

    #[test]
    fn a_plain_tar_with_directory_entries_and_dot_slash_is_accepted() {
        let bytes = archive(|b| {
            raw(b, b"./references/", EntryType::Directory, b"", b"");
            raw(b, b"./references/a.md", EntryType::Regular, b"a", b"");
        });
        let a = read_archive(&bytes, &ArchiveLimits::default()).unwrap();
        assert_eq!(
            a.paths().collect::<Vec<_>>(),
            ["SKILL.md", "references/a.md"]
        );
    }
}

/// Pins what the front matter of real and tricky `SKILL.md` files reads as, so that a change of
/// YAML parser cannot change a verdict, a value or the served JSON unnoticed. The snapshots
/// were first recorded with `serde_yaml` 0.9; with `saphyr-parser` every verdict, diagnostic
/// and validated value stayed the same, and only the served JSON of inputs `serde_yaml` could
/// not serve changed (a foreign tag is now `{"!tag": value}` instead of an error; a repeated
/// key, which validation always refused, is now refused there too).
mod frontmatter_compat {
    use super::*;
    use serde_json::{Value, json};
    use skills_sdk::frontmatter::{frontmatter_json, parse_skill_md, split_skill_md};

    fn read(text: &str, mode: ValidationMode) -> Value {
        let (fm, body, diags) = parse_skill_md("SKILL.md", text, None, mode);
        json!({
            "codes": diags.iter().map(|d| format!("{}{}", d.rule.code(), if d.is_error() { "" } else { " (warning)" })).collect::<Vec<_>>(),
            "frontmatter": fm,
            "body": body,
        })
    }

    fn served(text: &str) -> Value {
        let text = text.replace("\r\n", "\n");
        match split_skill_md(&text) {
            Err(rule) => json!({ "split_error": rule.code() }),
            Ok(parts) => match frontmatter_json(parts.yaml) {
                Ok(map) => Value::Object(map),
                Err(e) => json!({ "error": e.code() }),
            },
        }
    }

    fn case(yaml: &str) -> Value {
        let text = format!("---\n{yaml}---\nbody\n");
        json!({
            "yaml": yaml,
            "strict": read(&text, ValidationMode::Strict),
            "lenient": read(&text, ValidationMode::Lenient),
            "served": served(&text),
        })
    }

    #[test]
    fn tricky_front_matter_reads_as_before() {
        let cases = [
            "name: a\ndescription: x\n",
            "",
            "# only a comment\n",
            "name: a\ndescription: |\n  line one\n  line two\n\nlicense: >-\n  folded\n  text\n",
            "name: \"quoted\\tname\"\ndescription: 'it''s'\n",
            "{name: flow, description: \"in flow\", allowed-tools: [Read, Write]}\n",
            "name: a\ndescription: x\nallowed-tools: Bash(git:*) Read  Write\n",
            "name: a\ndescription: x\nallowed-tools:\n  - Read\n  - ''\n  - 3\n",
            "name: a\ndescription: x\nallowed-tools: 3\n",
            "name: a\ndescription: x\nmetadata: [1, 2]\n",
            "name: a\ndescription: x\nmetadata: ~\n",
            "name: a\ndescription: x\nmetadata:\n  k: [1]\n  ? [complex]\n  : v\n",
            "name: a\ndescription: x\nmetadata:\n  1: one\n  true: yes\n",
            "name: 123\ndescription: true\n",
            "name: !!str 123\ndescription: !custom tagged\n",
            "name: a\ndescription: x\nversion: 1.2.0\nauthor:\n  name: me\n  tags: [a, b]\nnum: 5\nfl: 2.5\nnothing: ~\n",
            "name: a\nname: b\ndescription: x\n",
            "name: a\ndescription: x\nmetadata:\n  k: 1\n  k: 2\n",
            "name:\n  nested: 1\ndescription: x\n",
            "name: [unclosed\n",
            "- a\n- b\n",
            "just a string\n",
            "name: a\ndescription: x\n...\n",
            "name: a\ndescription: x\n...\nname: b\n",
            "? name\n: a\ndescription: x\n",
            "name: a\ndescription: x\n\"quoted key\": v\n",
            "name: é-ü\ndescription: ünïcödé ✓\n",
            "name: a\ndescription: x\ncompatibility: ''\nlicense: ~\n",
            "name: a\ndescription: \"  \"\n",
            "name: a\ndescription: x\n\tbad: tab\n",
        ];
        let out: Vec<Value> = cases.iter().map(|c| case(c)).collect();
        insta::assert_json_snapshot!("tricky_front_matter", out);
    }

    #[test]
    fn scalars_read_as_before() {
        let values = [
            "3",
            "1.50",
            "true",
            "True",
            "TRUE",
            "tRUE",
            "~",
            "null",
            "Null",
            "",
            "0x1F",
            "0o17",
            "0b101",
            "0123",
            "-0123",
            "+0123",
            "-5",
            "+7",
            "-0x1F",
            "0x-1",
            ".inf",
            "-.inf",
            "+.inf",
            ".nan",
            ".NaN",
            "nan",
            "inf",
            "1e3",
            "1.0",
            "1e16",
            "0.1",
            "1.",
            ".5",
            "-.5",
            "+-1",
            "0x",
            "1_000",
            "123456789012345678901234567890",
            "-123456789012345678901234567890",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "'3'",
            "\"4\"",
            "yes",
            "no",
            "2024-01-02",
            "1.10",
            "1.2.3",
            "!!str 5",
            "!!int 42",
            "!!int \"42\"",
            "!!float 1",
            "!!bool true",
            "!!null ~",
            "!!int x",
            "!custom 5",
            "!custom '5'",
            "|\n    block",
        ];
        let out: Vec<Value> = values
            .iter()
            .map(|v| {
                let text =
                    format!("---\nname: a\ndescription: x\nmetadata:\n  k: {v}\nx: {v}\n---\n");
                let (fm, _, diags) =
                    parse_skill_md("SKILL.md", &text, None, ValidationMode::Lenient);
                let codes: Vec<_> = diags
                    .iter()
                    .filter(|d| d.is_error())
                    .map(|d| d.rule.code())
                    .collect();
                json!({
                    "value": v,
                    "errors": codes,
                    "metadata": fm.as_ref().map(|f| f.metadata.get("k").cloned()),
                    "extra": fm.as_ref().map(|f| f.extra.get("x").cloned()),
                    "served": served(&text).get("x").cloned().unwrap_or_else(|| served(&text)),
                })
            })
            .collect();
        insta::assert_json_snapshot!("scalars", out);
    }

    #[test]
    fn public_skills_read_as_before() {
        let root = reference_agreement::fixtures().join("skills-public");
        let tsv = fs::read_to_string(root.join("expected-verdicts.tsv")).unwrap();
        let mut out = serde_json::Map::new();
        for line in tsv.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            let rel = line.split('\t').nth(1).unwrap();
            let report = skills_sdk::validate_dir(&root.join(rel), ValidationMode::Strict).unwrap();
            let text = fs::read_to_string(root.join(rel).join("SKILL.md")).unwrap();
            let (fm, _, _) = parse_skill_md("SKILL.md", &text, None, ValidationMode::Lenient);
            out.insert(
                rel.to_owned(),
                json!({
                    "codes": report.diagnostics.iter().map(|d| d.rule.code()).collect::<Vec<_>>(),
                    "frontmatter": fm,
                    "served": served(&text),
                }),
            );
        }
        assert!(out.len() >= 24);
        insta::assert_json_snapshot!("public_skills", out);
    }
}

/// The front-matter attacks of the security review (issue #12 item 2), each performed for real.
mod frontmatter_attacks {
    use super::*;
    use skills_sdk::archive::{append_file, gzip};
    use skills_sdk::frontmatter::{
        MAX_FRONTMATTER_BYTES, MAX_FRONTMATTER_DEPTH, MAX_FRONTMATTER_NODES, MAX_SKILL_MD_BYTES,
        frontmatter_json, parse_skill_md,
    };
    use skills_sdk::{read_archive, validate_archive};

    /// Nine levels of nine aliases each: about 387 million "lol"s once expanded, in 600 bytes.
    fn billion_laughs() -> String {
        let mut y = String::from(
            "name: demo\ndescription: laughs\nl0: &l0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n",
        );
        for i in 1..9 {
            let p = format!("*l{}", i - 1);
            y.push_str(&format!("l{i}: &l{i} [{}]\n", [p.as_str(); 9].join(",")));
        }
        y
    }

    fn codes(text: &str) -> Vec<&'static str> {
        let (_, _, d) = parse_skill_md("SKILL.md", text, None, ValidationMode::Lenient);
        d.iter().map(|d| d.rule.code()).collect()
    }

    #[test]
    fn an_alias_bomb_in_front_matter_is_refused_fast() {
        let yaml = billion_laughs();
        assert!(yaml.len() < 1024, "{}", yaml.len());
        let skill_md = format!("---\n{yaml}---\nbody\n");
        // Validation, as on publish: refused by the alias rule, at the first anchor.
        assert_eq!(codes(&skill_md), ["frontmatter.alias"]);
        // The same through an archive, the way the 405-byte attack reached the server.
        let mut b = tar::Builder::new(Vec::new());
        append_file(&mut b, "SKILL.md", false, skill_md.as_bytes()).unwrap();
        let bytes = gzip(&b.into_inner().unwrap()).unwrap();
        let archive = read_archive(&bytes, &ArchiveLimits::default()).unwrap();
        let report = validate_archive(&archive, ValidationMode::Lenient);
        let rules: Vec<_> = report.diagnostics.iter().map(|d| d.rule.code()).collect();
        assert_eq!(rules, ["frontmatter.alias"]);
        assert!(report.skill.is_none());
        // And when serving a stored front matter.
        assert_eq!(
            frontmatter_json(&yaml).unwrap_err().code(),
            "frontmatter.alias"
        );
    }

    #[test]
    fn a_single_anchor_or_alias_is_refused() {
        assert_eq!(
            codes("---\nname: &n demo\ndescription: d\n---\n"),
            ["frontmatter.alias"]
        );
        assert_eq!(
            codes("---\nname: demo\ndescription: d\nmetadata: &m {a: b}\nx: *m\n---\n"),
            ["frontmatter.alias"]
        );
        assert_eq!(
            codes("---\nbase: &b {name: demo}\n<<: *b\ndescription: d\n---\n"),
            ["frontmatter.alias"]
        );
    }

    #[test]
    fn a_front_matter_over_its_size_limit_is_refused() {
        let pad = "x".repeat(MAX_FRONTMATTER_BYTES);
        let text = format!("---\nname: demo\ndescription: d\nlicense: {pad}\n---\n");
        assert_eq!(codes(&text), ["frontmatter.too_large"]);
        assert_eq!(
            frontmatter_json(&format!("license: {pad}\n"))
                .unwrap_err()
                .code(),
            "frontmatter.too_large"
        );
    }

    #[test]
    fn a_skill_md_over_its_size_limit_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = demo_skill(tmp.path());
        let body = "b".repeat(MAX_SKILL_MD_BYTES);
        write(&dir, "SKILL.md", format!("{SKILL_MD}{body}").as_bytes());
        let report = skills_sdk::validate_dir(&dir, ValidationMode::Strict).unwrap();
        let rules: Vec<_> = report.diagnostics.iter().map(|d| d.rule.code()).collect();
        assert_eq!(rules, ["skill_md.too_large"]);
    }

    #[test]
    fn deeply_nested_front_matter_is_refused() {
        let depth = MAX_FRONTMATTER_DEPTH + 1;
        let text = format!(
            "---\nname: demo\ndescription: d\nx: {}{}\n---\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        assert_eq!(codes(&text), ["frontmatter.too_deep"]);
        // 60 KB of unclosed nesting: the parser's own nesting limit (256) or ours stops it.
        let text = format!("---\nx: {}\n---\n", "[".repeat(60_000));
        let c = codes(&text);
        assert!(
            c == ["frontmatter.too_deep"] || c == ["frontmatter.syntax"],
            "{c:?}"
        );
    }

    #[test]
    fn front_matter_with_too_many_nodes_is_refused() {
        let items = "1,".repeat(MAX_FRONTMATTER_NODES);
        let text = format!("---\nname: demo\ndescription: d\nx: [{items}]\n---\n");
        assert!(text.len() < MAX_FRONTMATTER_BYTES);
        assert_eq!(codes(&text), ["frontmatter.too_many_nodes"]);
    }

    #[test]
    fn a_skill_toml_over_its_size_limit_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = demo_skill(tmp.path());
        let pad = "#".repeat(skills_sdk::manifest::MAX_MANIFEST_BYTES);
        write(
            &dir,
            "skill.toml",
            format!("owner = \"me\"\nversion = \"1.0.0\"\n{pad}\n").as_bytes(),
        );
        let report = skills_sdk::validate_dir(&dir, ValidationMode::Strict).unwrap();
        let rules: Vec<_> = report.diagnostics.iter().map(|d| d.rule.code()).collect();
        assert_eq!(rules, ["manifest.too_large"]);
    }
}

#[path = "scan/mod.rs"]
mod scan;
