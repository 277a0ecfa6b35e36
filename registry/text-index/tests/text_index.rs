use std::cell::Cell;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use registry_core::asset::AssetKind;
use registry_core::retrieval::{IndexKeys, TextDoc, TextIndex, VisibilityFilter};
use registry_engine::contract::{filter, keys, text_index_contract};
use registry_text_index::{CjkAnalysis, Error, RebuildReason, TantivyTextIndex};

fn doc(id: &str, text: &str) -> TextDoc {
    TextDoc {
        keys: keys(id, AssetKind::Memory, "t:acme", &["public"], &[]),
        text: text.to_string(),
    }
}

fn acme() -> VisibilityFilter {
    filter(&["t:acme"], &["public"], &[], &[])
}

fn ids(ix: &dyn TextIndex, q: &str) -> Vec<String> {
    ix.search(q, &acme(), 100)
        .unwrap()
        .into_iter()
        .map(|h| h.asset_id)
        .collect()
}

/// Every file under `dir` whose bytes contain `needle`.
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
fn tantivy_index_keeps_the_contract() {
    let root = tempfile::tempdir().unwrap();
    let n = Cell::new(0);
    text_index_contract(&|| {
        n.set(n.get() + 1);
        Box::new(TantivyTextIndex::open(root.path().join(n.get().to_string())).unwrap())
    });
}

#[test]
fn english_analyzer_stems_and_drops_stop_words() {
    let dir = tempfile::tempdir().unwrap();
    let ix = TantivyTextIndex::open(dir.path()).unwrap();
    ix.upsert(&[
        doc("run", "She was Running the deployments"),
        doc("other", "A note about the cat"),
    ])
    .unwrap();
    assert_eq!(ids(&ix, "runs"), ["run"]);
    assert_eq!(ids(&ix, "deployment"), ["run"]);
    assert_eq!(ids(&ix, "RUNNING"), ["run"]);
    assert!(
        ids(&ix, "the a was").len() <= 1,
        "stop words alone hardly match"
    );
    assert!(ids(&ix, "the").is_empty(), "'the' is a stop word");
}

#[test]
fn bm25_prefers_the_rarer_term() {
    let dir = tempfile::tempdir().unwrap();
    let ix = TantivyTextIndex::open(dir.path()).unwrap();
    let mut docs: Vec<TextDoc> = (0..20)
        .map(|i| doc(&format!("common{i}"), "kubernetes cluster upgrade notes"))
        .collect();
    docs.push(doc("rare", "kubernetes etcd snapshot restore"));
    ix.upsert(&docs).unwrap();
    assert_eq!(ids(&ix, "kubernetes etcd")[0], "rare");
}

#[test]
fn survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let ix = TantivyTextIndex::open(dir.path()).unwrap();
        ix.upsert(&[
            doc("keep", "glacier hiking"),
            doc("drop", "glacier kayaking"),
        ])
        .unwrap();
        ix.delete(&["drop".into()]).unwrap();
    }
    let ix = TantivyTextIndex::open(dir.path()).unwrap();
    assert_eq!(ids(&ix, "glacier"), ["keep"]);
    assert_eq!(ix.len().unwrap(), 1);
}

const KILL_DIR_ENV: &str = "REGISTRY_TEXT_INDEX_KILL_DIR";

/// Child half of `acknowledged_write_survives_kill_9`; does nothing when run on its own.
#[test]
fn kill9_child_writer() {
    let Ok(dir) = std::env::var(KILL_DIR_ENV) else {
        return;
    };
    let ix = TantivyTextIndex::open(dir).unwrap();
    ix.upsert(&[doc("acked", "aurora borealis sighting")])
        .unwrap();
    println!("ACKED");
    std::thread::sleep(std::time::Duration::from_secs(120));
}

#[test]
fn acknowledged_write_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
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
    let ix = TantivyTextIndex::open(dir.path()).unwrap();
    assert_eq!(ids(&ix, "aurora"), ["acked"]);
}

