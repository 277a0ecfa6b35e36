//! `skillctl`: the skill author's and release manager's command line.
//!
//! Offline commands (`init`, `validate`, `pack`) use only `skills-sdk`; the server commands
//! (`publish`, `test`, `review`, …) talk to a registry and are added in the marked places.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
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
    // --- Server commands go here (lead): Publish, Test, Review, Promote, Deprecate, Yank,
    // --- Rollback, Search, Show, Lock, Install. Dispatch them in `run` below.
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
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Init { name, dir, owner } => init(&name, &dir, owner),
        Command::Validate { dir, mode, json } => validate(&dir, mode.mode(), json),
        Command::Pack {
            dir,
            output,
            set_version,
            mode,
        } => pack(&dir, output, set_version, mode.mode()),
        // Server commands: dispatch here.
    }
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
