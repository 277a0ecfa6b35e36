//! The online half of `skillctl`: an HTTP client for the registry's skill API, skills from Git
//! repositories, running a version's declared tests, and lockfiles (`skills.toml` →
//! `skills.lock` → install). The binary (`main.rs`) is a thin argument parser over this.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use skills_sdk::semver::{Version, VersionReq};
use skills_sdk::{ArchiveLimits, EntryBudget, PackedSkill, SdkError, TreeDigest};

/// What `skillctl` itself refuses, each with a stable code; errors from the SDK keep theirs
/// ([`error_code`] finds either in an error chain). Tests and scripts match on the code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "invalid skill name {0:?}: 1-64 of a-z, 0-9 and '-', no leading, trailing or double '-'"
    )]
    InvalidName(String),
    #[error("lockfile entry {index}: name {value:?} is not a valid skill name")]
    LockfileName { index: usize, value: String },
    #[error("lockfile entry {index}: version {value:?} is not an exact semver version")]
    LockfileVersion { index: usize, value: String },
    #[error("lockfile entry {index}: digest {value:?} is not a sha256:<64 lowercase hex> digest")]
    LockfileDigest { index: usize, value: String },
    #[error("lockfile names {0:?} twice")]
    LockfileDuplicate(String),
    #[error("unsupported lockfile version {0}")]
    LockfileFormat(u32),
    #[error("{0} is a symlink; install never writes through one")]
    InstallSymlink(PathBuf),
    #[error(
        "{0:?} is not a local Git repository: only a path or a file:// URL is allowed, no network transport"
    )]
    RemoteRepository(String),
    #[error("the registry answered a version or digest that is not valid: {0}")]
    BadAnswer(String),
    #[error(
        "promoting {0} replaces the current release and needs confirmation: stdin is not a \
         terminal, so pass --yes to promote without asking"
    )]
    ConfirmationRequired(String),
}

impl Error {
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidName(_) => "skill.invalid_name",
            Self::LockfileName { .. } => "lockfile.invalid_name",
            Self::LockfileVersion { .. } => "lockfile.invalid_version",
            Self::LockfileDigest { .. } => "lockfile.invalid_digest",
            Self::LockfileDuplicate(_) => "lockfile.duplicate_name",
            Self::LockfileFormat(_) => "lockfile.unsupported_version",
            Self::InstallSymlink(_) => "install.symlink",
            Self::RemoteRepository(_) => "git.remote_refused",
            Self::BadAnswer(_) => "registry.bad_answer",
            Self::ConfirmationRequired(_) => "promote.confirmation_required",
        }
    }
}

/// The stable code of the first [`Error`] or [`SdkError`] in `e`'s chain.
pub fn error_code(e: &anyhow::Error) -> Option<&'static str> {
    e.chain().find_map(|c| {
        c.downcast_ref::<Error>()
            .map(Error::code)
            .or_else(|| c.downcast_ref::<SdkError>().map(SdkError::code))
    })
}

/// Refuses anything but a valid skill name (the SDK's rule), so that a name is always one
/// plain path component.
pub fn check_skill_name(name: &str) -> Result<(), Error> {
    let mut diags = Vec::new();
    skills_sdk::frontmatter::check_name("skills.lock", name, None, &mut diags);
    if diags.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidName(name.to_owned()))
    }
}

/// `version` when it is an exact semver version written canonically.
fn exact_version(version: &str) -> Option<Version> {
    Version::parse(version)
        .ok()
        .filter(|v| v.to_string() == version)
}

/// `digest` when it is a tree digest written canonically (`sha256:` and lowercase hex).
fn exact_digest(digest: &str) -> Option<TreeDigest> {
    digest
        .parse::<TreeDigest>()
        .ok()
        .filter(|d| d.to_string() == digest)
}

/// A registry endpoint and the API key to use there.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    key: String,
    http: reqwest::blocking::Client,
}

/// A non-2xx answer, with the registry's stable error code.
#[derive(Debug, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct ApiError {
    pub status: u16,
    pub code: String,
    pub message: String,
    pub details: Value,
}

