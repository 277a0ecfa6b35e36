//! HybridSearcher over the real tantivy index, the real embedded vector index and the real
//! all-MiniLM-L6-v2 model (`scripts/fetch-models.sh` must have run).

use std::sync::{Arc, OnceLock};

use registry_core::ErrorCode;
use registry_core::asset::AssetKind;
use registry_core::retrieval::{Embedder, IndexKeys, TextIndex, VectorIndex, VisibilityFilter};
use registry_embed::MiniLmEmbedder;
use registry_engine::contract::{filter, keys};
use registry_engine::{Fusion, HybridHit, HybridSearcher, Leg, Legs, SearchOptions};
use registry_text_index::TantivyTextIndex;
use registry_vector_index::EmbeddedVectorIndex;

fn embedder() -> Arc<MiniLmEmbedder> {
    static E: OnceLock<Arc<MiniLmEmbedder>> = OnceLock::new();
    E.get_or_init(|| {
        Arc::new(MiniLmEmbedder::from_default_location().expect("run scripts/fetch-models.sh"))
    })
    .clone()
}

struct Fixture {
    _dir: tempfile::TempDir,
    searcher: HybridSearcher,
    text: Arc<TantivyTextIndex>,
    vectors: Arc<EmbeddedVectorIndex>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let e = embedder();
    let text = Arc::new(TantivyTextIndex::open(dir.path().join("text")).unwrap());
    let vectors =
        Arc::new(EmbeddedVectorIndex::open(dir.path().join("vectors"), e.info().dim).unwrap());
    let searcher = HybridSearcher::new(text.clone(), vectors.clone(), e);
    Fixture {
        _dir: dir,
        searcher,
        text,
        vectors,
    }
}

fn acme(id: &str) -> IndexKeys {
    keys(id, AssetKind::Document, "t:acme", &["public"], &[])
}

fn corpus() -> Vec<(IndexKeys, String)> {
    [
        (acme("pw"), "To recover access to your account, open the sign-in page and choose 'forgot credentials'; a link arrives by email."),
        (acme("e4012"), "Error E4012 means the upload exceeded the storage quota of the workspace."),
        (acme("vpn"), "The office VPN requires the WireGuard client and a device certificate."),
        (acme("lunch"), "The cafeteria serves vegetarian lunch on Thursdays."),
        (keys("salary", AssetKind::Document, "t:acme", &["group:hr"], &[]), "Salary bands for engineers are reviewed every March."),
        (keys("globex-pw", AssetKind::Document, "t:globex", &["public"], &[]), "Globex staff reset a forgotten password at the help desk kiosk."),
    ]
    .into_iter()
    .map(|(k, t)| (k, t.to_string()))
    .collect()
}

fn ids(hits: &[HybridHit]) -> Vec<&str> {
    hits.iter().map(|h| h.asset_id.as_str()).collect()
}

fn acme_public() -> VisibilityFilter {
    filter(&["t:acme"], &["public"], &[], &[])
}

#[test]
fn vector_leg_finds_a_paraphrase_the_text_leg_cannot() {
    let f = fixture();
    f.searcher.index_batch(&corpus()).unwrap();
    let hits = f
        .searcher
        .search(
            "how do I reset my password",
            &acme_public(),
            &SearchOptions::with_k(3),
        )
        .unwrap();
    let pw = hits
        .iter()
        .find(|h| h.asset_id == "pw")
        .expect("paraphrase found");
    assert_eq!(hits[0].asset_id, "pw", "{hits:#?}");
    assert!(pw.vector.is_some() && pw.found_by.contains(&Leg::Vector));
    assert_eq!(pw.vector.unwrap().rank, 1);
}

#[test]
fn text_leg_finds_an_exact_code() {
    let f = fixture();
    f.searcher.index_batch(&corpus()).unwrap();
    for fusion in [Fusion::Rrf { k: 60.0 }, Fusion::Convex { alpha: 0.5 }] {
        let opts = SearchOptions {
            fusion,
            ..SearchOptions::with_k(3)
        };
        let hits = f.searcher.search("E4012", &acme_public(), &opts).unwrap();
        assert_eq!(hits[0].asset_id, "e4012", "{fusion:?}: {hits:#?}");
        assert_eq!(hits[0].text.unwrap().rank, 1);
        assert!(hits[0].found_by.contains(&Leg::Text));
        for w in hits.windows(2) {
            assert!(w[0].score >= w[1].score, "fused hits sorted");
        }
    }
}

