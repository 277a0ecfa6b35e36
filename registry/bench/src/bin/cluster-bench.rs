//! Scale-out benchmark: memory write and search latency over HTTP on two registry nodes that
//! share one PostgreSQL database, and on two nodes that also share one Qdrant for their
//! vectors, beside the embedded default (SQLite, tantivy, in-process vectors) in the same run,
//! and the lag until a write on one node is found on the other. Prints figures; asserts
//! nothing.
//!
//! `cluster-bench [--database-url URL] [--qdrant-url URL] [--writes N] [--searches N]
//! [--lag-probes N]`
//!
//! The database URL defaults to `$REGISTRY_TEST_PG_URL`, Qdrant's (gRPC) to
//! `$REGISTRY_TEST_QDRANT_URL` (without one, the Qdrant profile is left out);
//! `bash scripts/qdrant-test.sh -- bash scripts/pg-test.sh -- cargo run --release -p
//! registry-bench --bin cluster-bench` runs it on a throw-away cluster and
//! Qdrant.
//! Each node is a registry served in-process on a loopback port with a data directory of its
//! own (its own text and vector indexes, following the change log), both nodes on one fresh
//! schema; the embedded registry gets the same workload. Writes are distinct facts (an id, a
//! dock and a worker each), one user's episodic memories through the full gate with the real
//! embedder; on the cluster they alternate between the nodes, as a load balancer would send
//! them. Searches ask for a written fact by its words, alternating likewise. The lag is measured
//! from the answer to a write on node A to the first search on node B that finds it (polled
//! every 5 ms; the follower polls every `store.follow_interval_ms`, 200 ms by default).

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rand::{Rng, SeedableRng};
use registry_bench::{fact, pct, search_memories, start_server, write_memory, writer_key};
use registry_server::config::Config;
use registry_server::state::AppState;

/// Memory write and search latency over HTTP on two registry nodes sharing one PostgreSQL
/// (and one Qdrant), beside the embedded default, and the lag until a write on one node is
/// found on the other. Prints figures; asserts nothing.
#[derive(clap::Parser)]
struct Options {
    /// PostgreSQL URL.
    #[arg(
        long = "database-url",
        env = "REGISTRY_TEST_PG_URL",
        default_value = ""
    )]
    url: String,
    /// Qdrant's gRPC URL (without one, the Qdrant profile is left out).
    #[arg(
        long = "qdrant-url",
        env = "REGISTRY_TEST_QDRANT_URL",
        default_value = ""
    )]
    qdrant: String,
    /// Writes per profile.
    #[arg(long, default_value_t = 400)]
    writes: usize,
    /// Searches per profile.
    #[arg(long, default_value_t = 400)]
    searches: usize,
    /// Writes on one node timed until the other finds them.
    #[arg(long, default_value_t = 30)]
    lag_probes: usize,
}

fn parse_args() -> anyhow::Result<Options> {
    let o: Options = clap::Parser::parse();
    if o.url.is_empty() {
        bail!(
            "no PostgreSQL: pass --database-url or set REGISTRY_TEST_PG_URL \
             (bash scripts/pg-test.sh -- … starts a throw-away one)"
        );
    }
    Ok(o)
}

struct Node {
    addr: SocketAddr,
    /// Also keeps the node running until the end of the bench.
    state: AppState,
}

fn node(
    dir: &Path,
    store: Option<(&str, &str)>,
    qdrant: Option<(&str, &str)>,
    audit_key: &Path,
) -> anyhow::Result<Node> {
    let mut config = Config {
        data_dir: dir.to_path_buf(),
        audit_key_file: Some(audit_key.to_path_buf()),
        ..Config::default()
    };
    config.jobs.enabled = false;
    if let Some((url, schema)) = store {
        config.store.url = Some(url.into());
        config.store.schema = schema.into();
    }
    if let Some((url, prefix)) = qdrant {
        config.vectors.qdrant_url = Some(url.into());
        config.vectors.qdrant_collection_prefix = prefix.into();
    }
    let (state, addr) = start_server(config)?;
    Ok(Node { addr, state })
}

fn write(addr: SocketAddr, key: &str, text: &str) -> anyhow::Result<String> {
    let v = write_memory(addr, key, text)?;
    if v["decision"] != "accepted" {
        bail!("write was not accepted: {v}");
    }
    Ok(v["id"].as_str().context("id")?.to_string())
}

fn found(addr: SocketAddr, key: &str, query: &str, id: &str) -> anyhow::Result<bool> {
    Ok(search_memories(addr, key, query)?["hits"]
        .as_array()
        .is_some_and(|h| h.iter().any(|h| h["memory"]["id"] == id)))
}

#[derive(Default)]
struct Figures {
    write_ms: Vec<f64>,
    search_ms: Vec<f64>,
    found: usize,
}

