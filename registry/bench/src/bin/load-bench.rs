//! Load benchmark: concurrent clients against one registry over HTTP, a mix of memory searches
//! and writes, as several agents of one team would send them. Prints figures; asserts nothing.
//!
//! `load-bench [--memories N] [--clients LIST] [--seconds S] [--write-share F]`
//! (defaults 300, `1,4,16`, 10, 0.2).
//!
//! Serves the registry in-process on a loopback port over a fresh directory under the system's
//! temporary directory, removed at the end (the embedded default, jobs off), writes `N`
//! distinct facts through the gate (an id, a place and a worker each), then, for each client count in `LIST`, runs that many client threads for `S`
//! seconds. Each request is a write of a new fact with probability `F` and otherwise a search
//! for one of the facts written (k 5), on a fresh connection, as `cluster-bench` sends them.
//! Reports per client count the requests per second, their p50/p95 latency, errors, and the
//! throughput and p95 against one client's.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;
use rand::{Rng, SeedableRng};
use registry_bench::{pct, search_memories, start_server, write_memory, writer_key};
use registry_server::config::Config;

/// Concurrent clients against one registry over HTTP, a mix of memory searches and writes.
/// Prints figures; asserts nothing.
#[derive(clap::Parser)]
struct Options {
    /// Distinct facts written before the rounds.
    #[arg(long, default_value_t = 300)]
    memories: usize,
    /// Client counts, one round each.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 4, 16])]
    clients: Vec<usize>,
    /// Seconds per round.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Share of requests that are writes (0..1).
    #[arg(long, default_value_t = 0.2)]
    write_share: f64,
}

fn parse_args() -> anyhow::Result<Options> {
    let o: Options = clap::Parser::parse();
    if o.clients.is_empty() || o.clients.contains(&0) || o.memories == 0 {
        bail!("--clients needs counts above 0 and --memories at least 1");
    }
    if !(0.0..=1.0).contains(&o.write_share) {
        bail!("--write-share is a fraction within 0..1");
    }
    Ok(o)
}

/// The `i`th fact and its question: the same for a given `i` in every round and client.
fn fact(i: usize) -> (String, String) {
    registry_bench::fact(&mut rand::rngs::StdRng::seed_from_u64(i as u64), i)
}

fn write(addr: SocketAddr, key: &str, text: &str) -> anyhow::Result<()> {
    write_memory(addr, key, text).map(drop)
}

fn search(addr: SocketAddr, key: &str, query: &str) -> anyhow::Result<()> {
    search_memories(addr, key, query).map(drop)
}

struct Round {
    clients: usize,
    requests: usize,
    errors: usize,
    per_second: f64,
    p50: f64,
    p95: f64,
}

fn round(addr: SocketAddr, key: &str, clients: usize, o: &Options, next: &AtomicUsize) -> Round {
    let latencies = Mutex::new(Vec::<f64>::new());
    let errors = AtomicUsize::new(0);
    let start = Instant::now();
    let until = start + Duration::from_secs(o.seconds);
    std::thread::scope(|s| {
        for c in 0..clients {
            let (latencies, errors) = (&latencies, &errors);
            s.spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(1_000 + c as u64);
                let mut mine = vec![];
                while Instant::now() < until {
                    let t = Instant::now();
                    let outcome = if rng.random_bool(o.write_share) {
                        write(addr, key, &fact(next.fetch_add(1, Ordering::SeqCst)).0)
                    } else {
                        let i = rng.random_range(0..o.memories);
                        search(addr, key, &fact(i).1)
                    };
                    mine.push(t.elapsed().as_secs_f64() * 1e3);
                    if let Err(e) = outcome
                        && errors.fetch_add(1, Ordering::SeqCst) < 3
                    {
                        eprintln!("load-bench: {e:#}");
                    }
                }
                latencies.lock().expect("latencies").extend(mine);
            });
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    let mut l = latencies.into_inner().expect("latencies");
    Round {
        clients,
        requests: l.len(),
        errors: errors.into_inner(),
        per_second: l.len() as f64 / elapsed,
        p50: pct(&mut l, 0.50),
        p95: pct(&mut l, 0.95),
    }
}

fn main() -> anyhow::Result<()> {
    let o = parse_args()?;
    let dir = std::env::temp_dir().join(format!("load-bench-{}", std::process::id()));
    let mut config = Config {
        data_dir: dir.join("data"),
        ..Config::default()
    };
    config.jobs.enabled = false;
    let (state, addr) = start_server(config)?;
    let key = writer_key(&state)?;
    let t = Instant::now();
    for i in 0..o.memories {
        write(addr, &key, &fact(i).0)?;
    }
    println!(
        "load-bench: {} memories written in {:.1} s; {:.0}% writes, {} s per round, {} cores",
        o.memories,
        t.elapsed().as_secs_f64(),
        o.write_share * 100.0,
        o.seconds,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let next = AtomicUsize::new(o.memories);
    let mut first: Option<(f64, f64)> = None;
    for &c in &o.clients {
        let r = round(addr, &key, c, &o, &next);
        let (base_rps, base_p95) = *first.get_or_insert((r.per_second, r.p95));
        println!(
            "clients {:>3}  requests {:>6}  {:>7.1} req/s ({:.2}x)  p50 {:>7.1} ms  p95 {:>7.1} ms ({:.2}x)  errors {}",
            r.clients,
            r.requests,
            r.per_second,
            r.per_second / base_rps,
            r.p50,
            r.p95,
            r.p95 / base_p95,
            r.errors
        );
    }
    drop(state);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
