//! LoCoMo memory-recall benchmark over the HTTP API. Prints figures; asserts nothing.
//!
//! `locomo-bench [--data FILE] [--data-dir DIR] [--search-only] [--embed-model NAME] [--k N]
//! [--misses N] [--weights SETS] [--dump FILE] [--held]`
//!
//! Serves the registry in-process on a loopback port over `DIR` (default: a fresh temporary
//! directory) and talks to it with plain HTTP/1.1 requests, as a harness would. Every turn of
//! every conversation in `FILE` (default `$REGISTRY_SHARED_DATA/locomo-dev/locomo-dev.json`) is
//! written with `POST /v1/memories` as an episodic memory of that conversation's user (one key
//! per conversation): the turn's text (and the caption of a shared photo, which is part of the
//! turn), its speaker, its session's date and label, the entities the bench extracts from the
//! text (capitalised names, see [`entities`]; a harness would bring its own), and the turn's
//! `dia_id` as evidence. Then every question of categories 1–4 is asked with
//! `POST /v1/memories/search` (k 5) and scored by turn recall@5: the fraction of the question's
//! evidence turns among the hits. Category 5 (adversarial, no answer) is left out, as the data
//! set's README says. `--search-only` reuses the turns an earlier run wrote into `DIR`.
//!
//! `--weights "semantic=0.5,lexical=0.2;semantic=0.3"` scores the questions once per set (`;`
//! between sets, each `signal=weight` over the defaults of `registry_memory::search::WEIGHTS`):
//! for tuning the ranking mix on these development conversations only.
//!
//! `--held` prints every turn the gate did not accept: its `dia_id`, decision, reasons and text.
//!
//! `--dump FILE` writes, per question, its 100 best hits with their breakdowns (JSON lines).
//!
//! LoCoMo's categories: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use chrono::{DateTime, NaiveDateTime, Utc};
use registry_bench::{http, pct, start_server};
use registry_memory::search::Breakdown;
use registry_server::cli::{CreateKey, create_key};
use registry_server::config::Config;
use serde_json::{Value, json};

const CATEGORIES: [(u64, &str); 4] = [
    (1, "multi-hop"),
    (2, "temporal"),
    (3, "open-domain"),
    (4, "single-hop"),
];

/// Which turns each memory holds, kept in the data directory for `--search-only`.
const MAP_FILE: &str = "locomo-turns.json";

/// LoCoMo through the memory API: the conversations written through the gate, the questions
/// asked as memory searches; recall@k per category and latency. Prints figures; asserts nothing.
#[derive(clap::Parser)]
struct Options {
    /// The LoCoMo file (default: `locomo-dev/locomo-dev.json` of the shared data).
    #[arg(long, default_value_os_t = default_data())]
    data: PathBuf,
    /// Keep the store here (needed by `--search-only`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Reuse the turns an earlier run wrote into `--data-dir`.
    #[arg(long)]
    search_only: bool,
    /// Embedding model of the registry.
    #[arg(long)]
    embed_model: Option<registry_embed::ModelChoice>,
    /// ONNX Runtime threads per model session (the server's `embed_threads`; default its default).
    #[arg(long)]
    embed_threads: Option<usize>,
    /// Hits per question.
    #[arg(long, default_value_t = 5)]
    k: usize,
    /// Print this many missed questions with their hits.
    #[arg(long, default_value_t = 0)]
    misses: usize,
    /// Score weight sets, `;` between sets (`semantic=0.5,lexical=0.2;semantic=0.3`).
    #[arg(long, value_delimiter = ';')]
    weights: Vec<String>,
    /// Write, per question, its 100 best hits with their breakdowns (JSON lines).
    #[arg(long)]
    dump: Option<PathBuf>,
    /// Print every turn the gate did not accept.
    #[arg(long)]
    held: bool,
}

/// `$REGISTRY_SHARED_DATA/locomo-dev/locomo-dev.json`, or the shared data beside the checkout.
fn default_data() -> PathBuf {
    std::env::var_os("REGISTRY_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data"))
        })
        .join("locomo-dev/locomo-dev.json")
}