/// Documents (live or deleted) whose `text` postings hold `term`, read with tantivy straight
/// from the files: what is on disk, not what a search admits.
fn docs_with_term_on_disk(dir: &Path, term: &str) -> u32 {
    let index = tantivy::Index::open_in_dir(dir).unwrap();
    let field = index.schema().get_field("text").unwrap();
    let searcher = index.reader().unwrap().searcher();
    let t = tantivy::Term::from_field_text(field, term);
    searcher
        .segment_readers()
        .iter()
        .map(|s| s.inverted_index(field).unwrap().doc_freq(&t).unwrap())
        .sum()
}

#[test]
fn compact_physically_removes_deleted_documents() {
    let dir = tempfile::tempdir().unwrap();
    let ix = TantivyTextIndex::open(dir.path()).unwrap();
    // The term dictionary is an FST, so a term is not a contiguous byte run on disk: the text
    // canary is checked through the on-disk postings, the id canary (doc store and fast field)
    // by scanning bytes.
    let canary_word = "zqxcanaryvexillum";
    let canary_id = "canary-asset-5f1e9d";
    let mut batch: Vec<TextDoc> = (0..50)
        .map(|i| doc(&format!("live{i}"), "ordinary survivor text about invoices"))
        .collect();
    batch.push(doc(canary_id, &format!("secret {canary_word} invoices")));
    ix.upsert(&batch).unwrap();
    ix.upsert(&[doc("later", "a second segment about invoices")])
        .unwrap();
    assert!(
        !files_containing(dir.path(), canary_id.as_bytes()).is_empty(),
        "the canary id should be on disk before deletion (else this test proves nothing)"
    );
    assert_eq!(docs_with_term_on_disk(dir.path(), canary_word), 1);

    ix.delete(&[canary_id.to_string()]).unwrap();
    assert!(ids(&ix, canary_word).is_empty());
    assert_eq!(
        docs_with_term_on_disk(dir.path(), canary_word),
        1,
        "before compaction a deleted document is only marked deleted"
    );
    ix.compact().unwrap();

    assert_eq!(
        files_containing(dir.path(), canary_id.as_bytes()),
        Vec::<String>::new()
    );
    assert_eq!(docs_with_term_on_disk(dir.path(), canary_word), 0);
    assert_eq!(ix.segment_count(), 1);
    assert_eq!(ids(&ix, "invoices").len(), 51);
    drop(ix);
    let ix = TantivyTextIndex::open(dir.path()).unwrap();
    assert_eq!(ids(&ix, "invoices").len(), 51, "compacted index reopens");
}

#[test]
fn a_batch_is_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let ix = TantivyTextIndex::open(dir.path()).unwrap();
    let docs: Vec<TextDoc> = (0..2000)
        .map(|i| {
            doc(
                &format!("d{i}"),
                &format!("bulk document number {i} about harbours"),
            )
        })
        .collect();
    ix.upsert(&docs).unwrap();
    assert_eq!(ix.len().unwrap(), 2000);
    // One commit makes at most one segment per indexing thread.
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    assert!(
        ix.segment_count() <= threads,
        "{} segments",
        ix.segment_count()
    );
}

#[test]
fn concurrent_readers_and_writers() {
    let dir = tempfile::tempdir().unwrap();
    let ix = Arc::new(TantivyTextIndex::open(dir.path()).unwrap());
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let ix = ix.clone();
            std::thread::spawn(move || {
                for i in 0..20 {
                    ix.upsert(&[doc(&format!("w{w}-{i}"), "parallel marmot sighting")])
                        .unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let ix = ix.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    ix.search("marmot", &acme(), 10).unwrap();
                }
            })
        })
        .collect();
    for t in writers.into_iter().chain(readers) {
        t.join().unwrap();
    }
    assert_eq!(ix.len().unwrap(), 40);
    ix.compact().unwrap();
    assert_eq!(ids(&*ix, "marmot").len(), 40);
}

