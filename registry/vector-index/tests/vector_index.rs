use std::cell::Cell;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use registry_core::ErrorCode;
use registry_core::asset::AssetKind;
use registry_core::retrieval::{VectorEntry, VectorIndex, VisibilityFilter};
use registry_engine::contract::{
    CONTRACT_VECTOR_DIM, filter, keys, unit_vector, vector_index_contract,
};
use registry_vector_index::EmbeddedVectorIndex;

const DIM: usize = CONTRACT_VECTOR_DIM;

fn entry(id: &str, scope: &str, vector: Vec<f32>) -> VectorEntry {
    VectorEntry {
        keys: keys(id, AssetKind::Memory, scope, &["public"], &[]),
        vector,
        model: "test-model@1".into(),
    }
}

fn acme() -> VisibilityFilter {
    filter(&["t:acme"], &["public"], &[], &[])
}

fn ids(ix: &dyn VectorIndex, q: &[f32]) -> Vec<String> {
    ix.search(q, &acme(), 1000)
        .unwrap()
        .into_iter()
        .map(|h| h.asset_id)
        .collect()
}

fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = vec![];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            found.push(path.display().to_string());
        }
    }
    found
}

#[test]
fn embedded_index_keeps_the_contract() {
    let root = tempfile::tempdir().unwrap();
    let n = Cell::new(0);
    vector_index_contract(&|| {
        n.set(n.get() + 1);
        Box::new(EmbeddedVectorIndex::open(root.path().join(n.get().to_string()), DIM).unwrap())
    });
}

#[test]
fn survives_reopen_with_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let q = unit_vector(7);
    let before;
    {
        let ix = EmbeddedVectorIndex::open(dir.path(), DIM).unwrap();
        let entries: Vec<VectorEntry> = (0..100)
            .map(|i| {
                entry(
                    &format!("e{i}"),
                    if i % 2 == 0 { "t:acme" } else { "t:globex" },
                    unit_vector(i),
                )
            })
            .collect();
        ix.upsert(&entries).unwrap();
        ix.delete(&["e0".into(), "e2".into(), "e3".into()]).unwrap();
        ix.upsert(&[entry("e4", "t:acme", unit_vector(999))])
            .unwrap();
        before = ix.search(&q, &acme(), 1000).unwrap();
        assert_eq!(ix.len().unwrap(), 97);
    }
    let ix = EmbeddedVectorIndex::open(dir.path(), DIM).unwrap();
    assert_eq!(ix.len().unwrap(), 97);
    assert_eq!(ix.partition_count(), 2);
    let after = ix.search(&q, &acme(), 1000).unwrap();
    assert_eq!(before, after);
}

#[test]
fn reopening_with_another_dimension_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(EmbeddedVectorIndex::open(dir.path(), DIM).unwrap());
    let err = EmbeddedVectorIndex::open(dir.path(), DIM + 1).unwrap_err();
    assert!(
        matches!(err, registry_vector_index::Error::Dimension { .. }),
        "{err}"
    );
    let core: registry_core::CoreError = err.into();
    assert_eq!(core.code(), ErrorCode::ValidationFailed);
}

#[test]
fn wrong_dimension_upsert_is_a_validation_error() {
    let dir = tempfile::tempdir().unwrap();
    let ix = EmbeddedVectorIndex::open(dir.path(), DIM).unwrap();
    let err = ix
        .upsert(&[entry("x", "t:acme", vec![0.5; DIM - 1])])
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ValidationFailed);
}

const KILL_DIR_ENV: &str = "REGISTRY_VECTOR_INDEX_KILL_DIR";

/// Child half of `acknowledged_write_survives_kill_9`, which runs it (with `--ignored`) in a
/// process it then kills; run on its own it has no directory to write to and fails.
#[test]
#[ignore = "the child process of acknowledged_write_survives_kill_9"]
fn kill9_child_writer() {
    let dir = std::env::var(KILL_DIR_ENV)
        .expect("run as the child of acknowledged_write_survives_kill_9, which sets the directory");
    let ix = EmbeddedVectorIndex::open(dir, DIM).unwrap();
    ix.upsert(&[entry("acked", "t:acme", unit_vector(77))])
        .unwrap();
    ix.delete(&["pre".into()]).unwrap();
    println!("ACKED");
    std::thread::sleep(std::time::Duration::from_secs(120));
}

#[test]
fn acknowledged_write_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    {
        let ix = EmbeddedVectorIndex::open(dir.path(), DIM).unwrap();
        ix.upsert(&[entry("pre", "t:acme", unit_vector(76))])
            .unwrap();
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "--ignored",
            "kill9_child_writer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(KILL_DIR_ENV, dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let acked = out.lines().any(|l| l.unwrap().contains("ACKED"));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(acked, "child never acknowledged its write");
    let ix = EmbeddedVectorIndex::open(dir.path(), DIM).unwrap();
    assert_eq!(ids(&ix, &unit_vector(77)), ["acked"]);
}