/// `1:56 pm on 8 May, 2023` as UTC.
fn session_date(s: &str) -> anyhow::Result<DateTime<Utc>> {
    let t = NaiveDateTime::parse_from_str(&s.to_ascii_uppercase(), "%I:%M %p ON %d %B, %Y")
        .with_context(|| format!("session date {s:?}"))?;
    Ok(t.and_utc())
}

/// Words that start a sentence or are capitalised without naming anything.
const NOT_NAMES: &[&str] = &[
    "I", "I'm", "I've", "I'll", "I'd", "The", "A", "An", "And", "But", "So", "It", "It's", "That",
    "That's", "This", "What", "Wow", "Hey", "Hi", "Thanks", "Thank", "Yes", "Yeah", "No", "Oh",
    "Sure", "Well", "My", "You", "Your", "We", "They", "He", "She", "Good", "Great", "Awesome",
    "Nice", "Cool", "Glad", "Sounds", "Haha", "Bye", "Take", "See", "Let", "Let's",
];

/// Capitalised words (names of people, places, works, events) with the speaker: a stand-in for
/// the entity extraction a harness does before it writes.
fn entities(speaker: &str, text: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![speaker.to_string()];
    for w in text.split(|c: char| {
        c.is_whitespace() || matches!(c, ',' | '.' | '!' | '?' | ';' | ':' | '"' | '(' | ')')
    }) {
        let w = w.trim_matches(|c: char| !c.is_alphanumeric());
        let w = w.strip_suffix("'s").unwrap_or(w);
        if w.chars().count() > 1
            && w.chars().next().is_some_and(char::is_uppercase)
            && !NOT_NAMES.contains(&w)
            && !out.iter().any(|e| e == w)
        {
            out.push(w.to_string());
        }
    }
    out
}

fn evidence_of(q: &Value) -> Vec<String> {
    q["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .flat_map(|e| e.split([';', ' ', ',']))
        .map(str::trim)
        .filter(|e| e.starts_with('D'))
        .map(str::to_string)
        .collect()
}

#[derive(Default)]
struct Tally {
    questions: usize,
    recall: f64,
}

fn main() -> anyhow::Result<()> {
    let o: Options = clap::Parser::parse();
    let convs: Vec<Value> = serde_json::from_slice(
        &std::fs::read(&o.data).with_context(|| format!("reading {}", o.data.display()))?,
    )?;
    let tmp = std::env::temp_dir().join(format!("locomo-bench-{}", std::process::id()));
    let dir = o.data_dir.clone().unwrap_or(tmp);
    let mut config = Config {
        data_dir: dir.clone(),
        ..Config::default()
    };
    config.jobs.enabled = false;
    if let Some(m) = o.embed_model {
        config.embed_model = m;
    }
    if let Some(t) = o.embed_threads {
        config.embed_threads = t;
    }
    println!(
        "locomo-bench: {} conversations from {}, data dir {}, model {}",
        convs.len(),
        o.data.display(),
        dir.display(),
        config.embed_model
    );
    let (state, addr) = start_server(config)?;
    let store = state.services.backends.store.clone();
    let mut keys: HashMap<String, String> = HashMap::new();
    for c in &convs {
        let sample = c["sample_id"].as_str().context("sample_id")?.to_string();
        let (_, secret) = create_key(
            store.as_ref(),
            &CreateKey {
                tenant: Some("locomo".into()),
                user: sample.clone(),
                roles: vec!["writer".into()],
                ..Default::default()
            },
        )?;
        keys.insert(sample, secret);
    }

    // memory id -> the turns it holds (a merged duplicate holds several), per conversation.
    let map_path = dir.join(MAP_FILE);
    let turns: HashMap<String, HashMap<String, Vec<String>>> = if o.search_only {
        serde_json::from_slice(&std::fs::read(&map_path).with_context(|| {
            format!(
                "{}: run once without --search-only first",
                map_path.display()
            )
        })?)?
    } else {
        write_turns(addr, &convs, &keys, &map_path, o.held)?
    };

    let defaults = state.services.memory.weights();
    let sets = if o.weights.is_empty() {
        vec![String::new()]
    } else {
        o.weights.clone()
    };
    for set in sets {
        let w = weights_from(defaults, &set)?;
        state.services.memory.set_weights(w);
        println!("weights {}", serde_json::to_string(&w)?);
        score(addr, &o, &convs, &keys, &turns)?;
    }
    if let Some(path) = &o.dump {
        dump(addr, path, &convs, &keys, &turns)?;
    }
    Ok(())
}

/// One JSON line per scored question: its category, evidence and the 100 best hits with their
/// turns and breakdowns, for studying the ranking offline.
fn dump(
    addr: SocketAddr,
    path: &Path,
    convs: &[Value],
    keys: &HashMap<String, String>,
    turns: &Turns,
) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for c in convs {
        let sample = c["sample_id"].as_str().unwrap_or_default();
        let held = &turns[sample];
        for q in c["qa"].as_array().into_iter().flatten() {
            let cat = q["category"].as_u64().unwrap_or(0);
            let want = evidence_of(q);
            if !(1..=4).contains(&cat) || want.is_empty() {
                continue;
            }
            let question = q["question"].as_str().unwrap_or_default();
            let (s, r) = http(
                addr,
                "POST",
                "/v1/memories/search",
                &keys[sample],
                &json!({"query": question, "k": 100}),
            )?;
            if s != 200 {
                bail!("search {question:?}: {s} {r}");
            }
            let hits: Vec<Value> = r["hits"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| {
                    json!({
                        "turns": held.get(h["memory"]["id"].as_str().unwrap_or_default()),
                        "score": h["score"],
                        "breakdown": h["breakdown"],
                        "speaker": h["memory"]["speaker"],
                        "content": h["memory"]["content"],
                    })
                })
                .collect();
            let line = json!({"conv": sample, "category": cat, "question": question,
                "evidence": want, "hits": hits});
            writeln!(out, "{line}")?;
        }
    }
    out.flush()?;
    println!("dumped to {}", path.display());
    Ok(())
}

