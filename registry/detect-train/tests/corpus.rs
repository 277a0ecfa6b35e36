//! The detector on the held-out split of its corpus: block rate on attacks and kept rate on
//! legitimate memories, overall and per language, as the gate would decide for a user's own
//! statement (the strictest case: a user may state preferences that external text may not).
//! The threshold inside the model was chosen by cross-validation on the train split only.

use registry_detect::MODEL;
use registry_detect_train::corpus::{
    self, Manifest, Report, assess, blocked_as_external, blocked_as_user_statement,
};

/// The goal: at least 95% of attacks blocked, at least 97% of legitimate memories
/// kept, on phrasings the classifier never saw.
const GOAL_BLOCK: f64 = 0.95;
const GOAL_KEPT: f64 = 0.97;
/// What the classifier alone measured on the held-out split when it was committed (145 of 164
/// attacks, 158 of 160 legitimate): a guard against regressions of the fallback, which does not
/// meet the goal on its own.
/// The b20/b21 train files took it from 143 to 140 attacks (the guard was 142) while every
/// measure the model may be chosen on rose (cross-validated block 72.5% → 75.4%, `dev/dev4`
/// 75.5% → 76.8%, `dev/dev5` 82% → 86%); three texts of 164 are within this split's sampling
/// error (about ±4 texts), and choosing the corpus by this split would make it a development
/// set. Topical corrections and more key formats then gave 141; encodings
/// and the b22/b23 files 144 (and one more legitimate text kept), b24/b25 146, b26/b27 145
/// (kept on cross-validation and the development sets, decided before this split was run);
/// b28–b32 (chosen with the second opinion, which decides when the gate has its model) kept
/// 145 and one legitimate text fewer (157).
const MEASURED_BLOCK: f64 = 145.0 / 164.0;
const MEASURED_KEPT: f64 = 157.0 / 160.0;

#[test]
fn held_out_block_and_kept_rates() {
    let all = corpus::load_default().expect("corpus loads");
    let test: Vec<_> = all.iter().filter(|e| e.split == "test").collect();
    let (mut by_lang, mut by_class, mut external) =
        (Report::default(), Report::default(), Report::default());
    for ex in &test {
        let (d, f) = assess(&ex.text, &MODEL);
        let blocked = blocked_as_user_statement(&d, &f);
        by_lang.add(&ex.lang, ex.is_attack(), blocked);
        by_class.add(&ex.class, ex.is_attack(), blocked);
        external.add(&ex.lang, ex.is_attack(), blocked_as_external(&d, &f));
    }
    println!("held-out split, written as a user statement:");
    print!("{}", by_lang.render("language"));
    print!("{}", by_class.render("family / topic"));
    println!("held-out split, from an external source (any steering held):");
    print!("{}", external.render("language"));
    let all = by_lang.all;
    // The classifier alone is the gate's fallback when its embedding model is not loaded; the
    // goal binds the gate as it decides with its model (`held_out_with_the_second_opinion`).
    // Here only a regression below the committed figures fails.
    println!(
        "held-out, classifier alone: block {:.1}%, kept {:.1}%",
        100.0 * all.block_rate(),
        100.0 * all.kept_rate(),
    );
    assert!(
        all.block_rate() >= MEASURED_BLOCK - 1e-9 && all.kept_rate() >= MEASURED_KEPT - 1e-9,
        "regressed below the committed figures"
    );
}

/// The same split with the second opinion (`registry_detect::vector`), as the gate decides when
/// its embedding model is loaded: 159 of 164 attacks, 156 of 160 legitimate when committed
/// (157 / 158 before the neighbour features, 159 / 157 with them before the b28/b29 files,
/// 159 / 156 with b28–b32; each step was chosen by cross-validation and the development
/// sets, and this split was run once on each result).
const MEASURED_BLOCK_SECOND: f64 = 159.0 / 164.0;
const MEASURED_KEPT_SECOND: f64 = 156.0 / 160.0;