#[test]
fn compact_physically_removes_deleted_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let ix = EmbeddedVectorIndex::open(dir.path(), DIM).unwrap();
    let canary_id = "canary-asset-8b2c41";
    // A float pattern no real vector has: every component has the bits 0x3E5A5A5A.
    let canary_vec = vec![f32::from_bits(0x3E5A_5A5A); DIM];
    let canary_bytes: Vec<u8> = canary_vec.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut batch: Vec<VectorEntry> = (0..200)
        .map(|i| entry(&format!("live{i}"), "t:acme", unit_vector(i)))
        .collect();
    batch.insert(100, entry(canary_id, "t:acme", canary_vec.clone()));
    ix.upsert(&batch).unwrap();
    assert!(
        !files_containing(dir.path(), &canary_bytes).is_empty(),
        "canary vector on disk"
    );
    assert!(
        !files_containing(dir.path(), canary_id.as_bytes()).is_empty(),
        "canary id on disk"
    );

    ix.delete(&[canary_id.to_string()]).unwrap();
    assert!(!ids(&ix, &canary_vec).contains(&canary_id.to_string()));
    ix.compact().unwrap();

    assert_eq!(
        files_containing(dir.path(), &canary_bytes),
        Vec::<String>::new()
    );
    assert_eq!(
        files_containing(dir.path(), canary_id.as_bytes()),
        Vec::<String>::new()
    );
    assert_eq!(ix.len().unwrap(), 200);
    drop(ix);
    let ix = EmbeddedVectorIndex::open(dir.path(), DIM).unwrap();
    assert_eq!(ix.len().unwrap(), 200, "compacted store reopens");
    assert_eq!(ids(&ix, &unit_vector(5))[0], "live5");
}

#[test]
fn compact_gives_space_back_once_most_entries_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let ix = EmbeddedVectorIndex::open(dir.path(), DIM).unwrap();
    let batch: Vec<VectorEntry> = (0..400)
        .map(|i| entry(&format!("e{i}"), "t:acme", unit_vector(i)))
        .collect();
    ix.upsert(&batch).unwrap();
    ix.compact().unwrap();
    let file = dir.path().join("vectors.sqlite3");
    let full = std::fs::metadata(&file).unwrap().len();
    let gone: Vec<String> = (0..300).map(|i| format!("e{i}")).collect();
    ix.delete(&gone).unwrap();
    ix.compact().unwrap();
    let after = std::fs::metadata(&file).unwrap().len();
    assert!(after * 2 < full, "{after} bytes after, {full} before");
    assert!(files_containing(dir.path(), b"e17").is_empty());
    assert_eq!(ix.len().unwrap(), 100);
}

#[test]
fn readers_run_beside_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let ix = Arc::new(EmbeddedVectorIndex::open(dir.path(), DIM).unwrap());
    let writer = {
        let ix = ix.clone();
        std::thread::spawn(move || {
            for i in 0..50u64 {
                ix.upsert(&[entry(&format!("w{i}"), "t:acme", unit_vector(i))])
                    .unwrap();
                if i % 5 == 4 {
                    ix.delete(&[format!("w{}", i - 2)]).unwrap();
                }
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let ix = ix.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    let hits = ix.search(&unit_vector(r * 1000 + i), &acme(), 5).unwrap();
                    assert!(hits.len() <= 5);
                }
            })
        })
        .collect();
    writer.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(ix.len().unwrap(), 40);
}

/// Deterministic pseudo-random unit vectors (no test depends on a seed's luck).
fn unit_vectors(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut x = seed;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((x >> 33) as f32 / (1u64 << 31) as f32) - 0.5
    };
    (0..n)
        .map(|_| {
            let mut v: Vec<f32> = (0..dim).map(|_| next()).collect();
            let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
            v.iter_mut().for_each(|a| *a /= norm);
            v
        })
        .collect()
}

#[test]
fn large_partitions_go_through_int8_first_and_still_return_the_exact_top_k() {
    let dim = 384;
    let dir = tempfile::tempdir().unwrap();
    let ix = EmbeddedVectorIndex::open(dir.path(), dim).unwrap();
    let vecs = unit_vectors(6000, dim, 7);
    let entries: Vec<VectorEntry> = vecs
        .iter()
        .enumerate()
        .map(|(i, v)| entry(&format!("v{i:05}"), "t:acme", v.clone()))
        .collect();
    ix.upsert(&entries).unwrap();
    // Remove some rows so the int8 copy is exercised after swaps too.
    let gone: Vec<String> = (0..6000).step_by(7).map(|i| format!("v{i:05}")).collect();
    ix.delete(&gone).unwrap();
    for (qi, q) in unit_vectors(25, dim, 99).iter().enumerate() {
        // Near one stored vector, as real queries are near their answers.
        let target = &vecs[(qi * 211 + 3) % 6000];
        let q: Vec<f32> = q.iter().zip(target).map(|(a, b)| 0.3 * a + b).collect();
        let n = q.iter().map(|a| a * a).sum::<f32>().sqrt();
        let q: Vec<f32> = q.iter().map(|a| a / n).collect();
        let mut exact: Vec<(f32, String)> = vecs
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 7 != 0)
            .map(|(i, v)| (registry_vector_index::dot(&q, v), format!("v{i:05}")))
            .collect();
        exact.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let got = ix.search(&q, &acme(), 10).unwrap();
        let got_ids: Vec<&str> = got.iter().map(|h| h.asset_id.as_str()).collect();
        let want: Vec<&str> = exact[..10].iter().map(|(_, id)| id.as_str()).collect();
        assert_eq!(got_ids, want, "query {qi}");
        for (h, (s, _)) in got.iter().zip(&exact) {
            assert!((h.score - s).abs() < 1e-5, "scores are the exact cosine");
        }
    }
}