/// `defaults` with the `signal=weight` pairs of `set` applied.
fn weights_from(defaults: Breakdown, set: &str) -> anyhow::Result<Breakdown> {
    let mut v = serde_json::to_value(defaults)?;
    for pair in set.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, w) = pair.split_once('=').context("weights are signal=value")?;
        let slot = v
            .get_mut(name.trim())
            .with_context(|| format!("no signal {name:?}"))?;
        *slot = json!(w.trim().parse::<f32>()?);
    }
    Ok(serde_json::from_value(v)?)
}

type Turns = HashMap<String, HashMap<String, Vec<String>>>;

fn score(
    addr: SocketAddr,
    o: &Options,
    convs: &[Value],
    keys: &HashMap<String, String>,
    turns: &Turns,
) -> anyhow::Result<()> {
    let mut overall = Tally::default();
    let mut by_cat: BTreeMap<u64, Tally> = BTreeMap::new();
    let mut lat = vec![];
    let mut misses_shown = 0;
    for c in convs {
        let sample = c["sample_id"].as_str().unwrap_or_default();
        let key = &keys[sample];
        let held = &turns[sample];
        for q in c["qa"].as_array().into_iter().flatten() {
            let cat = q["category"].as_u64().unwrap_or(0);
            if !(1..=4).contains(&cat) {
                continue;
            }
            let want = evidence_of(q);
            if want.is_empty() {
                continue;
            }
            let question = q["question"].as_str().unwrap_or_default();
            let t = Instant::now();
            let (s, r) = http(
                addr,
                "POST",
                "/v1/memories/search",
                key,
                &json!({"query": question, "k": o.k}),
            )?;
            lat.push(t.elapsed().as_secs_f64() * 1000.0);
            if s != 200 {
                bail!("search {question:?}: {s} {r}");
            }
            let got: HashSet<&str> = r["hits"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| h["memory"]["id"].as_str())
                .filter_map(|id| held.get(id))
                .flatten()
                .map(String::as_str)
                .collect();
            let found = want.iter().filter(|w| got.contains(w.as_str())).count();
            let recall = found as f64 / want.len() as f64;
            if recall < 1.0 && misses_shown < o.misses {
                misses_shown += 1;
                let texts: Vec<String> = r["hits"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|h| {
                        let id = h["memory"]["id"].as_str().unwrap_or_default();
                        format!(
                            "{:?} {:.3} {}",
                            held.get(id),
                            h["score"].as_f64().unwrap_or(0.0),
                            h["memory"]["content"].as_str().unwrap_or_default()
                        )
                    })
                    .collect();
                println!(
                    "MISS [{cat}] {question} want {want:?} recall {recall:.2}\n  {}",
                    texts.join("\n  ")
                );
            }
            for t in [&mut overall, by_cat.entry(cat).or_default()] {
                t.questions += 1;
                t.recall += recall;
            }
        }
    }
    println!("turn recall@{} over {} questions:", o.k, overall.questions);
    println!(
        "  overall      {:.3}",
        overall.recall / overall.questions.max(1) as f64
    );
    for (cat, name) in CATEGORIES {
        if let Some(t) = by_cat.get(&cat) {
            println!(
                "  {cat} {name:<11} {:.3} ({} questions)",
                t.recall / t.questions.max(1) as f64,
                t.questions
            );
        }
    }
    println!(
        "search latency over HTTP: p50 {:.1} ms, p95 {:.1} ms",
        pct(&mut lat.clone(), 0.5),
        pct(&mut lat, 0.95)
    );
    Ok(())
}