impl Client {
    pub fn new(base: &str, key: &str) -> Result<Self> {
        Ok(Client {
            base: base.trim_end_matches('/').to_string(),
            key: key.to_string(),
            http: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(300))
                .build()?,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn check(resp: reqwest::blocking::Response) -> Result<reqwest::blocking::Response> {
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(resp);
        }
        let body: Value = resp.json().unwrap_or(Value::Null);
        let e = &body["error"];
        Err(ApiError {
            status,
            code: e["code"].as_str().unwrap_or("UNKNOWN").to_string(),
            message: e["message"].as_str().unwrap_or("").to_string(),
            details: e["details"].clone(),
        }
        .into())
    }

    pub fn get_json(&self, path: &str) -> Result<Value> {
        let r = self
            .http
            .get(self.url(path))
            .bearer_auth(&self.key)
            .send()?;
        Ok(Self::check(r)?.json()?)
    }

    pub fn post_json(&self, path: &str, body: &Value) -> Result<Value> {
        let r = self
            .http
            .post(self.url(path))
            .bearer_auth(&self.key)
            .json(body)
            .send()?;
        Ok(Self::check(r)?.json()?)
    }

    /// Raw bytes and the `x-skill-state` header.
    pub fn get_bytes(&self, path: &str) -> Result<(Vec<u8>, Option<String>)> {
        let r = self
            .http
            .get(self.url(path))
            .bearer_auth(&self.key)
            .send()?;
        let r = Self::check(r)?;
        let state = r
            .headers()
            .get("x-skill-state")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        Ok((r.bytes()?.to_vec(), state))
    }

    /// Uploads an archive; `version` names plain Agent Skills that declare none.
    pub fn publish(&self, bytes: &[u8], version: Option<&Version>) -> Result<Value> {
        let mut path = "/v1/skills".to_string();
        if let Some(v) = version {
            path.push_str(&format!("?version={v}"));
        }
        let r = self
            .http
            .post(self.url(&path))
            .bearer_auth(&self.key)
            .header("content-type", "application/octet-stream")
            .body(bytes.to_vec())
            .send()?;
        Ok(Self::check(r)?.json()?)
    }

    pub fn version_path(name: &str, version: &str, tail: &str) -> String {
        format!("/v1/skills/{name}/versions/{version}{tail}")
    }
}

/// The local path named by `repo`: a path, or a `file:///abs/path` URL. Any other URL
/// (`http://`, `git://`, `ssh://`, …) and the scp-like `host:path` form are refused before Git
/// is asked anything, so that nothing ever reaches the network.
pub fn local_repository(repo: &str) -> Result<PathBuf, Error> {
    let remote = || Error::RemoteRepository(repo.to_owned());
    if let Some(path) = repo.strip_prefix("file://") {
        // `file://host/path` names another machine.
        return if path.starts_with('/') {
            Ok(PathBuf::from(path))
        } else {
            Err(remote())
        };
    }
    if repo.contains("://") {
        return Err(remote());
    }
    let before_slash = repo.split('/').next().unwrap_or("");
    if before_slash.contains(':') && !Path::new(repo).exists() {
        return Err(remote());
    }
    Ok(PathBuf::from(repo))
}

/// Packs the skill at `subdir` of `rev` (a commit id, tag or branch) in the local Git
/// repository `repo` (see [`local_repository`]; bare or not). The tree is read from the object
/// database, never from a working copy, within [`ArchiveLimits::default`]: every tree entry
/// counts before it is used, and each blob's size is read from its header before its bytes.
pub fn pack_from_git(
    repo: &str,
    rev: &str,
    subdir: Option<&Path>,
) -> Result<(PackedSkill, String)> {
    let local = local_repository(repo)?;
    let tmp = tempfile::tempdir()?;
    let repository = git2::Repository::open(&local)
        .with_context(|| format!("opening Git repository {}", local.display()))?;
    let commit = repository
        .revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .with_context(|| format!("resolving {rev:?} to a commit"))?;
    let mut tree = commit.tree()?;
    if let Some(sub) = subdir.filter(|s| !s.as_os_str().is_empty()) {
        let entry = tree
            .get_path(sub)
            .with_context(|| format!("{} not found at {rev}", sub.display()))?;
        tree = entry
            .to_object(&repository)?
            .peel_to_tree()
            .map_err(|_| anyhow!("{} is not a directory at {rev}", sub.display()))?;
    }
    let out = tmp.path().join("skill");
    std::fs::create_dir_all(&out)?;
    let limits = ArchiveLimits::default();
    let mut budget = EntryBudget::new(&limits);
    let odb = repository.odb()?;
    write_tree(&repository, &odb, &tree, &out, "", &mut budget)?;
    let packed = skills_sdk::pack_dir(&out, &limits)?;
    Ok((packed, commit.id().to_string()))
}

/// Writes `tree` under `dir`; `prefix` is its canonical path in the skill (`""` or `a/b/`).
fn write_tree(
    repo: &git2::Repository,
    odb: &git2::Odb<'_>,
    tree: &git2::Tree<'_>,
    dir: &Path,
    prefix: &str,
    budget: &mut EntryBudget,
) -> Result<()> {
    for entry in tree.iter() {
        budget.entry()?;
        let name = entry
            .name()
            .ok_or_else(|| anyhow!("non-UTF-8 file name in the Git tree"))?;
        if name == "." || name == ".." || name.contains('/') {
            bail!("unsafe name {name:?} in the Git tree");
        }
        let rel = skills_sdk::tree::canonical_path(&format!("{prefix}{name}"))?;
        budget.path(&rel)?;
        // Packing skips these names anyway: never read or write them.
        if skills_sdk::tree::is_ignored(name) {
            continue;
        }
        let path = dir.join(name);
        match entry.kind() {
            Some(git2::ObjectType::Tree) => {
                std::fs::create_dir_all(&path)?;
                let sub = entry.to_object(repo)?.peel_to_tree()?;
                write_tree(repo, odb, &sub, &path, &format!("{rel}/"), budget)?;
            }
            Some(git2::ObjectType::Blob) => {
                let mode = entry.filemode();
                if mode == 0o120000 {
                    bail!("symlinks are not allowed in a skill: {name}");
                }
                let (size, _) = odb.read_header(entry.id())?;
                budget.file(&rel, size as u64)?;
                let blob = entry.to_object(repo)?.peel_to_blob()?;
                std::fs::write(&path, blob.content())?;
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    let m = if mode == 0o100755 { 0o755 } else { 0o644 };
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m))?;
                }
            }
            _ => bail!("unsupported entry {name:?} (submodule?) in the Git tree"),
        }
    }
    Ok(())
}

