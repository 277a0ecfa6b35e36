//! Skills benchmark: discovery latency with N published skills (default 10,000), publish
//! latency for a 1 MB skill, and tokens per discovery entry. Prints figures; asserts nothing.
//!
//! `cargo run --release -p registry-bench --bin skills-bench -- [N]`
//!
//! Setup goes through the service layer (`registry_skills`), not HTTP: publish, test
//! results, review and promote for every skill (each promote indexes its release), and one
//! `reindex` at the end, timed. Discovery is measured at the service layer too (BM25 + one SQLite
//! lookup by id), single-threaded, over 1,000 queries.

use std::time::{Duration, Instant};

use registry_core::principal::{Principal, Role};
use registry_server::config::Config;
use registry_server::state::AppState;
use registry_skills::{Decision, ReviewRequest, TestWaiverRequest};
use skills_sdk::ArchiveLimits;

const WORDS: &[&str] = &[
    "invoice",
    "ledger",
    "pdf",
    "spreadsheet",
    "email",
    "calendar",
    "deploy",
    "kubernetes",
    "review",
    "pull",
    "request",
    "changelog",
    "translate",
    "summarize",
    "meeting",
    "notes",
    "contract",
    "compliance",
    "audit",
    "tax",
    "payroll",
    "onboarding",
    "incident",
    "postmortem",
    "database",
    "migration",
    "schema",
    "query",
    "dashboard",
    "chart",
    "report",
    "forecast",
    "budget",
    "expense",
    "receipt",
    "travel",
    "booking",
    "support",
    "ticket",
    "triage",
    "slack",
    "github",
    "linear",
    "notion",
    "figma",
    "design",
    "brand",
    "style",
    "copy",
    "blog",
    "seo",
    "marketing",
    "campaign",
    "survey",
    "interview",
    "hiring",
    "resume",
    "legal",
    "privacy",
    "security",
    "scan",
    "vulnerability",
    "patch",
    "release",
    "test",
    "coverage",
    "benchmark",
    "profile",
    "latency",
    "cache",
    "search",
    "index",
    "embedding",
    "vector",
    "prompt",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn word(&mut self) -> &'static str {
        WORDS[(self.next() % WORDS.len() as u64) as usize]
    }
    fn words(&mut self, n: usize) -> String {
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn write_skill(dir: &std::path::Path, name: &str, desc: &str, extra: Option<&[u8]>) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {desc}\n---\n# {name}\n\nFollow the steps.\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("skill.toml"),
        "owner = \"bench\"\nversion = \"1.0.0\"\n[requires]\ntools = [\"bash\", \"read\"]\n",
    )
    .unwrap();
    if let Some(bytes) = extra {
        std::fs::create_dir_all(dir.join("assets")).unwrap();
        std::fs::write(dir.join("assets/data.bin"), bytes).unwrap();
    }
}

fn release(state: &AppState, ann: &Principal, rita: &Principal, bytes: &[u8]) -> Duration {
    let t = Instant::now();
    let out = state
        .services
        .skills
        .publish(ann, bytes, None)
        .expect("publish");
    let publish = t.elapsed();
    let (name, version) = (
        out.version.body.name.clone(),
        out.version.body.version.clone(),
    );
    state
        .services
        .skills
        .record_waiver(
            rita,
            &name,
            &version,
            TestWaiverRequest {
                reason: "bench: the generated skills declare no test".into(),
            },
        )
        .expect("waiver");
    state
        .services
        .skills
        .review(
            rita,
            &name,
            &version,
            ReviewRequest {
                decision: Decision::Approve,
                comment: "bench".into(),
            },
        )
        .expect("review");
    state
        .services
        .skills
        .promote(ann, &name, &version)
        .expect("promote");
    publish
}

/// Discovery latency with N published skills, publish latency for a 1 MB skill, and tokens
/// per discovery entry. Prints figures; asserts nothing.
#[derive(clap::Parser)]
struct Options {
    /// Skills published before discovery is measured.
    #[arg(default_value_t = 10_000)]
    n: usize,
}

