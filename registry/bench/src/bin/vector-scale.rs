//! Vector index at scale. Prints figures; asserts nothing.
//!
//! ```text
//! cargo run --release -p registry-bench --bin vector-scale -- [options]   (--help lists them)
//! ```
//!
//! Random unit vectors over several tenants through the `VectorIndex` trait, then latency of
//! searches restricted to one tenant by its filter, and resident memory.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use registry_core::asset::AssetKind;
use registry_core::retrieval::{IndexKeys, VectorEntry, VectorIndex, VisibilityFilter};
use registry_vector_index::EmbeddedVectorIndex;

/// Random unit vectors over several tenants through the `VectorIndex` trait, then the latency
/// of searches restricted to one tenant by its filter, and resident memory. Prints figures;
/// asserts nothing.
#[derive(clap::Parser)]
struct Options {
    /// Vectors in all.
    #[arg(long, default_value_t = 1_000_000)]
    vectors: usize,
    /// Tenants they are spread over.
    #[arg(long, default_value_t = 10)]
    tenants: usize,
    /// Dimensions.
    #[arg(long, default_value_t = 384)]
    dim: usize,
    /// Searches, each restricted to one tenant.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Hits per search.
    #[arg(long, default_value_t = 10)]
    k: usize,
    /// Vectors per write.
    #[arg(long, default_value_t = 10_000)]
    batch: usize,
    /// Keep the index here (default: a temporary directory, removed at the end).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seed of the random vectors.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Skip reopening the index at the end.
    #[arg(long)]
    no_reopen: bool,
}