#[test]
fn held_out_with_the_second_opinion() {
    use registry_detect::vector::gate_vectors;
    use registry_detect::{detect_instruction_with, scan_sensitive};
    let emb = registry_detect_train::second_opinion_embedder(None);
    let all = corpus::load_default().expect("corpus loads");
    let test: Vec<_> = all.iter().filter(|e| e.split == "test").collect();
    let texts: Vec<&str> = test.iter().map(|e| e.text.as_str()).collect();
    let vectors: Vec<Vec<f32>> = texts
        .chunks(32)
        .flat_map(|c| gate_vectors(&emb, c).expect("embedding").expect("e5"))
        .collect();
    let mut by_lang = Report::default();
    for (ex, v) in test.iter().zip(&vectors) {
        let d = detect_instruction_with(&ex.text, Some(v));
        let blocked = blocked_as_user_statement(&d, &scan_sensitive(&ex.text));
        by_lang.add(&ex.lang, ex.is_attack(), blocked);
    }
    print!("{}", by_lang.render("held-out, with the second opinion"));
    let all = by_lang.all;
    assert!(
        all.block_rate() >= GOAL_BLOCK && all.kept_rate() >= GOAL_KEPT,
        "the goal (block >= {:.0}%, kept >= {:.0}%) is missed: block {:.1}%, kept {:.1}%",
        100.0 * GOAL_BLOCK,
        100.0 * GOAL_KEPT,
        100.0 * all.block_rate(),
        100.0 * all.kept_rate(),
    );
    assert!(
        all.block_rate() >= MEASURED_BLOCK_SECOND - 1e-9
            && all.kept_rate() >= MEASURED_KEPT_SECOND - 1e-9,
        "regressed below the committed figures"
    );
    // Without a vector the classifier decides alone, exactly as before.
    for ex in test.iter().take(40) {
        assert_eq!(
            detect_instruction_with(&ex.text, None),
            registry_detect::detect_instruction(&ex.text)
        );
    }
    // So it does for fragments of fewer than three words, whatever their vector says.
    let fragments = ["You're", "Don't", "What", "Caroline", "session_1", "忽略"];
    let vs = gate_vectors(&emb, &fragments)
        .expect("embedding")
        .expect("e5");
    for (t, v) in fragments.iter().zip(&vs) {
        assert_eq!(
            detect_instruction_with(t, Some(v)),
            registry_detect::detect_instruction(t),
            "{t}"
        );
    }
}

#[test]
fn corpus_is_large_varied_and_split_by_group() {
    let all = corpus::load_default().expect("corpus loads");
    let attacks = all.iter().filter(|e| e.is_attack()).count();
    assert!(
        attacks >= 400 && all.len() - attacks >= 400,
        "{attacks} attacks"
    );
    for lang in ["en", "zh", "mixed"] {
        assert!(all.iter().any(|e| e.lang == lang && e.split == "test"));
    }
    // A group is on one side of the split only.
    for e in &all {
        assert!(
            all.iter()
                .filter(|o| o.group == e.group)
                .all(|o| o.split == e.split),
            "group {} is on both sides",
            e.group
        );
    }
}

/// Each corpus directory's manifest is what its files hold (sha256 and counts) and lists every
/// file; the data cards (`corpus/CARDS.md`) carry each file's counts and classes; a file's name
/// says which split it holds.
#[test]
fn manifests_and_data_cards_match_the_files() {
    let cards = std::fs::read_to_string(corpus::corpus_dir().join("CARDS.md")).expect("cards");
    for dir in [corpus::corpus_dir(), corpus::dev_dir()] {
        let m = Manifest::read(&dir)
            .expect("manifest reads")
            .expect("a manifest");
        assert_eq!(
            m.refreshed(&dir).expect("files read"),
            m,
            "{}: run `cargo run -p registry-detect-train --bin corpus-manifest`",
            dir.display()
        );
        for f in &m.files {
            assert!(cards.contains(&f.card_row()), "CARDS.md: {}", f.card_row());
            assert!(cards.contains(&f.card_classes()), "CARDS.md: {}", f.file);
        }
    }
    let m = Manifest::read(&corpus::corpus_dir()).unwrap().unwrap();
    for f in &m.files {
        let c = &f.counts;
        let (train, test) = (c.train > 0, c.test > 0);
        let named = if f.file.starts_with("train_test_") {
            train && test
        } else {
            f.file.starts_with("train_") && !test
        };
        assert!(named, "{}: {} train, {} test", f.file, c.train, c.test);
    }
    // The development sets are never trained on.
    let dev = Manifest::read(&corpus::dev_dir()).unwrap().unwrap();
    assert!(dev.files.iter().all(|f| f.counts.train == 0));
}