fn main() {
    let Options { n } = clap::Parser::parse();
    let tmp = tempfile_dir();
    let config = Config {
        data_dir: tmp.join("data"),
        ..Config::default()
    };
    let state = AppState::open(config).expect("open state");
    let mut ann = Principal::new("acme", "ann");
    ann.roles = vec![Role::Writer];
    let mut rita = Principal::new("acme", "rita");
    rita.roles = vec![Role::Reviewer];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

    println!("skills-bench: {n} skills, data in {}", tmp.display());
    let setup = Instant::now();
    let src = tmp.join("src");
    for i in 0..n {
        let name = format!("{}-{}-{i}", rng.word(), rng.word());
        let desc = format!(
            "{} for {} teams. Use when the user asks to {} the {}.",
            capitalise(&rng.words(8)),
            rng.word(),
            rng.words(3),
            rng.words(4)
        );
        let dir = src.join(&name);
        write_skill(&dir, &name, &desc, None);
        let packed = skills_sdk::pack_dir(&dir, &ArchiveLimits::default()).unwrap();
        release(&state, &ann, &rita, &packed.bytes);
        std::fs::remove_dir_all(&dir).ok();
        if (i + 1) % 1000 == 0 {
            println!(
                "  {} published ({:.1}s)",
                i + 1,
                setup.elapsed().as_secs_f64()
            );
        }
    }
    let t = Instant::now();
    let indexed = state.services.skills.reindex().expect("reindex");
    println!(
        "setup: {n} skills through publish/test/review/promote in {:.1}s; reindex of {indexed} entries {:.1}s",
        setup.elapsed().as_secs_f64(),
        t.elapsed().as_secs_f64()
    );

    // Discovery latency.
    let mut reader = Principal::new("acme", "reader");
    reader.roles = vec![Role::Reader];
    for _ in 0..50 {
        state
            .services
            .skills
            .discover(&reader, Some(&rng.words(2)), 10)
            .unwrap();
    }
    let mut lat = vec![];
    let mut tokens = vec![];
    for _ in 0..1000 {
        let q = rng.words(2);
        let t = Instant::now();
        let hits = state
            .services
            .skills
            .discover(&reader, Some(&q), 10)
            .unwrap();
        lat.push(t.elapsed());
        tokens.extend(hits.iter().map(|h| h.tokens));
    }
    lat.sort();
    println!(
        "discover (q = 2 words, top 10, service layer): p50 {} p95 {} p99 {} max {}",
        ms(pct(&lat, 0.50)),
        ms(pct(&lat, 0.95)),
        ms(pct(&lat, 0.99)),
        ms(*lat.last().unwrap())
    );
    tokens.sort();
    println!(
        "tokens per discover entry (WordPiece, all-MiniLM-L6-v2): mean {:.1} p50 {} p95 {} max {} (over {} returned entries)",
        tokens.iter().sum::<usize>() as f64 / tokens.len().max(1) as f64,
        tokens[tokens.len() / 2],
        tokens[(tokens.len() * 95 / 100).min(tokens.len() - 1)],
        tokens.last().unwrap(),
        tokens.len()
    );

    // Publish latency for a 1 MB skill (incompressible payload).
    let mut pubs = vec![];
    for i in 0..10 {
        let mut payload = vec![0u8; 1024 * 1024];
        for chunk in payload.chunks_mut(8) {
            let r = rng.next().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
        let name = format!("big-skill-{i}");
        let dir = src.join(&name);
        write_skill(
            &dir,
            &name,
            "A one-megabyte skill. Use when benchmarking.",
            Some(&payload),
        );
        let packed = skills_sdk::pack_dir(&dir, &ArchiveLimits::default()).unwrap();
        let t = Instant::now();
        state
            .services
            .skills
            .publish(&ann, &packed.bytes, None)
            .unwrap();
        pubs.push(t.elapsed());
        if i == 0 {
            println!("1 MB skill: archive {} bytes", packed.bytes.len());
        }
    }
    pubs.sort();
    println!(
        "publish 1 MB skill (validate + blob + token count + commit, service layer, 10 runs): p50 {} max {}",
        ms(pct(&pubs, 0.5)),
        ms(*pubs.last().unwrap())
    );
    std::fs::remove_dir_all(&tmp).ok();
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

fn tempfile_dir() -> std::path::PathBuf {
    let base = std::env::var_os("SKILLS_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("skills-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