/// Writes `o.writes` facts and asks `o.searches` of them, spreading both over `nodes` in turn.
fn workload(nodes: &[&Node], key: &str, o: &Options) -> anyhow::Result<Figures> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut f = Figures::default();
    let mut written = vec![];
    for i in 0..o.writes {
        let (text, query) = fact(&mut rng, i);
        let n = nodes[i % nodes.len()];
        let t = Instant::now();
        let id = write(n.addr, key, &text)?;
        f.write_ms.push(t.elapsed().as_secs_f64() * 1e3);
        written.push((query, id));
    }
    // Let the other node apply the last writes before searching (the lag is measured apart).
    std::thread::sleep(Duration::from_millis(1000));
    for i in 0..o.searches {
        let (query, id) = &written[rng.random_range(0..written.len())];
        let n = nodes[i % nodes.len()];
        let t = Instant::now();
        if found(n.addr, key, query, id)? {
            f.found += 1;
        }
        f.search_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(f)
}

/// Milliseconds from a write's answer on `a` to the first search on `b` that finds it.
fn lags(a: &Node, b: &Node, key: &str, probes: usize) -> anyhow::Result<Vec<f64>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut out = vec![];
    for i in 0..probes {
        let (text, query) = fact(&mut rng, 100_000 + i);
        let id = write(a.addr, key, &text)?;
        let t = Instant::now();
        while !found(b.addr, key, &query, &id)? {
            if t.elapsed() > Duration::from_secs(30) {
                bail!("a write on A was not found on B within 30 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        out.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(out)
}

fn row(name: &str, what: &str, v: &mut [f64]) {
    println!(
        "{name:<28} {what:<7} n {:>5}  p50 {:>7.1} ms  p95 {:>7.1} ms  max {:>7.1} ms",
        v.len(),
        pct(v, 0.5),
        pct(v, 0.95),
        pct(v, 1.0)
    );
}

fn main() -> anyhow::Result<()> {
    let o = parse_args()?;
    let tmp = std::env::temp_dir().join(format!("cluster-bench-{}", std::process::id()));
    let audit_key = tmp.join("audit.key");
    let schema = format!("cluster_bench_{}", std::process::id());
    println!(
        "cluster-bench: {} writes and {} searches per profile, {} lag probes; \
         PostgreSQL schema {schema} (left in the database)",
        o.writes, o.searches, o.lag_probes
    );

    let embedded = node(&tmp.join("embedded"), None, None, &audit_key)?;
    let a = node(
        &tmp.join("node-a"),
        Some((&o.url, &schema)),
        None,
        &audit_key,
    )?;
    let b = node(
        &tmp.join("node-b"),
        Some((&o.url, &schema)),
        None,
        &audit_key,
    )?;

    let ek = writer_key(&embedded.state)?;
    let ck = writer_key(&a.state)?;
    let mut e = workload(&[&embedded], &ek, &o)?;
    let mut c = workload(&[&a, &b], &ck, &o)?;
    let mut lag = lags(&a, &b, &ck, o.lag_probes)?;

    // Two more nodes on a schema of their own, their vectors in one Qdrant collection.
    let mut q = None;
    if o.qdrant.is_empty() {
        println!("no Qdrant (--qdrant-url, REGISTRY_TEST_QDRANT_URL): its profile is left out");
    } else {
        let qschema = format!("{schema}_q");
        let prefix = format!("cluster_bench_{}", std::process::id());
        let qs = Some((o.qdrant.as_str(), prefix.as_str()));
        let qa = node(
            &tmp.join("q-node-a"),
            Some((&o.url, &qschema)),
            qs,
            &audit_key,
        )?;
        let qb = node(
            &tmp.join("q-node-b"),
            Some((&o.url, &qschema)),
            qs,
            &audit_key,
        )?;
        let qk = writer_key(&qa.state)?;
        let f = workload(&[&qa, &qb], &qk, &o)?;
        let l = lags(&qa, &qb, &qk, o.lag_probes)?;
        drop((qa, qb));
        q = Some((f, l));
    }

    println!();
    row("embedded (SQLite)", "write", &mut e.write_ms);
    row("two nodes + PostgreSQL", "write", &mut c.write_ms);
    if let Some((f, _)) = &mut q {
        row("two nodes + PG + Qdrant", "write", &mut f.write_ms);
    }
    row("embedded (SQLite)", "search", &mut e.search_ms);
    row("two nodes + PostgreSQL", "search", &mut c.search_ms);
    if let Some((f, _)) = &mut q {
        row("two nodes + PG + Qdrant", "search", &mut f.search_ms);
    }
    row("A's write found on B", "lag", &mut lag);
    if let Some((_, l)) = &mut q {
        row("… with Qdrant", "lag", l);
    }
    println!(
        "found the asked fact in the top 5: embedded {}/{}, two nodes {}/{}{}",
        e.found,
        o.searches,
        c.found,
        o.searches,
        q.as_ref()
            .map(|(f, _)| format!(", two nodes + Qdrant {}/{}", f.found, o.searches))
            .unwrap_or_default()
    );
    drop((embedded, a, b));
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(())
}