#[test]
fn keys_with_unusual_characters_filter_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let ix = TantivyTextIndex::open(dir.path()).unwrap();
    let k = IndexKeys {
        asset_id: "id with spaces/and:colons".into(),
        kind: AssetKind::Summary,
        scope_key: "t:acme/u:ann smith".into(),
        acl_keys: vec!["user:Ann Smith".into()],
        tags: vec!["topic:Ünïcode".into()],
    };
    ix.upsert(&[TextDoc {
        keys: k.clone(),
        text: "penguin colony".into(),
    }])
    .unwrap();
    let f = filter(
        &["t:acme/u:ann smith"],
        &["user:Ann Smith"],
        &[AssetKind::Summary],
        &["topic:Ünïcode"],
    );
    let hits = ix.search("penguin", &f, 5).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].asset_id, k.asset_id);
    let lower = filter(&["t:acme/u:ann smith"], &["user:ann smith"], &[], &[]);
    assert!(
        ix.search("penguin", &lower, 5).unwrap().is_empty(),
        "keys are case-sensitive"
    );
    ix.delete(std::slice::from_ref(&k.asset_id)).unwrap();
    assert!(ix.search("penguin", &f, 5).unwrap().is_empty());
}

#[test]
fn deferred_entries_are_seen_by_the_next_search_and_durable_after_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let ix = TantivyTextIndex::open(dir.path()).unwrap();
    assert_eq!(
        ix.durable_until().unwrap(),
        None,
        "a new index knows nothing"
    );
    ix.upsert_deferred(&[doc("a", "the walrus sings at dawn")])
        .unwrap();
    assert!(ix.has_pending());
    // Read your writes: the search commits what is pending first.
    assert_eq!(ids(&ix, "walrus"), ["a"]);
    assert!(!ix.has_pending());
    let first = ix
        .durable_until()
        .unwrap()
        .expect("a commit records its time");
    ix.upsert_deferred(&[doc("b", "the walrus naps at noon")])
        .unwrap();
    ix.flush().unwrap();
    let second = ix.durable_until().unwrap().unwrap();
    assert!(second >= first);
    // Replacing by id, deferred, leaves one entry.
    ix.upsert_deferred(&[doc("b", "the heron naps at noon")])
        .unwrap();
    assert_eq!(ids(&ix, "walrus"), ["a"]);
    assert_eq!(ids(&ix, "heron"), ["b"]);
    // A later delete or plain upsert of a deferred id wins over the deferred entry.
    ix.upsert_deferred(&[doc("d", "the lynx hides in snow")])
        .unwrap();
    ix.delete(&["d".to_string()]).unwrap();
    assert!(ids(&ix, "lynx").is_empty());
    ix.upsert_deferred(&[doc("e", "the marmot whistles")])
        .unwrap();
    ix.upsert(&[doc("e", "the ibex climbs")]).unwrap();
    assert!(ids(&ix, "marmot").is_empty());
    assert_eq!(ids(&ix, "ibex"), ["e"]);
    // Compaction commits pending entries before it retires the writer.
    ix.upsert_deferred(&[doc("c", "the otter juggles pebbles")])
        .unwrap();
    ix.compact().unwrap();
    drop(ix);
    let ix = TantivyTextIndex::open(dir.path()).unwrap();
    assert_eq!(ids(&ix, "otter"), ["c"]);
}

// ---- Stored format ----

/// An index as format 1 wrote it: the same fields, the text analysed by `registry_en`.
fn write_format_1_index(dir: &Path) {
    use tantivy::schema::{
        FAST, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
    };
    use tantivy::tokenizer::{
        Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter,
        TextAnalyzer,
    };
    let mut b = Schema::builder();
    let asset_id = b.add_text_field("asset_id", STRING | STORED | FAST);
    for f in ["kind", "scope_key", "acl", "tag"] {
        b.add_text_field(f, STRING);
    }
    let text = b.add_text_field(
        "text",
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("registry_en")
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        ),
    );
    let index = tantivy::Index::create_in_dir(dir, b.build()).unwrap();
    index.tokenizers().register(
        "registry_en",
        TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(64))
            .filter(LowerCaser)
            .filter(StopWordFilter::new(Language::English).unwrap())
            .filter(Stemmer::new(Language::English))
            .build(),
    );
    let mut w: tantivy::IndexWriter = index.writer(15_000_000).unwrap();
    let mut d = tantivy::TantivyDocument::default();
    d.add_text(asset_id, "old");
    d.add_text(text, "项目周报 weekly report");
    w.add_document(d).unwrap();
    w.commit().unwrap();
}

