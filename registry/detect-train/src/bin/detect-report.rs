//! Per-family figures on the corpus and a timing of the detectors, for the README.
//!
//! `cargo run --release -p registry-detect-train --bin detect-report [-- --corpus DIR [--errors]]`
//! (`-- --help` for the options): another corpus directory may be scored instead, and only then
//! listed example by example (`--errors`); the shipped test split is reported as figures only,
//! so that nobody tunes on it.
//! The test split is also scored with the second opinion (`registry_detect::vector`, the gate's
//! decision when its embedding model is loaded), which needs the models installed.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;

use registry_detect::vector::gate_vectors;
use registry_detect::{MODEL, detect_instruction, detect_instruction_with, scan_sensitive};
use registry_detect_train::corpus::{
    self, Report, assess, blocked_as_external, blocked_as_user_statement,
};
use registry_detect_train::second_opinion_embedder;

/// Time this thread has spent on a CPU, in seconds (Linux `schedstat`); wall-clock time where
/// that is not available. On a shared machine CPU time is the steadier measure.
fn cpu_seconds() -> f64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map(|ns| ns as f64 * 1e-9)
        .unwrap_or_else(|| START.get_or_init(Instant::now).elapsed().as_secs_f64())
}

/// Seconds of CPU per call of `f`, over `rounds` rounds.
fn per_call(rounds: usize, calls: usize, mut f: impl FnMut()) -> f64 {
    let start = cpu_seconds();
    for _ in 0..rounds {
        f();
    }
    (cpu_seconds() - start) / (rounds * calls.max(1)) as f64
}

/// Per-family block and kept figures of the detector on its corpus (the held-out split also
/// with the second opinion) and a timing of the detectors.
#[derive(Debug, Parser)]
#[command(name = "detect-report")]
struct Args {
    /// Scores this corpus directory instead of the shipped corpus.
    #[arg(long, value_name = "DIR")]
    corpus: Option<PathBuf>,
    /// With --corpus, lists each example the gate gets wrong (never for the shipped test
    /// split, so that nobody tunes on it).
    #[arg(long, requires = "corpus")]
    errors: bool,
}