fn main() -> ExitCode {
    match scale(&clap::Parser::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A `/proc/self/status` field in MiB (Linux), e.g. `VmRSS`, `VmHWM`.
fn proc_status_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn memory_line(label: &str) {
    let show = |v: Option<f64>| v.map_or("n/a".to_string(), |m| format!("{m:.0} MiB"));
    println!(
        "{label}: VmRSS {}, VmHWM (peak) {}",
        show(proc_status_mib("VmRSS")),
        show(proc_status_mib("VmHWM"))
    );
}

fn random_unit(rng: &mut StdRng, dim: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..dim).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn tenant_scope(t: usize) -> String {
    format!("t:tenant{t:02}")
}

fn dir_size(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn run_queries(
    ix: &dyn VectorIndex,
    queries: &[Vec<f32>],
    filter: &VisibilityFilter,
    k: usize,
) -> Result<Vec<Duration>, String> {
    let mut times = Vec::with_capacity(queries.len());
    for q in queries {
        let t = Instant::now();
        let hits = ix.search(q, filter, k).map_err(|e| e.to_string())?;
        times.push(t.elapsed());
        if hits.len() != k {
            return Err(format!("expected {k} hits, got {}", hits.len()));
        }
    }
    times.sort();
    Ok(times)
}

/// Share of the exact top `k` (by f32 dot product over `rows`) that the index returns.
fn recall(
    ix: &dyn VectorIndex,
    queries: &[Vec<f32>],
    filter: &VisibilityFilter,
    rows: &[(String, Vec<f32>)],
    k: usize,
) -> Result<f64, String> {
    let mut found = 0usize;
    for q in queries {
        let mut exact: Vec<(f32, &str)> = rows
            .iter()
            .map(|(id, v)| {
                (
                    v.iter().zip(q).map(|(a, b)| a * b).sum::<f32>(),
                    id.as_str(),
                )
            })
            .collect();
        exact.sort_by(|a, b| b.0.total_cmp(&a.0));
        let want: std::collections::HashSet<&str> = exact.iter().take(k).map(|e| e.1).collect();
        let hits = ix.search(q, filter, k).map_err(|e| e.to_string())?;
        found += hits
            .iter()
            .filter(|h| want.contains(h.asset_id.as_str()))
            .count();
    }
    Ok(found as f64 / (queries.len() * k) as f64)
}

fn report(label: &str, times: &[Duration]) {
    println!(
        "{label}: {} queries, p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms",
        times.len(),
        ms(percentile(times, 0.50)),
        ms(percentile(times, 0.95)),
        ms(*times.last().expect("at least one query"))
    );
}

fn scale(args: &Options) -> Result<(), String> {
    let (n, tenants, dim, nq, k, batch, seed) = (
        args.vectors,
        args.tenants,
        args.dim,
        args.queries,
        args.k,
        args.batch,
        args.seed,
    );
    if tenants == 0 || n < tenants || batch == 0 || nq == 0 || k == 0 {
        return Err("need vectors >= tenants >= 1, batch >= 1, queries >= 1, k >= 1".into());
    }
    let tmp;
    let dir = match args.dir.clone() {
        Some(d) => d,
        None => {
            tmp = tempdir()?;
            tmp.clone()
        }
    };
    println!(
        "scale: {n} vectors, dim {dim}, {tenants} tenants ({} each), k {k}, batch {batch}, dir {}",
        n / tenants,
        dir.display()
    );
    memory_line("start");

    let ix = EmbeddedVectorIndex::open(&dir, dim).map_err(|e| e.to_string())?;
    let mut rng = StdRng::seed_from_u64(seed);
    let per_tenant = n / tenants;
    let started = Instant::now();
    let mut written = 0usize;
    // The searched tenant's vectors, for the exact answers that recall is measured against.
    let mut target: Vec<(String, Vec<f32>)> = vec![];
    for t in 0..tenants {
        let scope = tenant_scope(t);
        let mut i = 0;
        while i < per_tenant {
            let m = batch.min(per_tenant - i);
            let entries: Vec<VectorEntry> = (i..i + m)
                .map(|j| VectorEntry {
                    keys: IndexKeys {
                        asset_id: format!("{scope}/{j:07}"),
                        kind: AssetKind::Chunk,
                        scope_key: scope.clone(),
                        acl_keys: vec!["public".into()],
                        tags: vec![],
                    },
                    vector: random_unit(&mut rng, dim),
                    model: "bench-random@0".into(),
                })
                .collect();
            ix.upsert(&entries).map_err(|e| e.to_string())?;
            if t == tenants / 2 {
                target.extend(entries.into_iter().map(|e| (e.keys.asset_id, e.vector)));
            }
            i += m;
            written += m;
        }
        println!(
            "  tenant {t}: {written} written, {:.1} s elapsed",
            started.elapsed().as_secs_f64()
        );
    }
    let insert = started.elapsed();
    println!(
        "insert: {written} vectors in {:.1} s ({:.0} vectors/s), store {:.0} MiB on disk",
        insert.as_secs_f64(),
        written as f64 / insert.as_secs_f64(),
        dir_size(&dir) as f64 / (1024.0 * 1024.0)
    );
    memory_line("after insert");

    let queries: Vec<Vec<f32>> = (0..nq).map(|_| random_unit(&mut rng, dim)).collect();
    let one = VisibilityFilter {
        scope_keys: vec![tenant_scope(tenants / 2)],
        acl_keys: vec!["public".into()],
        kinds: vec![],
        any_tags: vec![],
        ..Default::default()
    };
    // Warm-up pass so the figures are not dominated by first-touch page faults.
    run_queries(&ix, &queries[..nq.min(10)], &one, k)?;
    report(
        "search, one tenant's filter",
        &run_queries(&ix, &queries, &one, k)?,
    );
    println!(
        "recall@{k} against an exact scan of the tenant's vectors: {:.4} (over {} queries)",
        recall(&ix, &queries[..nq.min(50)], &one, &target, k)?,
        nq.min(50)
    );
    let all = VisibilityFilter {
        scope_keys: (0..tenants).map(tenant_scope).collect(),
        ..one.clone()
    };
    let nq_all = nq.min(50);
    report(
        "search, all tenants (reference: full scan)",
        &run_queries(&ix, &queries[..nq_all], &all, k)?,
    );
    memory_line("after search");

    if !args.no_reopen {
        drop(ix);
        let t = Instant::now();
        let ix = EmbeddedVectorIndex::open(&dir, dim).map_err(|e| e.to_string())?;
        println!(
            "reopen: loaded {} vectors in {:.1} s",
            ix.len().map_err(|e| e.to_string())?,
            t.elapsed().as_secs_f64()
        );
        memory_line("after reopen (allocator may keep freed pages of the first instance)");
        report(
            "search after reopen, one tenant's filter",
            &run_queries(&ix, &queries, &one, k)?,
        );
    }
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

fn tempdir() -> Result<PathBuf, String> {
    let base = std::env::temp_dir().join(format!("registry-bench-{}", std::process::id()));
    std::fs::create_dir_all(&base).map_err(|e| e.to_string())?;
    Ok(base)
}
