//! Per-family figures on the corpus and a timing of the detectors, for the README.
//!
//! `cargo run --release -p registry-detect --bin detect-report [-- --corpus DIR [--errors]]`:
//! another corpus directory may be scored instead, and only then listed example by example
//! (`--errors`); the shipped test split is reported as figures only, so that nobody tunes on it.

use std::time::Instant;

use registry_detect::corpus::{
    self, Report, assess, blocked_as_external, blocked_as_user_statement,
};
use registry_detect::{MODEL, detect_instruction, scan_sensitive};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .iter()
        .position(|a| a == "--corpus")
        .and_then(|i| args.get(i + 1));
    let all = match dir {
        Some(d) => corpus::load(std::path::Path::new(d)),
        None => corpus::load_default(),
    }
    .unwrap_or_else(|e| panic!("corpus: {e}"));
    if dir.is_some() && args.iter().any(|a| a == "--errors") {
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
    let texts: Vec<&str> = all.iter().map(|e| e.text.as_str()).collect();
    let bytes: usize = texts.iter().map(|t| t.len()).sum();
    // Warm the lazily compiled patterns and the model first.
    for t in &texts {
        let _ = detect_instruction(t);
        let _ = scan_sensitive(t);
    }
    let rounds = 20;
    let start = Instant::now();
    for _ in 0..rounds {
        for t in &texts {
            std::hint::black_box(detect_instruction(t));
        }
    }
    let inst = start.elapsed().as_secs_f64() / (rounds * texts.len()) as f64;
    let start = Instant::now();
    for _ in 0..rounds {
        for t in &texts {
            std::hint::black_box(scan_sensitive(t));
        }
    }
    let sens = start.elapsed().as_secs_f64() / (rounds * texts.len()) as f64;
    let longer: Vec<&str> = texts.iter().copied().filter(|t| t.len() >= 150).collect();
    let start = Instant::now();
    for _ in 0..rounds {
        for t in &longer {
            std::hint::black_box(detect_instruction(t));
        }
    }
    let longer_t = start.elapsed().as_secs_f64() / (rounds * longer.len()) as f64;
    let long = "The quarterly report is attached and the numbers look fine. ".repeat(270);
    let start = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(detect_instruction(&long));
    }
    let long_t = start.elapsed().as_secs_f64() / rounds as f64;
    println!(
        "timing over {} texts (mean {} bytes), {rounds} rounds, one thread:",
        texts.len(),
        bytes / texts.len()
    );
    println!("  detect_instruction  {:>8.1} µs per text", inst * 1e6);
    println!("  scan_sensitive      {:>8.1} µs per text", sens * 1e6);
    println!(
        "  detect_instruction  {:>8.1} µs per text of 150 bytes or more ({} texts, mean {} bytes)",
        longer_t * 1e6,
        longer.len(),
        longer.iter().map(|t| t.len()).sum::<usize>() / longer.len().max(1)
    );
    println!(
        "  detect_instruction  {:>8.1} µs for a {} KiB text",
        long_t * 1e6,
        long.len() / 1024
    );
}