/// The sandbox prefix for test commands: a fresh network namespace via `unshare` when the
/// kernel allows it (as root `unshare -n`, else an unprivileged user namespace), otherwise
/// none (isolation is then best-effort: cleared environment and a temporary directory).
pub fn network_sandbox() -> Option<Vec<String>> {
    let candidates: [&[&str]; 2] = [
        &["unshare", "-n"],
        &["unshare", "--user", "--map-root-user", "--net"],
    ];
    candidates.into_iter().find_map(|prefix| {
        let ok = Command::new(prefix[0])
            .args(&prefix[1..])
            .arg("true")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| prefix.iter().map(|s| s.to_string()).collect())
    })
}

/// One test's outcome, as the registry records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestOutcome {
    pub name: String,
    pub passed: bool,
    pub duration_ms: u64,
    pub log_digest: String,
    #[serde(skip)]
    pub log: String,
    #[serde(skip)]
    pub timed_out: bool,
}

/// What `skillctl test` did.
#[derive(Debug)]
pub struct TestReport {
    pub digest: String,
    pub outcomes: Vec<TestOutcome>,
    pub sandboxed: bool,
    /// The version as the registry answered after recording.
    pub recorded: Value,
}

/// `PATH` of a test command: fixed system directories, never the tester's.
pub const TEST_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A declared test, as `skill.toml` or the registry's manifest states it.
#[derive(Debug, Clone)]
pub struct TestCommand {
    pub name: String,
    pub argv: Vec<String>,
    pub timeout: Duration,
}

/// The environment a test command gets: only `HOME` (a fresh empty temporary directory),
/// `PATH` ([`TEST_PATH`]) and, of the variables the manifest declares in
/// `requires.environment`, those the tester has set. A declared `HOME` or `PATH` is not passed:
/// the sandbox's own win.
pub fn test_environment(home: &Path, declared: &[String]) -> Vec<(String, OsString)> {
    let mut env = vec![
        ("HOME".to_owned(), home.as_os_str().to_owned()),
        ("PATH".to_owned(), OsString::from(TEST_PATH)),
    ];
    for key in declared {
        let plain = !key.is_empty() && !key.contains(['=', '\0']);
        if plain
            && key != "HOME"
            && key != "PATH"
            && let Some(v) = std::env::var_os(key)
        {
            env.push((key.clone(), v));
        }
    }
    env
}