fn write_turns(
    addr: SocketAddr,
    convs: &[Value],
    keys: &HashMap<String, String>,
    map_path: &Path,
    show_held: bool,
) -> anyhow::Result<HashMap<String, HashMap<String, Vec<String>>>> {
    let mut all: HashMap<String, HashMap<String, Vec<String>>> = HashMap::new();
    let mut decisions: BTreeMap<String, usize> = BTreeMap::new();
    let mut lat = vec![];
    let started = Instant::now();
    for c in convs {
        let sample = c["sample_id"].as_str().unwrap_or_default().to_string();
        let key = &keys[&sample];
        let conv = &c["conversation"];
        let held = all.entry(sample.clone()).or_default();
        for n in 1.. {
            let Some(session) = conv[format!("session_{n}")].as_array() else {
                break;
            };
            let date = session_date(
                conv[format!("session_{n}_date_time")]
                    .as_str()
                    .unwrap_or_default(),
            )?;
            for turn in session {
                let speaker = turn["speaker"].as_str().unwrap_or_default();
                let dia = turn["dia_id"].as_str().unwrap_or_default();
                let mut content = turn["text"].as_str().unwrap_or_default().to_string();
                if let Some(cap) = turn["blip_caption"].as_str() {
                    content.push_str(&format!(" [shares a photo: {cap}]"));
                }
                let body = json!({
                    "class": "episodic",
                    "content": content,
                    "speaker": speaker,
                    "session_date": date,
                    "session_label": format!("session_{n}"),
                    "entities": entities(speaker, &content),
                    "evidence": [dia],
                });
                let t = Instant::now();
                let (s, r) = http(addr, "POST", "/v1/memories", key, &body)?;
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                if !(200..300).contains(&s) {
                    *decisions.entry(format!("http {s}")).or_default() += 1;
                    continue;
                }
                let decision = r["decision"].as_str().unwrap_or("?");
                *decisions.entry(decision.to_string()).or_default() += 1;
                if show_held && decision != "accepted" {
                    let reasons: Vec<String> = r["reasons"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|x| format!("{}{}", x["code"].as_str().unwrap_or("?"), x["fields"]))
                        .collect();
                    println!("held {dia} {decision} {reasons:?}: {content}");
                }
                if let Some(id) = r["id"].as_str() {
                    held.entry(id.to_string())
                        .or_default()
                        .push(dia.to_string());
                }
            }
        }
    }
    println!(
        "wrote {} turns in {:.1} s over HTTP: write p50 {:.1} ms, p95 {:.1} ms; decisions {decisions:?}",
        lat.len(),
        started.elapsed().as_secs_f64(),
        pct(&mut lat.clone(), 0.5),
        pct(&mut lat, 0.95)
    );
    std::fs::write(map_path, serde_json::to_vec(&all)?)?;
    Ok(all)
}