fn rebuild_reason(r: Result<TantivyTextIndex, Error>) -> RebuildReason {
    match r {
        Err(Error::NeedsRebuild { reason, .. }) => reason,
        other => panic!("expected NeedsRebuild, got {other:?}"),
    }
}

#[test]
fn an_index_of_format_1_is_refused_until_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    write_format_1_index(dir.path());
    std::fs::write(dir.path().join("notes.txt"), "not the index's").unwrap();
    assert_eq!(
        rebuild_reason(TantivyTextIndex::open(dir.path())),
        RebuildReason::OlderFormat { found: 1 }
    );
    let ix = TantivyTextIndex::rebuild_empty(dir.path()).unwrap();
    assert!(ix.needs_rebuild());
    assert_eq!(ix.format_version(), registry_text_index::FORMAT_VERSION);
    assert_eq!(ix.len().unwrap(), 0, "nothing of the old index is left");
    ix.upsert(&[doc("a", "项目周报")]).unwrap();
    drop(ix);
    // A crash before the rebuild finished: the partial index is refused, and rebuilt again.
    assert_eq!(
        rebuild_reason(TantivyTextIndex::open(dir.path())),
        RebuildReason::Interrupted
    );
    let ix = TantivyTextIndex::rebuild_empty(dir.path()).unwrap();
    assert_eq!(ix.len().unwrap(), 0);
    ix.upsert(&[doc("new", "项目周报 weekly report")]).unwrap();
    ix.upsert_deferred(&[doc("deferred", "进度报告")]).unwrap();
    ix.finish_rebuild().unwrap();
    assert!(!ix.needs_rebuild());
    drop(ix);
    let ix = TantivyTextIndex::open(dir.path()).unwrap();
    assert!(!ix.needs_rebuild());
    assert_eq!(ids(&ix, "周报"), ["new"]);
    assert_eq!(ids(&ix, "报告"), ["deferred"]);
    assert_eq!(ix.len().unwrap(), 2);
    assert!(dir.path().join("notes.txt").exists(), "foreign files stay");
}

#[test]
fn an_index_of_another_cjk_analysis_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(TantivyTextIndex::open_with(dir.path(), CjkAnalysis::Bigrams).unwrap());
    assert_eq!(
        rebuild_reason(TantivyTextIndex::open(dir.path())),
        RebuildReason::OtherAnalysis {
            found: "bigrams".into()
        }
    );
    let ix = TantivyTextIndex::open_with(dir.path(), CjkAnalysis::Bigrams).unwrap();
    assert_eq!(ix.analysis(), CjkAnalysis::Bigrams);
}

#[test]
fn a_rebuild_waits_for_no_live_writer() {
    let dir = tempfile::tempdir().unwrap();
    let ix = TantivyTextIndex::open(dir.path()).unwrap();
    ix.upsert(&[doc("a", "glacier")]).unwrap();
    match TantivyTextIndex::rebuild_empty(dir.path()) {
        Err(Error::Tantivy(tantivy::TantivyError::LockFailure(..))) => {}
        other => panic!("expected a lock failure, got {other:?}"),
    }
    assert!(
        !dir.path()
            .join(registry_text_index::REBUILD_MARKER)
            .exists()
    );
    assert_eq!(ids(&ix, "glacier"), ["a"], "the live index is untouched");
}

#[test]
fn an_index_of_a_newer_format_is_not_ours_to_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    write_format_1_index(dir.path());
    let meta = dir.path().join("meta.json");
    let s = std::fs::read_to_string(&meta).unwrap();
    std::fs::write(&meta, s.replace("registry_en", "registry_v99_words")).unwrap();
    match TantivyTextIndex::open(dir.path()) {
        Err(Error::Schema(_)) => {}
        other => panic!("expected a schema error, got {other:?}"),
    }
}