fn main() {
    let args = Args::parse();
    let dir = args.corpus.as_deref();
    let all = match dir {
        Some(d) => corpus::load(d),
        None => corpus::load_default(),
    }
    .unwrap_or_else(|e| panic!("corpus: {e}"));
    if args.errors {
        for ex in &all {
            let (d, f) = assess(&ex.text, &MODEL);
            if blocked_as_user_statement(&d, &f) != ex.is_attack() {
                println!(
                    "{} [{}] {:.2} {:?} {:?}: {}",
                    if ex.is_attack() {
                        "MISSED"
                    } else {
                        "FALSE BLOCK"
                    },
                    ex.class,
                    d.score,
                    d.verdict,
                    d.signal_names(),
                    ex.text.replace('\n', "\\n")
                );
            }
        }
    }
    for split in ["train", "test"] {
        let (mut lang, mut class, mut ext) =
            (Report::default(), Report::default(), Report::default());
        for ex in all.iter().filter(|e| e.split == split) {
            let (d, f) = assess(&ex.text, &MODEL);
            let b = blocked_as_user_statement(&d, &f);
            lang.add(&ex.lang, ex.is_attack(), b);
            class.add(&ex.class, ex.is_attack(), b);
            ext.add(&ex.lang, ex.is_attack(), blocked_as_external(&d, &f));
        }
        println!("== {split} split (the model was trained on train only) ==");
        println!("as a user statement:");
        print!("{}", lang.render("language"));
        print!("{}", class.render("family / topic"));
        println!("from an external source:");
        println!("{}", ext.render("language"));
    }
    // The gate's decision with its embedding model: the second opinion stacked on the classifier.
    let emb = second_opinion_embedder(Some(1));
    let vectors = |texts: &[&str]| -> Vec<Vec<f32>> {
        texts
            .chunks(32)
            .flat_map(|c| {
                gate_vectors(&emb, c)
                    .expect("embedding")
                    .expect("the second opinion's model")
            })
            .collect()
    };
    for split in ["test"] {
        let exs: Vec<_> = all.iter().filter(|e| e.split == split).collect();
        let texts: Vec<&str> = exs.iter().map(|e| e.text.as_str()).collect();
        let vs = vectors(&texts);
        let (mut lang, mut class, mut ext) =
            (Report::default(), Report::default(), Report::default());
        for (ex, v) in exs.iter().zip(&vs) {
            let d = detect_instruction_with(&ex.text, Some(v));
            let f = scan_sensitive(&ex.text);
            let b = blocked_as_user_statement(&d, &f);
            lang.add(&ex.lang, ex.is_attack(), b);
            class.add(&ex.class, ex.is_attack(), b);
            ext.add(&ex.lang, ex.is_attack(), blocked_as_external(&d, &f));
        }
        println!("== {split} split with the second opinion (the gate's decision) ==");
        println!("as a user statement:");
        print!("{}", lang.render("language"));
        print!("{}", class.render("family / topic"));
        println!("from an external source:");
        println!("{}", ext.render("language"));
    }
    let texts: Vec<&str> = all.iter().map(|e| e.text.as_str()).collect();
    let sample: Vec<&str> = texts.iter().copied().step_by(25).collect();
    let vec_t = per_call(2, sample.len(), || {
        for t in &sample {
            std::hint::black_box(gate_vectors(&emb, &[t]).expect("embedding"));
        }
    });
    // The stacked score alone (the neighbour scan over the prototypes dominates it).
    let sample_vs = vectors(&sample);
    let second = &*registry_detect::vector::SECOND_OPINION;
    let stack_t = per_call(5, sample_vs.len(), || {
        for v in &sample_vs {
            std::hint::black_box(second.score(0.5, v));
        }
    });
    let bytes: usize = texts.iter().map(|t| t.len()).sum();
    // Warm the lazily compiled patterns and the model first.
    for t in &texts {
        let _ = detect_instruction(t);
        let _ = scan_sensitive(t);
    }
    let rounds = 20;
    let inst = per_call(rounds, texts.len(), || {
        for t in &texts {
            std::hint::black_box(detect_instruction(t));
        }
    });
    let sens = per_call(rounds, texts.len(), || {
        for t in &texts {
            std::hint::black_box(scan_sensitive(t));
        }
    });
    let longer: Vec<&str> = texts.iter().copied().filter(|t| t.len() >= 150).collect();
    let longer_t = per_call(rounds, longer.len(), || {
        for t in &longer {
            std::hint::black_box(detect_instruction(t));
        }
    });
    // A long memory of distinct sentences (the corpus's legitimate texts one after another,
    // about 16 KiB), and one sentence repeated.
    let mut long = String::new();
    for t in all
        .iter()
        .filter(|e| !e.is_attack())
        .map(|e| e.text.as_str())
    {
        if long.len() + t.len() + 1 > 16 * 1024 {
            break;
        }
        long.push_str(t);
        long.push('\n');
    }
    let long_t = per_call(rounds, 1, || {
        std::hint::black_box(detect_instruction(&long));
    });
    let repeated = "The quarterly report is attached and the numbers look fine. ".repeat(270);
    let repeated_t = per_call(rounds, 1, || {
        std::hint::black_box(detect_instruction(&repeated));
    });
    let long_s = per_call(rounds, 1, || {
        std::hint::black_box(scan_sensitive(&long));
    });
    println!(
        "CPU time over {} texts (mean {} bytes), {rounds} rounds, one thread:",
        texts.len(),
        bytes / texts.len()
    );
    println!("  detect_instruction  {:>8.1} µs per text", inst * 1e6);
    println!("  scan_sensitive      {:>8.1} µs per text", sens * 1e6);
    println!(
        "  gate_vectors        {:>8.1} µs per text (the second opinion's vector, {} texts one at a time)",
        vec_t * 1e6,
        sample.len()
    );
    println!(
        "  second opinion      {:>8.1} µs per text (its score from a vector: {} neighbours among {} prototypes)",
        stack_t * 1e6,
        second.model.neighbours,
        second.prototypes.len()
    );
    println!(
        "  detect_instruction  {:>8.1} µs per text of 150 bytes or more ({} texts, mean {} bytes)",
        longer_t * 1e6,
        longer.len(),
        longer.iter().map(|t| t.len()).sum::<usize>() / longer.len().max(1)
    );
    println!(
        "  detect_instruction  {:>8.1} µs for a {} KiB text of distinct sentences",
        long_t * 1e6,
        long.len() / 1024
    );
    println!(
        "  scan_sensitive      {:>8.1} µs for the same text",
        long_s * 1e6
    );
    println!(
        "  detect_instruction  {:>8.1} µs for a {} KiB text of one sentence repeated",
        repeated_t * 1e6,
        repeated.len() / 1024
    );
}
