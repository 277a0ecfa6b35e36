//! The bench binaries (`src/bin/*`) and what they share: a registry served in-process on a
//! loopback port, plain HTTP/1.1 requests to it as a harness would make them, percentiles and
//! the shared data's BEIR sets. Tools, not the registry: the server crate knows nothing of them.
//! Every bench takes its flags through clap (`--help` prints its usage), prints figures and
//! asserts nothing.

/// The allocator the `registry` binary runs with, so that the figures are the server's:
/// mimalloc (a search decodes and drops a few hundred records, and glibc's allocator spent
/// about 7% of memory-bench's CPU in its free lists).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

use registry_server::config::Config;
use registry_server::state::AppState;

/// One HTTP/1.1 request on a fresh connection; returns the status and the JSON body.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    key: &str,
    body: &Value,
) -> anyhow::Result<(u16, Value)> {
    let payload = serde_json::to_vec(body)?;
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        payload.len()
    )?;
    s.write_all(&payload)?;
    let mut raw = vec![];
    s.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of headers")?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut body = raw[split + 4..].to_vec();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .context("no status")?
        .parse()?;
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body)?;
    }
    let v = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).with_context(|| format!("{status}: body is not JSON"))?
    };
    Ok((status, v))
}

fn dechunk(mut b: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = vec![];
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("bad chunk")?;
        let size = usize::from_str_radix(std::str::from_utf8(&b[..eol])?.trim(), 16)?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// Opens `config`'s registry and serves it on a free loopback port from a thread of its own.
pub fn start_server(config: Config) -> anyhow::Result<(AppState, SocketAddr)> {
    let state = AppState::open(config)?;
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let st = state.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).expect("listener");
            registry_server::serve_until(st, listener, std::future::pending())
                .await
                .expect("serve");
        });
    });
    Ok((state, addr))
}

/// Writes `text` as an episodic memory of the key's user (`POST /v1/memories`); the answer's
/// body, or an error naming the status when the write was not taken.
pub fn write_memory(addr: SocketAddr, key: &str, text: &str) -> anyhow::Result<Value> {
    let (s, v) = http(
        addr,
        "POST",
        "/v1/memories",
        key,
        &serde_json::json!({"class": "episodic", "content": text}),
    )?;
    if !(s == 200 || s == 201) {
        anyhow::bail!("write answered {s}: {v}");
    }
    Ok(v)
}

/// Asks `POST /v1/memories/search` for the best 5; the answer's body, or an error naming the
/// status.
pub fn search_memories(addr: SocketAddr, key: &str, query: &str) -> anyhow::Result<Value> {
    let (s, v) = http(
        addr,
        "POST",
        "/v1/memories/search",
        key,
        &serde_json::json!({"query": query, "k": 5}),
    )?;
    if s != 200 {
        anyhow::bail!("search answered {s}: {v}");
    }
    Ok(v)
}

/// The `p` quantile (0–1) of `v`, nearest rank; sorts `v`.
pub fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

const PLACES: &[&str] = &[
    "dock", "gate", "bay", "shelf", "locker", "platform", "hangar", "ramp",
];
const WORKERS: &[&str] = &[
    "Ann", "Bob", "Chen Wei", "Dana", "Emil", "Farah", "Goran", "Hiro",
];

/// The `i`th of a series of distinct facts (a parcel id drawn from `rng`, a place and a
/// worker), and the question that asks for it.
pub fn fact(rng: &mut impl rand::Rng, i: usize) -> (String, String) {
    let id: String = (0..10)
        .map(|_| char::from_digit(rng.random_range(0..16), 16).unwrap_or('0'))
        .collect();
    let place = PLACES[i % PLACES.len()];
    let worker = WORKERS[(i / PLACES.len()) % WORKERS.len()];
    (
        format!(
            "{worker} noted that parcel {id} goes to {place} {} on the {} shift",
            i % 97,
            ["morning", "evening", "night"][i % 3]
        ),
        format!("where does parcel {id} go"),
    )
}

/// A writer key for user `ann` of tenant `bench`, made in `state`'s store: the benches' caller.
pub fn writer_key(state: &AppState) -> anyhow::Result<String> {
    let (_, secret) = registry_server::cli::create_key(
        state.services.backends.store.as_ref(),
        &registry_server::cli::CreateKey {
            tenant: Some("bench".into()),
            user: "ann".into(),
            roles: vec!["writer".into()],
            ..Default::default()
        },
    )?;
    Ok(secret)
}

/// A BEIR-layout set (`corpus.jsonl`, `queries.jsonl`, `qrels/test.tsv`) under the shared data
/// (`REGISTRY_SHARED_DATA`, else `../shared/data` beside the checkout).
pub fn data_root(dataset: &str) -> PathBuf {
    std::env::var_os("REGISTRY_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"))
        .join(dataset)
}

/// Every non-blank line of a JSON Lines file.
pub fn read_jsonl(path: &Path) -> anyhow::Result<Vec<Value>> {
    let body = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    Ok(body
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?)
}
