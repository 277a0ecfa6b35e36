//! Writes the `manifest.json` of the corpus directories: each file's sha256 and counts, in the
//! order the manifest already lists them (the training order), a new file last. Then prints
//! the lines `corpus/CARDS.md` must hold for each file (a test checks both).
//!
//! `cargo run -p registry-detect-train --bin corpus-manifest [-- --check]`: with `--check`,
//! writes nothing and fails when a manifest is not what the files hold.

use clap::Parser;

use registry_detect_train::corpus::{self, MANIFEST, Manifest};

/// Records each file of `registry/detect/corpus` and `registry/detect/dev` (sha256, counts) in
/// its directory's manifest.json, in the order the manifest lists them (the training order), a
/// new file last; prints the lines corpus/CARDS.md must hold for each file.
#[derive(Debug, Parser)]
#[command(name = "corpus-manifest")]
struct Args {
    /// Writes nothing; exits with 1 when a manifest is not what the files hold.
    #[arg(long)]
    check: bool,
}

fn main() {
    let check = Args::parse().check;
    let mut stale = false;
    for dir in [corpus::corpus_dir(), corpus::dev_dir()] {
        let old = Manifest::read(&dir)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or(Manifest { files: vec![] });
        let new = old.refreshed(&dir).unwrap_or_else(|e| panic!("{e}"));
        if new != old {
            stale = true;
            println!("{}: {MANIFEST} differs from the files", dir.display());
            if !check {
                std::fs::write(dir.join(MANIFEST), new.to_json())
                    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            }
        }
        for f in &new.files {
            println!("{}\n{}", f.card_row(), f.card_classes());
        }
    }
    if check && stale {
        std::process::exit(1);
    }
}
