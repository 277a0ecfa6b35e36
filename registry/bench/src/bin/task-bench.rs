//! Working-layer benchmark (issue 33): one task holding `--events` events (default 100,000),
//! then (a) single-event appends to it, (b) `read_range` on a 5 MB artifact by bytes and by
//! lines, (c) Continuation Package assembly at budgets 2,000 and 8,000 tokens — each timed
//! through `TaskService` as the HTTP handlers call it (no HTTP). Prints p50 / p95 per
//! operation; asserts nothing.
//!
//! ```text
//! cargo run --release -p registry-bench --bin task-bench -- \
//!     [--events 100000] [--samples 500] [--data-dir DIR]
//! ```
//!
//! The log is filled in appends of 100 events (every tenth a decision, open item or approval,
//! every twentieth a tool result naming the artifact), so the continuation has every section
//! to draw from; a compaction summary covers the first half.

use std::time::Instant;

use registry_bench::pct;
use registry_core::principal::{Principal, Role};
use registry_server::config::Config;
use registry_server::state::AppState;
use registry_tasks::{
    AppendEvents, ContinuationRequest, CreateTask, EventInput, RangeRequest, SummaryRequest,
};

/// The working layer at scale: appends to a long task, artifact range reads and Continuation
/// Package assembly, timed through the tasks service. Prints figures; asserts nothing.
#[derive(clap::Parser)]
struct Options {
    /// Events in the task before the timed operations.
    #[arg(long, default_value_t = 100_000)]
    events: usize,
    /// Timed samples per operation (continuations: at most 200).
    #[arg(long, default_value_t = 500)]
    samples: usize,
    /// Keep the store in this directory (default: a temporary one, removed at the end).
    #[arg(long)]
    data_dir: Option<std::path::PathBuf>,
}

fn event(i: usize, artifact: Option<&str>) -> EventInput {
    let (kind, content) = match i % 10 {
        3 => (
            "decision",
            format!("Decision {i}: retry the flaky step with backoff."),
        ),
        5 => (
            "open_item",
            format!("Open {i}: the cache layer times out under load."),
        ),
        7 => (
            "approval",
            format!("Approved {i}: the schema change may ship."),
        ),
        _ => (
            "note",
            format!("Note {i}: inspected module part_{i}.rs; nothing unusual in its call sites."),
        ),
    };
    let (kind, artifact) = match artifact {
        Some(a) if i % 20 == 19 => ("tool_result", Some(a.to_string())),
        _ => (kind, None),
    };
    serde_json::from_value(serde_json::json!({
        "id": format!("ev-{i}"), "type": kind, "actor": "agent", "content": content,
        "artifact": artifact,
    }))
    .expect("a valid event")
}

fn report(name: &str, ms: &mut [f64]) {
    let n = ms.len();
    let p50 = pct(ms, 0.5);
    let p95 = pct(ms, 0.95);
    let max = pct(ms, 1.0);
    println!("{name}: n {n}, p50 {p50:.2} ms, p95 {p95:.2} ms, max {max:.2} ms");
}

fn main() -> anyhow::Result<()> {
    let Options {
        events,
        samples,
        data_dir,
    } = clap::Parser::parse();
    let keep = data_dir.is_some();
    let tmp = std::env::temp_dir().join(format!("task-bench-{}", std::process::id()));
    let dir = data_dir.unwrap_or_else(|| tmp.clone());
    let mut config = Config {
        data_dir: dir.clone(),
        ..Config::default()
    };
    config.jobs.enabled = false;
    let state = AppState::open(config)?;
    let tasks = &state.services.tasks;
    println!("task-bench: data dir {}", dir.display());
    let mut ann = Principal::new("acme", "ann");
    ann.roles = vec![Role::Writer];

    let task = tasks.create(
        &ann,
        CreateTask {
            goal: "Stabilise the nightly pipeline".into(),
            acceptance: Some("seven green nights in a row".into()),
            project: None,
            session: None,
            sensitivity: None,
        },
    )?;
    // A 5 MB tool output, lines of varying length.
    let mut blob = Vec::with_capacity(5 * 1024 * 1024 + 200);
    let mut i = 0usize;
    while blob.len() < 5 * 1024 * 1024 {
        let pad = "~".repeat(i * 7919 % 113);
        blob.extend_from_slice(format!("{i:07} step {} ok {pad}\n", i % 997).as_bytes());
        i += 1;
    }
    let lines = i as u64;
    let art = tasks.put_artifact(
        &ann,
        &task.id,
        "pipeline.log",
        Some("text/plain"),
        None,
        &blob,
    )?;

    let t = Instant::now();
    let mut batch_ms = vec![];
    for start in (0..events).step_by(100) {
        let batch: Vec<EventInput> = (start..(start + 100).min(events))
            .map(|i| event(i, Some(&art.id)))
            .collect();
        let t1 = Instant::now();
        tasks.append(&ann, &task.id, AppendEvents { events: batch })?;
        batch_ms.push(t1.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "filled {events} events in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    report("append of 100 events (while filling)", &mut batch_ms);
    if events >= 2 {
        tasks.summarize(
            &ann,
            &task.id,
            SummaryRequest {
                from_seq: 1,
                to_seq: (events / 2) as u64,
                content: "Summary: the first half found the cache layer and the flaky step.".into(),
            },
        )?;
    }

    let mut ms = vec![];
    for k in 0..samples {
        let e = event(events + k, None);
        let t1 = Instant::now();
        tasks.append(&ann, &task.id, AppendEvents { events: vec![e] })?;
        ms.push(t1.elapsed().as_secs_f64() * 1e3);
    }
    report(&format!("append of 1 event at {events}+"), &mut ms);

    let mut rng_state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        rng_state % n.max(1)
    };
    let size = blob.len() as u64;
    let mut by_bytes = vec![];
    let mut by_lines = vec![];
    for _ in 0..samples {
        let offset = next(size);
        let r = RangeRequest {
            offset: Some(offset),
            length: Some(4096),
            ..Default::default()
        };
        let t1 = Instant::now();
        tasks.read_range(&ann, &art.id, &r)?;
        by_bytes.push(t1.elapsed().as_secs_f64() * 1e3);
        let r = RangeRequest {
            line: Some(1 + next(lines)),
            lines: Some(50),
            ..Default::default()
        };
        let t1 = Instant::now();
        tasks.read_range(&ann, &art.id, &r)?;
        by_lines.push(t1.elapsed().as_secs_f64() * 1e3);
    }
    report("read_range 4 KiB by bytes (5 MB artifact)", &mut by_bytes);
    report("read_range 50 lines by line (5 MB artifact)", &mut by_lines);

    for budget in [2_000, 8_000] {
        let mut ms = vec![];
        let mut used = 0;
        for _ in 0..samples.min(200) {
            let t1 = Instant::now();
            let c = tasks.continuation(
                &ann,
                &task.id,
                &ContinuationRequest {
                    budget,
                    checkpoint: None,
                },
            )?;
            ms.push(t1.elapsed().as_secs_f64() * 1e3);
            used = c.used_tokens;
        }
        report(
            &format!("continuation at {events} events, budget {budget} (used {used})"),
            &mut ms,
        );
    }
    if !keep {
        drop(state);
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Ok(())
}