/// Runs `tests` in `dir` (an unpacked skill): argv, no shell, each with [`test_environment`],
/// in a fresh network namespace when `unshare` works, killed at its timeout. Returns the
/// outcomes and whether the network sandbox was available.
pub fn run_test_commands(
    dir: &Path,
    tests: &[TestCommand],
    declared_env: &[String],
) -> Result<(Vec<TestOutcome>, bool)> {
    let sandbox = network_sandbox();
    let mut outcomes = vec![];
    for t in tests {
        let home = tempfile::tempdir()?;
        let env = test_environment(home.path(), declared_env);
        outcomes.push(run_one(
            &t.name,
            &t.argv,
            dir,
            t.timeout,
            sandbox.as_deref(),
            &env,
        )?);
    }
    Ok((outcomes, sandbox.is_some()))
}

/// Downloads `name@version` by its digest, unpacks it into a temporary directory, checks the
/// digest, runs every declared test there ([`run_test_commands`]) and records the results
/// against that digest.
pub fn run_tests(client: &Client, name: &str, version: &str) -> Result<TestReport> {
    check_skill_name(name)?;
    let v = client.get_json(&Client::version_path(name, version, ""))?;
    let digest = v["digest"]
        .as_str()
        .ok_or_else(|| anyhow!("no digest in answer"))?
        .to_string();
    if exact_digest(&digest).is_none() {
        return Err(Error::BadAnswer(format!("digest {digest:?}")).into());
    }
    let (bytes, _) = client.get_bytes(&format!("/v1/skills/by-digest/{digest}/archive"))?;
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join(name);
    let tree = skills_sdk::unpack_to(&bytes, &dir, &ArchiveLimits::default())?;
    if tree.digest().to_string() != digest {
        bail!(
            "downloaded archive has digest {}, expected {digest}",
            tree.digest()
        );
    }
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(String::from))
            .collect()
    };
    let tests: Vec<TestCommand> = v["manifest"]["tests"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| TestCommand {
            name: t["name"].as_str().unwrap_or("").to_string(),
            argv: strings(&t["command"]),
            timeout: Duration::from_secs(t["timeout_secs"].as_u64().unwrap_or(300)),
        })
        .collect();
    let declared = strings(&v["manifest"]["requires"]["environment"]);
    let (outcomes, sandboxed) = run_test_commands(&dir, &tests, &declared)?;
    let body = json!({
        "digest": digest,
        "results": outcomes.iter().map(|o| json!({
            "name": o.name, "passed": o.passed, "duration_ms": o.duration_ms,
            "log_digest": o.log_digest, "log": o.log,
        })).collect::<Vec<_>>(),
    });
    let recorded =
        client.post_json(&Client::version_path(name, version, "/test-results"), &body)?;
    Ok(TestReport {
        digest,
        outcomes,
        sandboxed,
        recorded,
    })
}

