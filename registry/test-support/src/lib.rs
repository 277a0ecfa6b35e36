//! What tests of the domain crates share: [`Embedded`], the services over the real embedded
//! backends (SQLite, blob files, tantivy, the vector index, the local model) in a temporary
//! directory, built as `registry serve` builds them but without HTTP. The model comes from the
//! model cache (`scripts/fetch-models.sh`); a missing model fails the test, it is never skipped.

use std::sync::Arc;

use registry_core::Sensitivity;
use registry_core::audit::AuditKey;
use registry_core::principal::{Principal, Role};
use registry_embed::{EmbedderConfig, MiniLmEmbedder};
use registry_services::{Backends, Options, Services};
use registry_store_sqlite::{FsBlobStore, SqliteStore, StoreOptions};
use registry_text_index::TantivyTextIndex;
use registry_vector_index::EmbeddedVectorIndex;

/// The services over fresh embedded backends; the directory lives as long as this value.
pub struct Embedded {
    pub services: Services,
    pub dir: tempfile::TempDir,
}

impl Embedded {
    pub fn new() -> Embedded {
        let dir = tempfile::tempdir().expect("temporary directory");
        let d = dir.path();
        let key = AuditKey::from_bytes([7; 32]);
        let store = SqliteStore::open_dir(
            &d.join("db"),
            StoreOptions {
                audit_key: Some(key.clone()),
                ..StoreOptions::default()
            },
        )
        .expect("store");
        let embedder = MiniLmEmbedder::new(EmbedderConfig {
            threads: Some(1),
            ..EmbedderConfig::default()
        })
        .expect("the embedding model (run scripts/fetch-models.sh)");
        let backends = Backends {
            store: Arc::new(store),
            blobs: Arc::new(FsBlobStore::open(d.join("blobs")).expect("blobs")),
            text: Arc::new(TantivyTextIndex::open(d.join("text")).expect("text index")),
            vectors: Arc::new(
                EmbeddedVectorIndex::open(d.join("vectors"), registry_embed::DIM)
                    .expect("vector index"),
            ),
            embedder: Arc::new(embedder),
            gate_embedder: Some(gate_embedder()),
        };
        let services = Services::new(
            backends,
            Options {
                audit_key: key,
                audit_anchor: d.join("audit.checkpoint"),
                retention: Default::default(),
                cluster: Default::default(),
            },
        );
        Embedded { services, dir }
    }
}

/// The write gate's second-opinion model (multilingual-e5-small), loaded once per test
/// process and shared by every [`Embedded`] registry, as a server shares it across requests.
pub fn gate_embedder() -> Arc<dyn registry_core::retrieval::Embedder> {
    static GATE: std::sync::OnceLock<Arc<registry_embed::OnnxEmbedder>> =
        std::sync::OnceLock::new();
    GATE.get_or_init(|| {
        Arc::new(
            registry_embed::OnnxEmbedder::new(EmbedderConfig {
                threads: Some(1),
                query_cache: 0,
                ..EmbedderConfig::for_model(registry_detect::vector::VECTOR_MODEL_NAME)
                    .expect("registry-embed runs the gate's model")
            })
            .expect("the gate's embedding model (run scripts/fetch-models.sh)"),
        )
    })
    .clone()
}

impl Default for Embedded {
    fn default() -> Self {
        Embedded::new()
    }
}

/// A principal of `tenant` with `roles` and full clearance, as a key would carry it.
pub fn principal(tenant: &str, user: &str, roles: &[Role]) -> Principal {
    let mut p = Principal::new(tenant, user);
    p.roles = roles.to_vec();
    p.clearance = Sensitivity::Secret;
    p
}