#[test]
fn filters_reach_both_legs() {
    let f = fixture();
    f.searcher.index_batch(&corpus()).unwrap();
    let opts = SearchOptions::with_k(10);
    // Globex asks with acme's exact text: nothing of acme comes back from either leg.
    let globex = filter(&["t:globex"], &["public", "group:hr"], &[], &[]);
    let exact = &corpus()[0].1;
    let hits = f.searcher.search(exact, &globex, &opts).unwrap();
    assert_eq!(ids(&hits), ["globex-pw"], "{hits:#?}");
    // Without the HR key the salary document is invisible; with it, it is found.
    let hits = f
        .searcher
        .search("salary bands", &acme_public(), &opts)
        .unwrap();
    assert!(!ids(&hits).contains(&"salary"));
    let hr = filter(&["t:acme"], &["group:hr"], &[], &[]);
    let hits = f.searcher.search("salary bands", &hr, &opts).unwrap();
    assert_eq!(ids(&hits), ["salary"]);
    assert_eq!(hits[0].found_by, [Leg::Text, Leg::Vector]);
    // Kind filter.
    let chunks = filter(&["t:acme"], &["public"], &[AssetKind::Chunk], &[]);
    assert!(
        f.searcher
            .search("password", &chunks, &opts)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn single_leg_searches_explain_one_leg() {
    let f = fixture();
    f.searcher.index_batch(&corpus()).unwrap();
    let text_only = SearchOptions {
        legs: Legs::TextOnly,
        ..SearchOptions::with_k(10)
    };
    let hits = f
        .searcher
        .search("VPN certificate", &acme_public(), &text_only)
        .unwrap();
    assert_eq!(hits[0].asset_id, "vpn");
    assert!(
        hits.iter()
            .all(|h| h.vector.is_none() && h.found_by == [Leg::Text])
    );
    let vector_only = SearchOptions {
        legs: Legs::VectorOnly,
        ..SearchOptions::with_k(2)
    };
    let hits = f
        .searcher
        .search(
            "remote network access for laptops",
            &acme_public(),
            &vector_only,
        )
        .unwrap();
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0].asset_id, "vpn", "{hits:#?}");
    assert!(
        hits.iter()
            .all(|h| h.text.is_none() && h.found_by == [Leg::Vector])
    );
}

#[test]
fn remove_reaches_both_legs_and_reindex_replaces() {
    let f = fixture();
    f.searcher.index_batch(&corpus()).unwrap();
    assert_eq!(f.text.len().unwrap(), 6);
    assert_eq!(f.vectors.len().unwrap(), 6);
    f.searcher.remove(&["vpn".to_string()]).unwrap();
    assert_eq!(f.text.len().unwrap(), 5);
    assert_eq!(f.vectors.len().unwrap(), 5);
    let hits = f
        .searcher
        .search(
            "VPN WireGuard certificate",
            &acme_public(),
            &SearchOptions::with_k(10),
        )
        .unwrap();
    assert!(!ids(&hits).contains(&"vpn"));

    f.searcher
        .index_asset(
            acme("lunch"),
            "The cafeteria now serves ramen on Fridays.".into(),
        )
        .unwrap();
    assert_eq!(f.text.len().unwrap(), 5);
    assert_eq!(f.vectors.len().unwrap(), 5);
    let hits = f
        .searcher
        .search("ramen", &acme_public(), &SearchOptions::with_k(1))
        .unwrap();
    assert_eq!(ids(&hits), ["lunch"]);
    assert_eq!(
        f.vectors
            .ids_not_made_by(&embedder().info().tag(), 10)
            .unwrap(),
        Vec::<String>::new(),
        "every vector carries the model tag"
    );
}

#[test]
fn batches_larger_than_one_embedding_call() {
    let f = fixture();
    let items: Vec<(IndexKeys, String)> = (0..(registry_engine::EMBED_BATCH * 2 + 5))
        .map(|i| {
            (
                acme(&format!("n{i}")),
                format!("release note number {i} about feature flags"),
            )
        })
        .collect();
    f.searcher.index_batch(&items).unwrap();
    assert_eq!(f.vectors.len().unwrap(), items.len() as u64);
    assert_eq!(f.text.len().unwrap(), items.len() as u64);
    let hits = f
        .searcher
        .search("feature flags", &acme_public(), &SearchOptions::with_k(100))
        .unwrap();
    assert_eq!(hits.len(), items.len());
}

#[test]
fn bad_options_are_validation_errors() {
    let f = fixture();
    for fusion in [Fusion::Convex { alpha: 1.5 }, Fusion::Rrf { k: -1.0 }] {
        let opts = SearchOptions {
            fusion,
            ..Default::default()
        };
        let err = f.searcher.search("x", &acme_public(), &opts).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ValidationFailed);
    }
    assert!(
        f.searcher
            .search("anything", &acme_public(), &SearchOptions::with_k(0))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn hits_serialise_as_explanations() {
    let f = fixture();
    f.searcher.index_batch(&corpus()).unwrap();
    let hits = f
        .searcher
        .search(
            "vegetarian lunch",
            &acme_public(),
            &SearchOptions::with_k(1),
        )
        .unwrap();
    let json = serde_json::to_value(&hits).unwrap();
    assert_eq!(json[0]["asset_id"], "lunch");
    assert_eq!(json[0]["found_by"], serde_json::json!(["text", "vector"]));
    assert_eq!(json[0]["text"]["rank"], 1);
    assert_eq!(json[0]["vector"]["rank"], 1);
}
