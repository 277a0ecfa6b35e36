//! The committed model files (`registry/detect/model`) are what the trainer builds from the
//! corpus, read in its manifest's order, and the model card records each one's sha256.
//!
//! `instruction.lr` is refitted with the configuration `instruction.json` records (the
//! cross-validated search that chose it is the slow part of `train` and is not repeated here).
//! `prototypes.bin` is rebuilt from the train split's vectors (the trainer's `vectors_of`,
//! the same batches) and compared with the committed file prototype by prototype: the same
//! count, dimension and labels in corpus order, and each committed prototype the rebuilt
//! vector to within 8-bit quantisation (a vector's last bits depend on the ONNX Runtime build
//! and the CPU, so a rebuild is not byte for byte; the trainer once read its vectors from a
//! `--vector-cache` computed in other batches).
//! `vector.json` is fitted on the neighbour features
//! of every training row (about 5,600² cosines and 600 full-batch steps: minutes in a debug
//! build), so it is covered by the model card's sha256 and by `train --no-write` rather than
//! refitted here.

use registry_detect::classifier::{self, TrainConfig};
use registry_detect::vector::SECOND_OPINION;
use registry_detect::{MODEL, Model, analyse};
use registry_detect_train::corpus;
use sha2::{Digest, Sha256};

/// The embedded model is exactly what the trainer produces from the train split with the
/// recorded configuration: nothing was tuned by hand afterwards.
#[test]
fn instruction_lr_is_rebuilt_from_the_train_split() {
    let meta: serde_json::Value =
        serde_json::from_str(include_str!("../../detect/model/instruction.json"))
            .expect("model metadata");
    let c = &meta["config"];
    let cfg = TrainConfig {
        epochs: c["epochs"].as_u64().expect("epochs") as usize,
        learning_rate: c["learning_rate"].as_f64().expect("learning_rate") as f32,
        l2: c["l2"].as_f64().expect("l2") as f32,
        seed: c["seed"].as_u64().expect("seed"),
    };
    let all = corpus::load_default().expect("corpus loads");
    let analysed: Vec<_> = all
        .iter()
        .filter(|e| e.split == "train" && e.trains_classifier())
        .map(|e| (analyse(&e.text), e.is_attack()))
        .collect();
    let samples: Vec<classifier::Sample> = analysed
        .iter()
        .map(|(a, attack)| (a.windows.as_slice(), a.whole, *attack))
        .collect();
    let mut m: Model = classifier::fit(&samples, cfg);
    m.threshold = meta["threshold"].as_f64().expect("threshold") as f32;
    m.veto = meta["veto"].as_f64().expect("veto") as f32;
    assert!(
        m.to_bytes() == MODEL.to_bytes(),
        "retrain with `cargo run --release -p registry-detect-train --bin train`"
    );
}

/// `MODEL_CARD.md` names the sha256 of every file the crate embeds: a retrain that does not
/// update the card (its reason, its figures) fails here.
#[test]
fn the_model_card_records_every_model_files_sha256() {
    let dir = corpus::model_dir();
    let card = std::fs::read_to_string(dir.join("MODEL_CARD.md")).expect("model card");
    for file in [
        "instruction.lr",
        "instruction.json",
        "vector.json",
        "prototypes.bin",
    ] {
        let digest = hex::encode(Sha256::digest(std::fs::read(dir.join(file)).expect("read")));
        assert!(
            card.contains(&format!("| `{file}` |")) && card.contains(&digest),
            "MODEL_CARD.md does not record {file} with sha256 {digest}"
        );
    }
}

/// The committed prototypes are the train split's e5 vectors with their labels, in corpus
/// order: nothing added, dropped, reordered, relabelled or edited by hand.
#[test]
fn prototypes_bin_is_rebuilt_from_the_train_split() {
    let all = corpus::load_default().expect("corpus loads");
    let train: Vec<&corpus::Example> = all.iter().filter(|e| e.split == "train").collect();
    let texts: Vec<&str> = train.iter().map(|e| e.text.as_str()).collect();
    let emb = registry_detect_train::second_opinion_embedder(None);
    let vecs = registry_detect_train::vectors_of(&emb, &texts, None);
    let rebuilt = registry_detect_train::prototypes(&train, &vecs);
    let committed = &SECOND_OPINION.prototypes;
    assert_eq!(rebuilt.len(), committed.len(), "prototype count");
    let rows: Vec<&Vec<f32>> = train
        .iter()
        .zip(&vecs)
        .filter(|(e, _)| e.trains_classifier())
        .map(|(_, v)| v)
        .collect();
    assert_eq!(rows.len(), committed.len());
    let mut worst = (1f32, 0usize);
    for (i, v) in rows.iter().enumerate() {
        assert_eq!(
            rebuilt.is_attack(i),
            committed.is_attack(i),
            "prototype {i}'s label"
        );
        // Both sides are unit vectors up to quantisation: the cosine of the rebuilt vector
        // with the committed prototype is 1 to within it.
        let cos = committed.similarity(i, v);
        if cos < worst.0 {
            worst = (cos, i);
        }
    }
    assert!(
        worst.0 > 0.995,
        "prototype {} is not its train example's vector (cosine {}): retrain with `cargo run --release -p registry-detect-train --bin train`",
        worst.1,
        worst.0
    );
}
