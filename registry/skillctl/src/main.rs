//! `skillctl`: the skill author's and release manager's command line.
//!
//! Offline commands (`init`, `validate`, `pack`) use only `skills-sdk`; the server commands
//! (`publish`, `test`, `review`, …) talk to a registry over HTTP (`--server`/`REGISTRY_URL`,
//! `--key`/`REGISTRY_API_KEY`) through the library half (`lib.rs`).

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use serde_json::json;
use skillctl::Client;
use skills_sdk::{ArchiveLimits, Report, ValidationMode};

#[derive(Debug, Parser)]
#[command(
    name = "skillctl",
    version,
    about = "Author, validate, pack and publish agent skills"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a new skill directory with a skeleton SKILL.md and skill.toml.
    Init {
        /// Skill name: 1-64 of a-z, 0-9 and '-'.
        name: String,
        /// Parent directory to create the skill in.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// Owner written into skill.toml (defaults to $USER).
        #[arg(long)]
        owner: Option<String>,
    },
    /// Validate a skill directory; exits with status 1 when it is invalid.
    Validate {
        dir: PathBuf,
        #[command(flatten)]
        mode: ModeArgs,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Scan a skill directory or a packed .skill archive for what it would do to the machine
    /// or the agent (offline, deterministic); exits with status 1 when the verdict is fail.
    Scan {
        /// A skill directory or a `.skill` archive.
        path: PathBuf,
        /// Print `{"verdict", "findings": [{rule, severity, file, line, excerpt, message}]}`.
        #[arg(long)]
        json: bool,
    },
    /// Validate and pack a skill into NAME-VERSION.skill; prints the digest.
    Pack {
        dir: PathBuf,
        /// Output file (default: NAME-VERSION.skill in the current directory).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Version to use when the skill has no skill.toml (plain Agent Skills directories).
        #[arg(long, value_name = "SEMVER")]
        set_version: Option<skills_sdk::semver::Version>,
        #[command(flatten)]
        mode: ModeArgs,
    },
    /// Publish a skill as a draft: a directory, a .skill archive, or a Git revision.
    Publish {
        /// A skill directory or a .skill archive (omit with --git).
        path: Option<PathBuf>,
        /// A local Git repository: a path (bare or not) or a file:///abs/path URL. Any other
        /// URL (http://, https://, git://, ssh://, host:path) is refused: nothing is fetched.
        #[arg(long, requires = "rev", conflicts_with = "path")]
        git: Option<String>,
        /// Commit id, tag or branch to publish from.
        #[arg(long)]
        rev: Option<String>,
        /// Directory of the skill inside the repository.
        #[arg(long)]
        subdir: Option<PathBuf>,
        /// Version for a skill that declares none (plain Agent Skills directories).
        #[arg(long, value_name = "SEMVER")]
        set_version: Option<skills_sdk::semver::Version>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Run a version's declared tests against its exact digest and record the results.
    ///
    /// Results count for Test when the key has the tester role and is neither the version's
    /// author nor its reviewer; the author's own are kept as self-reported (the state stays).
    /// Each test's log (its last 256 KiB) is uploaded and stored under its digest.
    /// Each test command runs from a temporary unpacked copy of the skill (the exact digest),
    /// as argv (no shell), with a cleared environment: HOME is a fresh empty temporary
    /// directory, PATH is /usr/local/bin:/usr/bin:/bin, and of the tester's variables only
    /// those the manifest declares in `requires.environment` are passed (a declared HOME or
    /// PATH is not). When `unshare` works the command gets a fresh network namespace (no
    /// network); otherwise skillctl says isolation is best effort. A command still running at
    /// its timeout_secs is killed and fails.
    #[command(verbatim_doc_comment)]
    Test {
        #[arg(required_unless_present = "local")]
        name: Option<String>,
        #[arg(required_unless_present = "local")]
        version: Option<String>,
        /// Run the tests of a local skill directory the same way, without a registry and
        /// without recording anything.
        #[arg(long, value_name = "DIR", conflicts_with_all = ["name", "version"])]
        local: Option<PathBuf>,
        #[command(flatten)]
        server: OptionalServerArgs,
    },
    /// Waive Test for a version that declares no test (reviewer role; not the author).
    Waive {
        name: String,
        version: String,
        /// Why the version may go without a test (recorded with the version).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Approve or reject a version (reviewer role; not the author).
    Review {
        name: String,
        version: String,
        #[arg(long, conflicts_with = "reject", required_unless_present = "reject")]
        approve: bool,
        #[arg(long)]
        reject: bool,
        #[arg(long, default_value = "")]
        comment: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Publish a tested and approved version.
    ///
    /// When it replaces a current release, first prints the impact of replacing it (the
    /// context manifests that included it, what cites it, the runs that loaded it) and the
    /// replay of its most recent manifests against the registry as it is now, then asks for
    /// confirmation. Without a terminal on stdin it refuses unless --yes is given.
    #[command(verbatim_doc_comment)]
    Promote {
        name: String,
        version: String,
        /// Promote without asking (the impact is still printed).
        #[arg(long, short = 'y')]
        yes: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Make a skill draft from reviewed procedural memories (confirmed, or voted helpful
    /// enough and never harmful), published through the normal path (validation, scan) and
    /// citing each memory.
    Draft {
        /// The procedural memories, in the order the procedure follows.
        #[arg(long = "from-memory", value_name = "ID", num_args = 1.., required = true)]
        from_memory: Vec<String>,
        /// The skill's name.
        #[arg(long)]
        name: String,
        /// What it does and when to use it (default: generated from the procedures).
        #[arg(long)]
        description: Option<String>,
        /// The draft's version (default 0.1.0).
        #[arg(long, value_name = "SEMVER")]
        set_version: Option<skills_sdk::semver::Version>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Deprecate a published version.
    Deprecate {
        name: String,
        version: String,
        #[arg(long)]
        message: String,
        #[arg(long)]
        replacement: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Yank a version (or undo with --undo): no new resolution, lockfiles still install it.
    Yank {
        name: String,
        version: String,
        #[arg(long)]
        reason: Option<String>,
        #[arg(long)]
        undo: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Point the current release back to an earlier published version.
    Rollback {
        name: String,
        /// The version to return to.
        #[arg(long, required_unless_present = "digest")]
        to: Option<String>,
        #[arg(long)]
        digest: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Discover skills: name, short description, risks, version, tokens.
    Search {
        query: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Show a skill's manifest and versions, checked against what you can offer.
    Show {
        name: String,
        #[arg(long)]
        version: Option<String>,
        /// Comma-separated tools your harness offers.
        #[arg(long)]
        tools: Option<String>,
        #[arg(long)]
        permissions: Option<String>,
        #[arg(long)]
        environment: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Resolve skills.toml (`name = "^1.2"`) into skills.lock (exact versions and digests).
    Lock {
        #[arg(long, default_value = "skills.toml")]
        requirements: PathBuf,
        #[arg(long, default_value = "skills.lock")]
        output: PathBuf,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Install exactly the locked versions, verifying digests.
    Install {
        /// Install from the lockfile (the only mode).
        #[arg(long, required = true)]
        locked: bool,
        #[arg(long, default_value = "skills.lock")]
        lockfile: PathBuf,
        /// Target directory; each skill goes to DIR/NAME.
        #[arg(long, default_value = "skills")]
        dir: PathBuf,
        #[command(flatten)]
        server: ServerArgs,
    },
}

#[derive(Debug, Args)]
struct ServerArgs {
    /// Registry base URL.
    #[arg(
        long = "server",
        env = "REGISTRY_URL",
        default_value = "http://127.0.0.1:7878"
    )]
    url: String,
    /// API key.
    #[arg(long, env = "REGISTRY_API_KEY", hide_env_values = true)]
    key: String,
}

impl ServerArgs {
    fn client(&self) -> Result<Client> {
        Client::new(&self.url, &self.key)
    }
}

/// [`ServerArgs`] for a command that can also work without a registry.
#[derive(Debug, Args)]
struct OptionalServerArgs {
    /// Registry base URL.
    #[arg(
        long = "server",
        env = "REGISTRY_URL",
        default_value = "http://127.0.0.1:7878"
    )]
    url: String,
    /// API key.
    #[arg(long, env = "REGISTRY_API_KEY", hide_env_values = true)]
    key: Option<String>,
}

impl OptionalServerArgs {
    fn client(&self) -> Result<Client> {
        let key = self
            .key
            .as_deref()
            .context("an API key is required: --key or REGISTRY_API_KEY")?;
        Client::new(&self.url, key)
    }
}

#[derive(Debug, Args)]
#[group(multiple = false)]
struct ModeArgs {
    /// Unknown keys are errors (the default; agrees with the reference validator).
    #[arg(long)]
    strict: bool,
    /// Unknown keys are warnings.
    #[arg(long)]
    lenient: bool,
}

impl ModeArgs {
    fn mode(&self) -> ValidationMode {
        if self.lenient {
            ValidationMode::Lenient
        } else {
            ValidationMode::Strict
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            // The stable code, when there is one, is what scripts and tests match on.
            match skillctl::error_code(&e) {
                Some(code) => eprintln!("error[{code}]: {e:#}"),
                None => eprintln!("error: {e:#}"),
            }
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Init { name, dir, owner } => init(&name, &dir, owner),
        Command::Validate { dir, mode, json } => validate(&dir, mode.mode(), json),
        Command::Scan { path, json } => scan(&path, json),
        Command::Pack {
            dir,
            output,
            set_version,
            mode,
        } => pack(&dir, output, set_version, mode.mode()),
        Command::Publish {
            path,
            git,
            rev,
            subdir,
            set_version,
            server,
        } => publish(path, git, rev, subdir, set_version, &server.client()?),
        Command::Test {
            name,
            version,
            local,
            server,
        } => match (local, name, version) {
            (Some(dir), _, _) => test_local(&dir),
            (None, Some(name), Some(version)) => test(&server.client()?, &name, &version),
            _ => bail!("give NAME VERSION, or --local DIR"),
        },
        Command::Waive {
            name,
            version,
            reason,
            server,
        } => step(
            &server.client()?,
            &name,
            &version,
            "/test-waiver",
            json!({"reason": reason}),
        ),
        Command::Review {
            name,
            version,
            approve,
            comment,
            server,
            ..
        } => {
            let decision = if approve { "approve" } else { "reject" };
            step(
                &server.client()?,
                &name,
                &version,
                "/review",
                json!({"decision": decision, "comment": comment}),
            )
        }
        Command::Promote {
            name,
            version,
            yes,
            server,
        } => promote(&server.client()?, &name, &version, yes),
        Command::Draft {
            from_memory,
            name,
            description,
            set_version,
            server,
        } => {
            let v = server.client()?.post_json(
                "/v1/skills/drafts/from-memory",
                &json!({
                    "memory_ids": from_memory,
                    "name": name,
                    "description": description,
                    "version": set_version.map(|v| v.to_string()),
                }),
            )?;
            let d = &v["draft"];
            println!(
                "{}@{} {} ({})",
                d["name"].as_str().unwrap_or("?"),
                d["version"].as_str().unwrap_or("?"),
                d["digest"].as_str().unwrap_or("?"),
                d["state"].as_str().unwrap_or("?"),
            );
            if let Some(verdict) = d["scan"]["verdict"].as_str() {
                println!("scan: {verdict}");
            }
            for e in v["evidence"].as_array().into_iter().flatten() {
                println!(
                    "from memory {} version {} {}",
                    e["memory_id"].as_str().unwrap_or("?"),
                    e["version"],
                    e["content_hash"].as_str().unwrap_or("?")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Deprecate {
            name,
            version,
            message,
            replacement,
            server,
        } => step(
            &server.client()?,
            &name,
            &version,
            "/deprecate",
            json!({"message": message, "replacement": replacement}),
        ),
        Command::Yank {
            name,
            version,
            reason,
            undo,
            server,
        } => {
            if undo {
                step(&server.client()?, &name, &version, "/unyank", json!({}))
            } else {
                step(
                    &server.client()?,
                    &name,
                    &version,
                    "/yank",
                    json!({"reason": reason}),
                )
            }
        }
        Command::Rollback {
            name,
            to,
            digest,
            server,
        } => {
            let v = server.client()?.post_json(
                &format!("/v1/skills/{name}/rollback"),
                &json!({"version": to, "digest": digest}),
            )?;
            println!(
                "{name}: current release is now {} ({})",
                v["version"].as_str().unwrap_or("?"),
                v["digest"].as_str().unwrap_or("?")
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Search {
            query,
            limit,
            server,
        } => search(&server.client()?, query.as_deref(), limit),
        Command::Show {
            name,
            version,
            tools,
            permissions,
            environment,
            server,
        } => {
            let mut q = vec![];
            for (k, v) in [
                ("version", version),
                ("tools", tools),
                ("permissions", permissions),
                ("environment", environment),
            ] {
                if let Some(v) = v {
                    q.push(format!("{k}={v}"));
                }
            }
            let path = format!("/v1/skills/{name}?{}", q.join("&"));
            let v = server.client()?.get_json(&path)?;
            println!("{}", serde_json::to_string_pretty(&v)?);
            Ok(if v["executable"] == true {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            })
        }
        Command::Lock {
            requirements,
            output,
            server,
        } => {
            let text = std::fs::read_to_string(&requirements)
                .with_context(|| format!("reading {}", requirements.display()))?;
            let reqs = skillctl::parse_requirements(&text)?;
            let lock = skillctl::lock(&server.client()?, &reqs)?;
            std::fs::write(&output, lock.to_toml()?)?;
            for s in &lock.skills {
                println!("{} {} {}", s.name, s.version, s.digest);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Install {
            lockfile,
            dir,
            server,
            ..
        } => {
            let text = std::fs::read_to_string(&lockfile)
                .with_context(|| format!("reading {}", lockfile.display()))?;
            let lock = skillctl::Lockfile::parse(&text)?;
            let report = skillctl::install(&server.client()?, &lock, &dir)?;
            for w in &report.warnings {
                eprintln!("warning: {w}");
            }
            for p in &report.installed {
                println!("installed {}", p.display());
            }
            for p in &report.unchanged {
                println!("unchanged {}", p.display());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn scan(path: &Path, json: bool) -> Result<ExitCode> {
    let report = if path.is_dir() {
        skills_sdk::scan_dir(path)?
    } else {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        skills_sdk::scan_archive_bytes(&bytes, &ArchiveLimits::default())?
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for f in &report.findings {
            println!(
                "{}[{}] {}:{}: {}\n    {}",
                f.severity.as_str(),
                f.rule,
                f.file,
                f.line,
                f.message,
                f.excerpt
            );
        }
        println!(
            "scan: {} ({} finding(s))",
            report.verdict.as_str(),
            report.findings.len()
        );
    }
    Ok(if report.failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn publish(
    path: Option<PathBuf>,
    git: Option<String>,
    rev: Option<String>,
    subdir: Option<PathBuf>,
    set_version: Option<skills_sdk::semver::Version>,
    client: &Client,
) -> Result<ExitCode> {
    let (bytes, origin) = match (path, git) {
        (_, Some(repo)) => {
            let rev = rev.unwrap_or_default();
            let (packed, commit) = skillctl::pack_from_git(&repo, &rev, subdir.as_deref())?;
            (packed.bytes, format!("{repo} @ {commit}"))
        }
        (Some(p), None) if p.is_dir() => {
            let report = skills_sdk::validate_dir(&p, ValidationMode::Strict)?;
            print_report(&report);
            report
                .into_skill()
                .with_context(|| format!("{} is not a valid skill", p.display()))?;
            let packed = skills_sdk::pack_dir(&p, &ArchiveLimits::default())?;
            (packed.bytes, p.display().to_string())
        }
        (Some(p), None) => (
            std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?,
            p.display().to_string(),
        ),
        (None, None) => bail!("give a skill directory, a .skill archive, or --git REPO --rev REV"),
    };
    let v = client.publish(&bytes, set_version.as_ref())?;
    println!(
        "{}@{} {} ({}) from {origin}",
        v["name"].as_str().unwrap_or("?"),
        v["version"].as_str().unwrap_or("?"),
        v["digest"].as_str().unwrap_or("?"),
        v["state"].as_str().unwrap_or("?"),
    );
    Ok(ExitCode::SUCCESS)
}

fn test_local(dir: &Path) -> Result<ExitCode> {
    let report = skillctl::run_local_tests(dir)?;
    print_outcomes(&report);
    println!("{} {} (not recorded)", dir.display(), report.digest);
    Ok(if report.outcomes.iter().all(|o| o.passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn test(client: &Client, name: &str, version: &str) -> Result<ExitCode> {
    let report = skillctl::run_tests(client, name, version)?;
    print_outcomes(&report);
    println!(
        "{name}@{version} {} -> {}{}",
        report.digest,
        report.recorded["state"].as_str().unwrap_or("?"),
        if skillctl::self_reported(&report.recorded) {
            " (self-reported by the author: not evidence for Test)"
        } else {
            ""
        }
    );
    Ok(if report.outcomes.iter().all(|o| o.passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_outcomes(report: &skillctl::TestReport) {
    if !report.sandboxed {
        eprintln!(
            "warning: unshare is unavailable; tests ran without network isolation (best effort)"
        );
    }
    for o in &report.outcomes {
        println!(
            "{} {} {}ms {}{}",
            if o.passed { "PASS" } else { "FAIL" },
            o.name,
            o.duration_ms,
            o.log_digest,
            if o.timed_out { " (timed out)" } else { "" }
        );
        if !o.passed {
            eprintln!("--- {} log ---\n{}", o.name, o.log);
        }
    }
}

fn step(
    client: &Client,
    name: &str,
    version: &str,
    tail: &str,
    body: serde_json::Value,
) -> Result<ExitCode> {
    let v = client.post_json(&Client::version_path(name, version, tail), &body)?;
    println!("{name}@{version}: {}", v["state"].as_str().unwrap_or("?"));
    Ok(ExitCode::SUCCESS)
}

/// Prints the impact of replacing the current release, asks (unless `yes`), then promotes.
fn promote(client: &Client, name: &str, version: &str, yes: bool) -> Result<ExitCode> {
    if let Some(impact) = skillctl::promotion_impact(client, name, version)? {
        print!("{}", impact.render());
        if !yes {
            if !std::io::stdin().is_terminal() {
                return Err(
                    skillctl::Error::ConfirmationRequired(format!("{name}@{version}")).into(),
                );
            }
            print!("promote {name}@{version} over {}? [y/N] ", impact.current);
            std::io::stdout().flush()?;
            let mut answer = String::new();
            std::io::stdin().read_line(&mut answer)?;
            if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
                println!("{name}@{version}: not promoted");
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    step(client, name, version, "/promote", json!({}))
}

fn search(client: &Client, q: Option<&str>, limit: usize) -> Result<ExitCode> {
    let mut path = format!("/v1/skills?limit={limit}");
    if let Some(q) = q {
        path.push_str("&q=");
        path.push_str(&q.replace(' ', "+"));
    }
    let v = client.get_json(&path)?;
    for s in v["skills"].as_array().into_iter().flatten() {
        println!(
            "{} {} [{} tokens]{}\n    {}",
            s["name"].as_str().unwrap_or(""),
            s["version"].as_str().unwrap_or(""),
            s["tokens"],
            if s["deprecated"] == true {
                " (deprecated)"
            } else {
                ""
            },
            s["description"].as_str().unwrap_or("")
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn init(name: &str, parent: &Path, owner: Option<String>) -> Result<ExitCode> {
    let owner = owner
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "unknown".to_owned());
    let dir = skills_sdk::init_skill(parent, name, &owner).map_err(|e| match e {
        skills_sdk::SdkError::Invalid(diags) => {
            let lines: Vec<_> = diags.iter().map(ToString::to_string).collect();
            anyhow::anyhow!("invalid skill name {name:?}:\n{}", lines.join("\n"))
        }
        e => e.into(),
    })?;
    println!("created {}", dir.display());
    Ok(ExitCode::SUCCESS)
}

fn print_report(report: &Report) {
    for d in &report.diagnostics {
        eprintln!("{d}");
    }
}

fn validate(dir: &Path, mode: ValidationMode, json: bool) -> Result<ExitCode> {
    let report = skills_sdk::validate_dir(dir, mode)?;
    if json {
        let out = serde_json::json!({
            "path": dir,
            "mode": mode,
            "valid": report.is_valid(),
            "diagnostics": report.diagnostics,
            "skill": report.skill,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_report(&report);
        match &report.skill {
            Some(skill) if report.is_valid() => {
                println!("valid: {} ({})", dir.display(), skill.name())
            }
            _ => println!(
                "invalid: {} ({} error(s))",
                dir.display(),
                report.errors().count()
            ),
        }
    }
    Ok(if report.is_valid() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn pack(
    dir: &Path,
    output: Option<PathBuf>,
    set_version: Option<skills_sdk::semver::Version>,
    mode: ValidationMode,
) -> Result<ExitCode> {
    let report = skills_sdk::validate_dir(dir, mode)?;
    print_report(&report);
    let skill = report
        .into_skill()
        .with_context(|| format!("{} is not a valid skill", dir.display()))?;
    let version = match (skill.version(), set_version) {
        (Some(v), Some(s)) if v != s => {
            bail!("--set-version {s} disagrees with the skill's own version {v}")
        }
        (Some(v), _) | (None, Some(v)) => v,
        (None, None) => bail!(
            "{} has no version: add skill.toml with `version = \"x.y.z\"` or pass --set-version",
            dir.display()
        ),
    };
    let packed = skills_sdk::pack_dir(dir, &ArchiveLimits::default())?;
    let output = output.unwrap_or_else(|| {
        PathBuf::from(format!(
            "{}-{version}.{}",
            skill.name(),
            skills_sdk::archive::ARCHIVE_EXTENSION
        ))
    });
    // Write beside the target, then rename, so a reader never sees a half-written archive.
    let tmp = output.with_extension("skill.partial");
    std::fs::write(&tmp, &packed.bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &output).with_context(|| format!("writing {}", output.display()))?;
    println!("{}", output.display());
    println!("{}", packed.digest);
    Ok(ExitCode::SUCCESS)
}
