//! Against a real Qdrant: the index contract every vector backend keeps, and what the contract
//! does not cover (relabel). Each test skips, naming itself on stderr, unless
//! `REGISTRY_TEST_QDRANT_URL` is set.

use std::cell::RefCell;

use registry_core::asset::AssetKind;
use registry_core::retrieval::{VectorEntry, VectorIndex};
use registry_engine::contract::{
    CONTRACT_VECTOR_DIM, filter, keys, unit_vector, vector_index_contract,
};
use registry_vector_qdrant::test_support::{test_qdrant_api_key, test_qdrant_url, unique_prefix};
use registry_vector_qdrant::{QdrantOptions, QdrantVectorIndex};

fn options(url: &str, model_tag: &str) -> QdrantOptions {
    QdrantOptions {
        api_key: test_qdrant_api_key(),
        collection_prefix: unique_prefix(),
        ..QdrantOptions::new(url, CONTRACT_VECTOR_DIM, model_tag)
    }
}

/// Drops every collection the test made, on success and on a failed assertion alike.
struct Cleanup(RefCell<Vec<QdrantOptions>>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for o in self.0.take() {
            if let Ok(ix) = QdrantVectorIndex::connect(o) {
                let _ = ix.drop_collection();
            }
        }
    }
}

#[test]
fn qdrant_index_keeps_the_contract() {
    let Some(url) = test_qdrant_url("qdrant_index_keeps_the_contract") else {
        return;
    };
    let made = Cleanup(RefCell::new(vec![]));
    vector_index_contract(&|| {
        let o = options(&url, "contract-model@0000");
        made.0.borrow_mut().push(o.clone());
        Box::new(QdrantVectorIndex::connect(o).unwrap())
    });
}

#[test]
fn relabel_keeps_vectors_and_models_and_skips_unknown_ids() {
    let Some(url) = test_qdrant_url("relabel_keeps_vectors_and_models_and_skips_unknown_ids")
    else {
        return;
    };
    let o = options(&url, "m@1");
    let made = Cleanup(RefCell::new(vec![o.clone()]));
    let ix = QdrantVectorIndex::connect(o).unwrap();
    let v = unit_vector(3);
    ix.upsert(&[VectorEntry {
        keys: keys("x", AssetKind::Memory, "t:acme", &["public"], &["old"]),
        vector: v.clone(),
        model: "m@0".into(),
    }])
    .unwrap();
    let n = ix
        .relabel(&[
            keys("x", AssetKind::Memory, "t:acme", &["group:hr"], &["new"]),
            keys("missing", AssetKind::Memory, "t:acme", &["public"], &[]),
        ])
        .unwrap();
    assert_eq!(n, 1, "only the stored id is re-labelled");
    assert_eq!(ix.len().unwrap(), 1, "relabel never adds a point");
    let public = filter(&["t:acme"], &["public"], &[], &[]);
    assert!(ix.search(&v, &public, 5).unwrap().is_empty(), "old ACL");
    let hr = filter(&["t:acme"], &["group:hr"], &[], &["new"]);
    let hits = ix.search(&v, &hr, 5).unwrap();
    assert_eq!(hits.len(), 1);
    assert!((hits[0].score - 1.0).abs() < 1e-4, "the vector is kept");
    assert_eq!(
        ix.ids_not_made_by("m@1", 10).unwrap(),
        vec!["x".to_string()],
        "the model tag is kept"
    );
    drop(ix);
    drop(made);
}

#[test]
fn reopening_finds_the_same_points() {
    let Some(url) = test_qdrant_url("reopening_finds_the_same_points") else {
        return;
    };
    let o = options(&url, "m@1");
    let made = Cleanup(RefCell::new(vec![o.clone()]));
    {
        let ix = QdrantVectorIndex::connect(o.clone()).unwrap();
        ix.upsert(&[VectorEntry {
            keys: keys("x", AssetKind::Memory, "t:acme", &["public"], &[]),
            vector: unit_vector(1),
            model: "m@1".into(),
        }])
        .unwrap();
    }
    let again = QdrantVectorIndex::connect(o.clone()).unwrap();
    assert_eq!(again.len().unwrap(), 1);
    assert!(!again.server_version().is_empty());
    drop(again);
    drop(made);
}