/// Whether the results just recorded (the version the server answered) were kept as the
/// author's self-reported ones: the newer of the two runs is the self-reported one.
pub fn self_reported(recorded: &Value) -> bool {
    let at = |k: &str| {
        recorded[k]["at"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    match (at("self_reported"), at("tests")) {
        (Some(s), Some(t)) => s > t,
        (Some(_), None) => true,
        _ => false,
    }
}

/// Runs the declared tests of the skill directory `skill_dir` exactly as `skillctl test` runs a
/// published version's (packed, unpacked into a temporary directory, [`run_test_commands`]),
/// without a registry and without recording; `recorded` is `null`.
pub fn run_local_tests(skill_dir: &Path) -> Result<TestReport> {
    let skill = skills_sdk::load_dir(skill_dir, skills_sdk::ValidationMode::Strict)?;
    let packed = skills_sdk::pack_dir(skill_dir, &ArchiveLimits::default())?;
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join(skill.name());
    skills_sdk::unpack_to(&packed.bytes, &dir, &ArchiveLimits::default())?;
    let (specs, declared) = skill
        .manifest
        .map(|m| (m.tests, m.requires.environment))
        .unwrap_or_default();
    let tests: Vec<TestCommand> = specs
        .into_iter()
        .map(|t| TestCommand {
            name: t.name,
            argv: t.command,
            timeout: Duration::from_secs(t.timeout_secs),
        })
        .collect();
    let (outcomes, sandboxed) = run_test_commands(&dir, &tests, &declared)?;
    Ok(TestReport {
        digest: packed.digest.to_string(),
        outcomes,
        sandboxed,
        recorded: Value::Null,
    })
}

fn run_one(
    name: &str,
    argv: &[String],
    cwd: &Path,
    timeout: Duration,
    sandbox: Option<&[String]>,
    env: &[(String, OsString)],
) -> Result<TestOutcome> {
    let log_dir = tempfile::tempdir()?;
    let log_path = log_dir.path().join("log");
    let log_file = std::fs::File::create(&log_path)?;
    if argv.is_empty() {
        bail!("test {name:?} has an empty command");
    }
    let full: Vec<String> = sandbox.unwrap_or(&[]).iter().chain(argv).cloned().collect();
    let start = Instant::now();
    let mut cmd = Command::new(&full[0]);
    cmd.args(&full[1..])
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file);
    let (passed, timed_out) = match cmd.spawn() {
        Err(e) => {
            std::fs::write(&log_path, format!("cannot start {argv:?}: {e}\n"))?;
            (false, false)
        }
        Ok(mut child) => loop {
            if let Some(status) = child.try_wait()? {
                break (status.success(), false);
            }
            if start.elapsed() >= timeout {
                let _ = child.kill();
                let _ = child.wait();
                break (false, true);
            }
            std::thread::sleep(Duration::from_millis(20));
        },
    };
    let duration_ms = start.elapsed().as_millis() as u64;
    let mut log = String::new();
    std::fs::File::open(&log_path)?
        .read_to_string(&mut log)
        .ok();
    if timed_out {
        log.push_str(&format!(
            "\n[skillctl] killed after {}s\n",
            timeout.as_secs()
        ));
    }
    cap_log(&mut log);
    Ok(TestOutcome {
        name: name.to_string(),
        passed,
        duration_ms,
        log_digest: format!("sha256:{}", hex::encode(Sha256::digest(log.as_bytes()))),
        log,
        timed_out,
    })
}

/// Largest log uploaded with a result (the registry's limit); a longer one keeps its end.
pub const MAX_LOG_BYTES: usize = 256 * 1024;

/// Keeps the last [`MAX_LOG_BYTES`] of a log (on a character boundary) after a marker line.
fn cap_log(log: &mut String) {
    const MARK: &str = "[skillctl] log truncated to its end\n";
    if log.len() <= MAX_LOG_BYTES {
        return;
    }
    let mut start = log.len() - (MAX_LOG_BYTES - MARK.len());
    while !log.is_char_boundary(start) {
        start += 1;
    }
    *log = format!("{MARK}{}", &log[start..]);
}

/// `skills.toml`: `name = "<semver range>"` entries, at the top level or under `[skills]`.
pub fn parse_requirements(text: &str) -> Result<BTreeMap<String, VersionReq>> {
    let table: toml::Table = toml::from_str(text).context("parsing the requirements file")?;
    let entries = match table.get("skills") {
        Some(toml::Value::Table(t)) => t.clone(),
        _ => table,
    };
    entries
        .into_iter()
        .map(|(k, v)| {
            check_skill_name(&k)?;
            let s = v
                .as_str()
                .ok_or_else(|| anyhow!("requirement {k:?} must be a semver range string"))?;
            let req = VersionReq::parse(s).with_context(|| format!("requirement {k} = {s:?}"))?;
            Ok((k, req))
        })
        .collect()
}

/// `skills.lock`: exact versions and digests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lockfile {
    pub version: u32,
    #[serde(default, rename = "skill")]
    pub skills: Vec<LockedSkill>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockedSkill {
    pub name: String,
    pub version: String,
    pub digest: String,
}

impl Lockfile {
    pub fn to_toml(&self) -> Result<String> {
        Ok(format!(
            "# Generated by `skillctl lock`: exact versions and digests. Do not edit.\n{}",
            toml::to_string(self)?
        ))
    }

    /// Parses and [`validates`](Self::validate) a lockfile.
    pub fn parse(text: &str) -> Result<Self> {
        let l: Lockfile = toml::from_str(text).context("parsing the lockfile")?;
        l.validate()?;
        Ok(l)
    }

    /// A lockfile is untrusted input (it comes with a repository): every name must be a valid
    /// skill name (so `DIR/NAME` is one plain component below the target), every version an
    /// exact semver version and every digest a canonical `sha256:` digest (both end up in
    /// request paths), and no name may appear twice.
    pub fn validate(&self) -> Result<(), Error> {
        if self.version != 1 {
            return Err(Error::LockfileFormat(self.version));
        }
        let mut seen = BTreeSet::new();
        for (index, s) in self.skills.iter().enumerate() {
            if check_skill_name(&s.name).is_err() {
                return Err(Error::LockfileName {
                    index,
                    value: s.name.clone(),
                });
            }
            if exact_version(&s.version).is_none() {
                return Err(Error::LockfileVersion {
                    index,
                    value: s.version.clone(),
                });
            }
            if exact_digest(&s.digest).is_none() {
                return Err(Error::LockfileDigest {
                    index,
                    value: s.digest.clone(),
                });
            }
            if !seen.insert(s.name.as_str()) {
                return Err(Error::LockfileDuplicate(s.name.clone()));
            }
        }
        Ok(())
    }
}

/// Resolves every requirement to the highest published (or deprecated) version that matches;
/// yanked versions and drafts never resolve.
pub fn lock(client: &Client, reqs: &BTreeMap<String, VersionReq>) -> Result<Lockfile> {
    let mut skills = vec![];
    for (name, req) in reqs {
        let sel = client.get_json(&format!("/v1/skills/{name}"))?;
        let best = sel["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| matches!(v["state"].as_str(), Some("published" | "deprecated")))
            .filter_map(|v| {
                let ver = Version::parse(v["version"].as_str()?).ok()?;
                req.matches(&ver)
                    .then(|| (ver, v["digest"].as_str().unwrap_or("").to_string()))
            })
            .max_by(|a, b| a.0.cmp(&b.0))
            .ok_or_else(|| anyhow!("no published, non-yanked version of {name} matches {req}"))?;
        if exact_digest(&best.1).is_none() {
            return Err(Error::BadAnswer(format!("{name}@{}: digest {:?}", best.0, best.1)).into());
        }
        skills.push(LockedSkill {
            name: name.clone(),
            version: best.0.to_string(),
            digest: best.1,
        });
    }
    let lock = Lockfile { version: 1, skills };
    lock.validate()?;
    Ok(lock)
}

/// What an install did.
#[derive(Debug, Default)]
pub struct InstallReport {
    pub installed: Vec<PathBuf>,
    pub unchanged: Vec<PathBuf>,
    pub warnings: Vec<String>,
}

/// Fetches exactly the locked archives (by digest), verifies each digest and unpacks it into
/// `target/NAME`. A yanked version still installs, with a warning. A directory already holding
/// the locked digest is left alone; one holding anything else is an error.
///
/// The lockfile is [validated](Lockfile::validate) first, whoever built it, so every path
/// written is `target/NAME/<archive path>`: NAME is one plain component, archive paths are
/// checked by the SDK, and `target/NAME` must not be a symlink (`install.symlink`). Nothing is
/// fetched or written when any entry is invalid.
pub fn install(client: &Client, lockfile: &Lockfile, target: &Path) -> Result<InstallReport> {
    lockfile.validate()?;
    let limits = ArchiveLimits::default();
    let mut report = InstallReport::default();
    std::fs::create_dir_all(target)?;
    for s in &lockfile.skills {
        let dest = target.join(&s.name);
        if std::fs::symlink_metadata(&dest).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(Error::InstallSymlink(dest).into());
        }
        if dest.exists() && std::fs::read_dir(&dest)?.next().is_some() {
            let have = skills_sdk::digest_dir(&dest)?.to_string();
            if have == s.digest {
                report.unchanged.push(dest);
                continue;
            }
            bail!(
                "{} holds {have}, not the locked {}",
                dest.display(),
                s.digest
            );
        }
        let (bytes, state) =
            client.get_bytes(&format!("/v1/skills/by-digest/{}/archive", s.digest))?;
        let got = skills_sdk::digest_of_archive(&bytes, &limits)?.to_string();
        if got != s.digest {
            bail!(
                "{}@{}: the registry sent {got}, the lockfile says {}",
                s.name,
                s.version,
                s.digest
            );
        }
        if state.as_deref() == Some("yanked") {
            report.warnings.push(format!(
                "{}@{} is yanked; installing it because the lockfile pins it",
                s.name, s.version
            ));
        }
        skills_sdk::unpack_to(&bytes, &dest, &limits)?;
        report.installed.push(dest);
    }
    Ok(report)
}

/// Most recent manifests whose replay `promote` shows.
pub const PROMOTE_REPLAYS: usize = 3;
/// Manifests `promote` lists from the impact of the release it replaces.
pub const PROMOTE_MANIFESTS: usize = 20;

/// What promoting a version would replace: the current release, the impact of replacing it
/// (`GET /v1/assets/{id}/impact`) and the replay of its most recent manifests
/// (`POST /v1/context/{id}/replay`; a manifest that cannot be replayed keeps the reason).
#[derive(Debug)]
pub struct PromotionImpact {
    pub name: String,
    pub version: String,
    /// The release being replaced.
    pub current: String,
    pub impact: Value,
    pub replays: Vec<(String, std::result::Result<Value, String>)>,
}

/// The impact of promoting `name@version` over the current release; `None` when there is no
/// current release or it is this version (nothing is replaced).
pub fn promotion_impact(
    client: &Client,
    name: &str,
    version: &str,
) -> Result<Option<PromotionImpact>> {
    check_skill_name(name)?;
    let select = client.get_json(&format!("/v1/skills/{name}"))?;
    let Some(current) = select["current"].as_str().map(str::to_string) else {
        return Ok(None);
    };
    if current == version {
        return Ok(None);
    }
    let release = client.get_json(&Client::version_path(name, &current, ""))?;
    let id = release["id"]
        .as_str()
        .ok_or_else(|| Error::BadAnswer(format!("{name}@{current} has no id")))?;
    let impact = client.get_json(&format!("/v1/assets/{id}/impact?limit={PROMOTE_MANIFESTS}"))?;
    let mut replays = vec![];
    for m in impact["manifests"]["recent"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["replayable"] == true)
        .take(PROMOTE_REPLAYS)
    {
        let Some(mid) = m["id"].as_str() else {
            continue;
        };
        let replay = client
            .post_json(&format!("/v1/context/{mid}/replay"), &json!({}))
            .map_err(|e| format!("{e:#}"));
        replays.push((mid.to_string(), replay));
    }
    Ok(Some(PromotionImpact {
        name: name.to_string(),
        version: version.to_string(),
        current,
        impact,
        replays,
    }))
}

impl PromotionImpact {
    /// The report `promote` prints before it asks.
    pub fn render(&self) -> String {
        let i = &self.impact;
        let count = |v: &Value| v.as_array().map_or(0, Vec::len);
        let mut out = format!(
            "promoting {}@{} replaces the current release {} ({} {})\n",
            self.name,
            self.version,
            self.current,
            i["asset"]["id"].as_str().unwrap_or("?"),
            i["asset"]["content_hash"].as_str().unwrap_or("?"),
        );
        out.push_str(&format!(
            "impact: {} context manifest(s) included {}; {} asset(s) cite it; {} run(s) loaded it\n",
            i["manifests"]["total"],
            self.current,
            count(&i["citing"]),
            count(&i["runs"]),
        ));
        for m in i["manifests"]["recent"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  manifest {} by {} at {}{}\n",
                m["id"].as_str().unwrap_or("?"),
                m["principal"].as_str().unwrap_or("?"),
                m["created_at"].as_str().unwrap_or("?"),
                if m["replayable"] == true {
                    ""
                } else {
                    " (no stored request: not replayable)"
                }
            ));
        }
        for c in i["citing"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  cited by {} {}{}\n",
                c["kind"].as_str().unwrap_or("?"),
                c["id"].as_str().unwrap_or("?"),
                c["skill"]
                    .as_str()
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default()
            ));
        }
        for (mid, replay) in &self.replays {
            match replay {
                Err(e) => out.push_str(&format!("replay {mid}: not replayed: {e}\n")),
                Ok(r) => {
                    let changes = r["changes"].as_array().cloned().unwrap_or_default();
                    out.push_str(&format!(
                        "replay {mid}: {} change(s), {} unchanged\n",
                        changes.len(),
                        r["unchanged"]
                    ));
                    for c in &changes {
                        let item = if c["after"].is_null() {
                            &c["before"]
                        } else {
                            &c["after"]
                        };
                        let reasons: Vec<&str> = c["reasons"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .collect();
                        out.push_str(&format!(
                            "  {} {} {}: {}\n",
                            c["change"].as_str().unwrap_or("?"),
                            c["source_type"].as_str().unwrap_or("?"),
                            item["source_id"].as_str().unwrap_or("?"),
                            reasons.join("; ")
                        ));
                    }
                }
            }
        }
        out
    }
}
