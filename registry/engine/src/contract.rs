//! The contract every index backend keeps, as plain functions that panic on a violation.
//!
//! A backend crate calls them from its own tests with a factory that returns a *fresh, empty*
//! index on every call:
//!
//! ```text
//! #[test]
//! fn contract() {
//!     let root = tempfile::tempdir().unwrap();
//!     let n = std::cell::Cell::new(0);
//!     registry_engine::contract::text_index_contract(&|| {
//!         n.set(n.get() + 1);
//!         Box::new(MyIndex::open(root.path().join(n.get().to_string())).unwrap())
//!     });
//! }
//! ```
//!
//! The checks follow [`VisibilityFilter::admits`], the reference semantics: tenant isolation
//! (even for a query equal to another tenant's text or vector), ACL keys, kinds, tags, deletion,
//! replacement, `k`, ordering. The vector checks use synthetic unit vectors of
//! [`CONTRACT_VECTOR_DIM`] dimensions: they test the index, not a model.

use std::collections::BTreeSet;

use registry_core::asset::{AssetId, AssetKind};
use registry_core::retrieval::{
    IndexKeys, ScoredId, TextDoc, TextIndex, VectorEntry, VectorIndex, VisibilityFilter,
};

/// Dimension of the vectors the vector contract writes; the factory must accept it.
pub const CONTRACT_VECTOR_DIM: usize = 16;

const MODEL: &str = "contract-model@0000";

pub fn keys(id: &str, kind: AssetKind, scope: &str, acl: &[&str], tags: &[&str]) -> IndexKeys {
    IndexKeys {
        asset_id: id.to_string(),
        kind,
        scope_key: scope.to_string(),
        acl_keys: acl.iter().map(|s| s.to_string()).collect(),
        tags: tags.iter().map(|s| s.to_string()).collect(),
    }
}

pub fn filter(
    scopes: &[&str],
    acl: &[&str],
    kinds: &[AssetKind],
    tags: &[&str],
) -> VisibilityFilter {
    VisibilityFilter {
        scope_keys: scopes.iter().map(|s| s.to_string()).collect(),
        acl_keys: acl.iter().map(|s| s.to_string()).collect(),
        kinds: kinds.to_vec(),
        any_tags: tags.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn id_set(hits: &[ScoredId]) -> BTreeSet<String> {
    hits.iter().map(|h| h.asset_id.clone()).collect()
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

fn assert_sorted(check: &str, hits: &[ScoredId]) {
    for w in hits.windows(2) {
        assert!(
            w[0].score >= w[1].score,
            "{check}: results not sorted best first: {} ({}) before {} ({})",
            w[0].asset_id,
            w[0].score,
            w[1].asset_id,
            w[1].score
        );
    }
    let unique = id_set(hits);
    assert_eq!(
        unique.len(),
        hits.len(),
        "{check}: an asset id appears twice in one result list: {hits:?}"
    );
}

/// Small deterministic generator (xorshift64*), so the contract needs no randomness crate and
/// every run checks the same cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
    /// A random non-empty subset of `pool`.
    fn subset<'a>(&mut self, pool: &[&'a str], allow_empty: bool) -> Vec<&'a str> {
        loop {
            let s: Vec<&str> = pool
                .iter()
                .copied()
                .filter(|_| self.below(2) == 0)
                .collect();
            if allow_empty || !s.is_empty() {
                return s;
            }
        }
    }
}

const SCOPES: [&str; 4] = ["t:acme", "t:acme/p:web", "t:acme2", "t:globex"];
const ACLS: [&str; 4] = ["public", "group:hr", "user:ann", "role:admin"];
const TAGS: [&str; 3] = ["class:semantic", "class:episodic", "lang:en"];
const SENS: [&str; 4] = [
    "sens:public",
    "sens:internal",
    "sens:confidential",
    "sens:secret",
];
const PURPOSES: [&str; 3] = ["purpose:*", "purpose:hr", "purpose:support"];
const KINDS: [AssetKind; 3] = [AssetKind::Memory, AssetKind::Document, AssetKind::Chunk];

fn random_keys(rng: &mut Rng, i: usize) -> IndexKeys {
    let scope = SCOPES[rng.below(SCOPES.len())];
    let acl = rng.subset(&ACLS, false);
    let mut tags = rng.subset(&TAGS, true);
    // Governance tags as domains write them: one sensitivity, the purposes (or any); a few
    // entries carry none, as an index older than them would.
    if rng.below(8) != 0 {
        tags.push(SENS[rng.below(SENS.len())]);
        tags.extend(rng.subset(&PURPOSES, false));
    }
    keys(
        &format!("r{i:03}"),
        KINDS[rng.below(KINDS.len())],
        scope,
        &acl,
        &tags,
    )
}

fn random_filter(rng: &mut Rng) -> VisibilityFilter {
    let scopes = rng.subset(&SCOPES, true);
    let acl = rng.subset(&ACLS, true);
    let kinds: Vec<AssetKind> = KINDS
        .iter()
        .copied()
        .filter(|_| rng.below(3) == 0)
        .collect();
    let tags = if rng.below(2) == 0 {
        vec![]
    } else {
        rng.subset(&TAGS, false)
    };
    let mut f = filter(&scopes, &acl, &kinds, &tags);
    if rng.below(2) == 0 {
        let clearance = rng.below(SENS.len());
        f.sensitivity_tags = SENS[..=clearance].iter().map(|s| s.to_string()).collect();
        f.own_scopes = rng
            .subset(&SCOPES, true)
            .into_iter()
            .map(String::from)
            .collect();
        f.purpose_tags = rng
            .subset(&PURPOSES, false)
            .into_iter()
            .map(String::from)
            .collect();
    }
    f
}

// ---------------------------------------------------------------------------------------------
// Text

fn doc(k: IndexKeys, text: &str) -> TextDoc {
    TextDoc {
        keys: k,
        text: text.to_string(),
    }
}

fn tsearch(
    ix: &dyn TextIndex,
    check: &str,
    q: &str,
    f: &VisibilityFilter,
    k: usize,
) -> Vec<ScoredId> {
    let hits = ix
        .search(q, f, k)
        .unwrap_or_else(|e| panic!("{check}: text search {q:?} failed: {e}"));
    assert!(
        hits.len() <= k,
        "{check}: asked for {k} hits, got {}",
        hits.len()
    );
    assert_sorted(check, &hits);
    hits
}

fn tupsert(ix: &dyn TextIndex, check: &str, docs: &[TextDoc]) {
    ix.upsert(docs)
        .unwrap_or_else(|e| panic!("{check}: text upsert failed: {e}"));
}

/// Runs every text-index check, each on a fresh index from `make`.
pub fn text_index_contract(make: &dyn Fn() -> Box<dyn TextIndex>) {
    text_tenant_isolation(&*make());
    text_acl(&*make());
    text_kind_and_tags(&*make());
    text_delete(&*make());
    text_upsert_replaces(&*make());
    text_k_and_order(&*make());
    text_query_syntax_never_errors(&*make());
    text_matches_reference_filter(&*make());
}

fn text_tenant_isolation(ix: &dyn TextIndex) {
    let c = "text/tenant-isolation";
    let secret = "acme quarterly revenue forecast confidential merger";
    tupsert(
        ix,
        c,
        &[
            doc(
                keys("a1", AssetKind::Memory, "t:acme", &["public"], &[]),
                secret,
            ),
            doc(
                keys("a2", AssetKind::Memory, "t:acme/p:web", &["public"], &[]),
                secret,
            ),
            doc(
                keys("b1", AssetKind::Memory, "t:globex", &["public"], &[]),
                "globex revenue notes",
            ),
            doc(
                keys("c1", AssetKind::Memory, "t:acme2", &["public"], &[]),
                "unrelated gardening tips",
            ),
        ],
    );
    let own = filter(&["t:acme"], &["public"], &[], &[]);
    assert_eq!(
        id_set(&tsearch(ix, c, secret, &own, 10)),
        set(&["a1"]),
        "{c}: tenant A must find its own entry (and not its project's, which is another scope key)"
    );
    for scopes in [
        &["t:globex"][..],
        &["t:acme2"],
        &["t:globex", "t:acme2"],
        &["t:ac"],
        &["acme"],
    ] {
        let f = filter(scopes, &["public", "group:hr", "user:ann"], &[], &[]);
        let hits = tsearch(ix, c, secret, &f, 10);
        assert!(
            !hits.iter().any(|h| h.asset_id.starts_with('a')),
            "{c}: scopes {scopes:?} saw tenant acme's entries with acme's exact text: {hits:?}"
        );
    }
    let none = filter(&[], &["public"], &[], &[]);
    assert!(
        tsearch(ix, c, secret, &none, 10).is_empty(),
        "{c}: a filter without scope keys must admit nothing"
    );
}

fn text_acl(ix: &dyn TextIndex) {
    let c = "text/acl";
    let t = "onboarding checklist for new laptops";
    tupsert(
        ix,
        c,
        &[
            doc(
                keys("pub", AssetKind::Document, "t:acme", &["public"], &[]),
                t,
            ),
            doc(
                keys("hr", AssetKind::Document, "t:acme", &["group:hr"], &[]),
                t,
            ),
            doc(
                keys(
                    "mixed",
                    AssetKind::Document,
                    "t:acme",
                    &["user:ann", "group:hr"],
                    &[],
                ),
                t,
            ),
        ],
    );
    for (acl, want) in [
        (&["public"][..], &["pub"][..]),
        (&["group:hr"], &["hr", "mixed"]),
        (&["user:ann"], &["mixed"]),
        (&["user:bob"], &[]),
        (&["public", "user:ann"], &["pub", "mixed"]),
        (&[], &[]),
        (&["group:h"], &[]),
    ] {
        let f = filter(&["t:acme"], acl, &[], &[]);
        assert_eq!(
            id_set(&tsearch(ix, c, t, &f, 10)),
            set(want),
            "{c}: ACL keys {acl:?}"
        );
    }
}

fn text_kind_and_tags(ix: &dyn TextIndex) {
    let c = "text/kind-and-tags";
    let t = "deployment runbook rollback steps";
    tupsert(
        ix,
        c,
        &[
            doc(
                keys(
                    "m",
                    AssetKind::Memory,
                    "t:acme",
                    &["public"],
                    &["class:semantic"],
                ),
                t,
            ),
            doc(
                keys(
                    "d",
                    AssetKind::Document,
                    "t:acme",
                    &["public"],
                    &["class:episodic", "lang:en"],
                ),
                t,
            ),
            doc(keys("ch", AssetKind::Chunk, "t:acme", &["public"], &[]), t),
        ],
    );
    for (kinds, tags, want) in [
        (&[][..], &[][..], &["m", "d", "ch"][..]),
        (&[AssetKind::Memory], &[], &["m"]),
        (&[AssetKind::Memory, AssetKind::Chunk], &[], &["m", "ch"]),
        (&[AssetKind::SkillVersion], &[], &[]),
        (&[], &["class:semantic"], &["m"]),
        (&[], &["class:semantic", "lang:en"], &["m", "d"]),
        (&[], &["class"], &[]),
        (&[AssetKind::Document], &["class:semantic"], &[]),
        (&[AssetKind::Document], &["lang:en"], &["d"]),
    ] {
        let f = filter(&["t:acme"], &["public"], kinds, tags);
        assert_eq!(
            id_set(&tsearch(ix, c, t, &f, 10)),
            set(want),
            "{c}: kinds {kinds:?} tags {tags:?}"
        );
    }
}

fn text_delete(ix: &dyn TextIndex) {
    let c = "text/delete";
    let t = "incident postmortem database failover";
    tupsert(
        ix,
        c,
        &[
            doc(
                keys("keep", AssetKind::Memory, "t:acme", &["public"], &[]),
                t,
            ),
            doc(
                keys("gone", AssetKind::Memory, "t:acme", &["public"], &[]),
                t,
            ),
        ],
    );
    let f = filter(&["t:acme"], &["public"], &[], &[]);
    assert_eq!(ix.len().unwrap(), 2, "{c}: len after two upserts");
    ix.delete(&["gone".to_string()])
        .unwrap_or_else(|e| panic!("{c}: delete failed: {e}"));
    assert_eq!(
        id_set(&tsearch(ix, c, t, &f, 10)),
        set(&["keep"]),
        "{c}: right after delete"
    );
    assert_eq!(ix.len().unwrap(), 1, "{c}: len after delete");
    ix.delete(&["never-existed".to_string()])
        .unwrap_or_else(|e| panic!("{c}: deleting an unknown id must succeed: {e}"));
    ix.delete(&[])
        .unwrap_or_else(|e| panic!("{c}: empty delete: {e}"));
    ix.compact()
        .unwrap_or_else(|e| panic!("{c}: compact failed: {e}"));
    assert_eq!(
        id_set(&tsearch(ix, c, t, &f, 10)),
        set(&["keep"]),
        "{c}: after compact"
    );
    ix.delete(&["keep".to_string()]).unwrap();
    ix.compact()
        .unwrap_or_else(|e| panic!("{c}: compact of an empty index: {e}"));
    assert!(
        tsearch(ix, c, t, &f, 10).is_empty(),
        "{c}: everything deleted"
    );
    assert!(ix.is_empty().unwrap(), "{c}: is_empty after deleting all");
}

fn text_upsert_replaces(ix: &dyn TextIndex) {
    let c = "text/upsert-replaces";
    let f = filter(&["t:acme"], &["public"], &[], &[]);
    tupsert(
        ix,
        c,
        &[doc(
            keys("x", AssetKind::Memory, "t:acme", &["public"], &[]),
            "violin lessons",
        )],
    );
    tupsert(
        ix,
        c,
        &[doc(
            keys("x", AssetKind::Memory, "t:acme", &["public"], &[]),
            "piano tuning",
        )],
    );
    assert!(
        tsearch(ix, c, "violin", &f, 10).is_empty(),
        "{c}: old text still matches"
    );
    assert_eq!(
        id_set(&tsearch(ix, c, "piano", &f, 10)),
        set(&["x"]),
        "{c}: new text"
    );
    assert_eq!(
        ix.len().unwrap(),
        1,
        "{c}: replacement must not add an entry"
    );
    // Moving to another scope and ACL: the old keys no longer admit it.
    tupsert(
        ix,
        c,
        &[doc(
            keys("x", AssetKind::Memory, "t:globex", &["group:hr"], &[]),
            "piano tuning",
        )],
    );
    assert!(
        tsearch(ix, c, "piano", &f, 10).is_empty(),
        "{c}: old scope still admits it"
    );
    let g = filter(&["t:globex"], &["group:hr"], &[], &[]);
    assert_eq!(
        id_set(&tsearch(ix, c, "piano", &g, 10)),
        set(&["x"]),
        "{c}: new scope"
    );
    // Within one batch the last entry for an id wins.
    tupsert(
        ix,
        c,
        &[
            doc(
                keys("y", AssetKind::Memory, "t:acme", &["public"], &[]),
                "cello strings",
            ),
            doc(
                keys("y", AssetKind::Memory, "t:acme", &["public"], &[]),
                "harp pedals",
            ),
        ],
    );
    assert!(
        tsearch(ix, c, "cello", &f, 10).is_empty(),
        "{c}: first of a batch kept"
    );
    assert_eq!(
        id_set(&tsearch(ix, c, "harp", &f, 10)),
        set(&["y"]),
        "{c}: last of a batch"
    );
    assert_eq!(ix.len().unwrap(), 2, "{c}: len");
}

fn text_k_and_order(ix: &dyn TextIndex) {
    let c = "text/k-and-order";
    let docs: Vec<TextDoc> = (0..30)
        .map(|i| {
            let body = format!(
                "{} filler words about other things",
                "lantern ".repeat(1 + i % 5)
            );
            doc(
                keys(
                    &format!("d{i:02}"),
                    AssetKind::Chunk,
                    "t:acme",
                    &["public"],
                    &[],
                ),
                &body,
            )
        })
        .collect();
    tupsert(ix, c, &docs);
    let f = filter(&["t:acme"], &["public"], &[], &[]);
    assert_eq!(tsearch(ix, c, "lantern", &f, 5).len(), 5, "{c}: k=5");
    assert!(tsearch(ix, c, "lantern", &f, 0).is_empty(), "{c}: k=0");
    assert_eq!(
        tsearch(ix, c, "lantern", &f, 100).len(),
        30,
        "{c}: k above the match count"
    );
    let top = tsearch(ix, c, "lantern", &f, 6);
    // Five copies of the term beat one copy in equally long documents under BM25.
    assert!(
        top[0].score > tsearch(ix, c, "lantern", &f, 100).last().unwrap().score,
        "{c}: best and worst hit score the same"
    );
    assert!(
        tsearch(ix, c, "absentword", &f, 10).is_empty(),
        "{c}: no match"
    );
}

fn text_query_syntax_never_errors(ix: &dyn TextIndex) {
    let c = "text/query-syntax";
    tupsert(
        ix,
        c,
        &[doc(
            keys("q", AssetKind::Memory, "t:acme", &["public"], &[]),
            "error code AND retry (timeout)",
        )],
    );
    let f = filter(&["t:acme"], &["public"], &[], &[]);
    for q in [
        "",
        " ",
        "\"",
        "\"unclosed phrase",
        ":",
        "a:b",
        "scope_key:t:globex",
        "(",
        ")",
        "((retry",
        "AND",
        "OR NOT",
        "retry AND",
        "+-!^~*?",
        "[1 TO 2]",
        "{}",
        "\\",
        "timeout~2",
        "*",
        "asset_id:q",
        "日本語 テキスト",
        "retry\u{0}",
    ] {
        ix.search(q, &f, 5)
            .unwrap_or_else(|e| panic!("{c}: query {q:?} must not fail: {e}"));
    }
    assert_eq!(
        id_set(&tsearch(ix, c, "(retry) AND \"timeout", &f, 5)),
        set(&["q"]),
        "{c}: words inside punctuation still match"
    );
    let other = filter(&["t:globex"], &["public"], &[], &[]);
    assert!(
        tsearch(ix, c, "scope_key:t:acme retry", &other, 5).is_empty(),
        "{c}: field syntax in the query text must not widen the filter"
    );
}

fn text_matches_reference_filter(ix: &dyn TextIndex) {
    let c = "text/reference-filter";
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let all: Vec<IndexKeys> = (0..80).map(|i| random_keys(&mut rng, i)).collect();
    let docs: Vec<TextDoc> = all
        .iter()
        .map(|k| doc(k.clone(), "shared marker text about compliance"))
        .collect();
    tupsert(ix, c, &docs);
    for _ in 0..60 {
        let f = random_filter(&mut rng);
        let want: BTreeSet<String> = all
            .iter()
            .filter(|k| f.admits(k))
            .map(|k| k.asset_id.clone())
            .collect();
        let got = id_set(&tsearch(ix, c, "compliance marker", &f, 1000));
        assert_eq!(
            got, want,
            "{c}: filter {f:?} disagrees with VisibilityFilter::admits"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Vectors

/// A deterministic synthetic unit vector.
pub fn unit_vector(seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut v: Vec<f32> = (0..CONTRACT_VECTOR_DIM).map(|_| rng.unit()).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn entry(k: IndexKeys, vector: Vec<f32>) -> VectorEntry {
    VectorEntry {
        keys: k,
        vector,
        model: MODEL.to_string(),
    }
}

fn vsearch(
    ix: &dyn VectorIndex,
    check: &str,
    q: &[f32],
    f: &VisibilityFilter,
    k: usize,
) -> Vec<ScoredId> {
    let hits = ix
        .search(q, f, k)
        .unwrap_or_else(|e| panic!("{check}: vector search failed: {e}"));
    assert!(
        hits.len() <= k,
        "{check}: asked for {k} hits, got {}",
        hits.len()
    );
    assert_sorted(check, &hits);
    hits
}

fn vupsert(ix: &dyn VectorIndex, check: &str, entries: &[VectorEntry]) {
    ix.upsert(entries)
        .unwrap_or_else(|e| panic!("{check}: vector upsert failed: {e}"));
}

/// Runs every vector-index check, each on a fresh index from `make`, which must accept vectors
/// of [`CONTRACT_VECTOR_DIM`] dimensions.
pub fn vector_index_contract(make: &dyn Fn() -> Box<dyn VectorIndex>) {
    vector_tenant_isolation(&*make());
    vector_acl_kind_tags(&*make());
    vector_delete(&*make());
    vector_upsert_replaces(&*make());
    vector_exact_k_and_order(&*make());
    vector_matches_reference_filter(&*make());
    vector_model_tags(&*make());
    vector_rejects_bad_vectors(&*make());
}

fn vector_tenant_isolation(ix: &dyn VectorIndex) {
    let c = "vector/tenant-isolation";
    let secret = unit_vector(1);
    vupsert(
        ix,
        c,
        &[
            entry(
                keys("a1", AssetKind::Memory, "t:acme", &["public"], &[]),
                secret.clone(),
            ),
            entry(
                keys("a2", AssetKind::Memory, "t:acme/p:web", &["public"], &[]),
                secret.clone(),
            ),
            entry(
                keys("b1", AssetKind::Memory, "t:globex", &["public"], &[]),
                unit_vector(2),
            ),
            entry(
                keys("c1", AssetKind::Memory, "t:acme2", &["public"], &[]),
                unit_vector(3),
            ),
        ],
    );
    let own = vsearch(
        ix,
        c,
        &secret,
        &filter(&["t:acme"], &["public"], &[], &[]),
        10,
    );
    assert_eq!(
        id_set(&own),
        set(&["a1"]),
        "{c}: tenant A sees exactly its own scope"
    );
    assert!(
        (own[0].score - 1.0).abs() < 1e-4,
        "{c}: identical unit vectors must score ~1"
    );
    for scopes in [
        &["t:globex"][..],
        &["t:acme2"],
        &["t:globex", "t:acme2"],
        &["t:ac"],
        &["acme"],
    ] {
        let f = filter(scopes, &["public", "group:hr"], &[], &[]);
        let hits = vsearch(ix, c, &secret, &f, 10);
        assert!(
            !hits.iter().any(|h| h.asset_id.starts_with('a')),
            "{c}: scopes {scopes:?} saw tenant acme's entries with acme's exact vector: {hits:?}"
        );
    }
    let b = vsearch(
        ix,
        c,
        &secret,
        &filter(&["t:globex"], &["public"], &[], &[]),
        10,
    );
    assert_eq!(
        id_set(&b),
        set(&["b1"]),
        "{c}: tenant B still gets its own entry"
    );
    assert!(
        vsearch(ix, c, &secret, &filter(&[], &["public"], &[], &[]), 10).is_empty(),
        "{c}: a filter without scope keys must admit nothing"
    );
}

fn vector_acl_kind_tags(ix: &dyn VectorIndex) {
    let c = "vector/acl-kind-tags";
    let q = unit_vector(10);
    vupsert(
        ix,
        c,
        &[
            entry(
                keys(
                    "pub",
                    AssetKind::Memory,
                    "t:acme",
                    &["public"],
                    &["class:semantic"],
                ),
                unit_vector(11),
            ),
            entry(
                keys(
                    "hr",
                    AssetKind::Document,
                    "t:acme",
                    &["group:hr"],
                    &["lang:en"],
                ),
                unit_vector(12),
            ),
            entry(
                keys(
                    "mixed",
                    AssetKind::Chunk,
                    "t:acme",
                    &["user:ann", "group:hr"],
                    &[],
                ),
                unit_vector(13),
            ),
        ],
    );
    let all_acl = ["public", "group:hr", "user:ann"];
    for (acl, kinds, tags, want) in [
        (&["public"][..], &[][..], &[][..], &["pub"][..]),
        (&["group:hr"], &[], &[], &["hr", "mixed"]),
        (&["user:ann"], &[], &[], &["mixed"]),
        (&["user:bob"], &[], &[], &[]),
        (&[], &[], &[], &[]),
        (&all_acl, &[], &[], &["pub", "hr", "mixed"]),
        (&all_acl, &[AssetKind::Memory], &[], &["pub"]),
        (
            &all_acl,
            &[AssetKind::Document, AssetKind::Chunk],
            &[],
            &["hr", "mixed"],
        ),
        (&all_acl, &[AssetKind::Summary], &[], &[]),
        (&all_acl, &[], &["class:semantic"], &["pub"]),
        (
            &all_acl,
            &[],
            &["class:semantic", "lang:en"],
            &["pub", "hr"],
        ),
        (&all_acl, &[], &["class"], &[]),
        (&["group:hr"], &[AssetKind::Chunk], &["lang:en"], &[]),
    ] {
        let f = filter(&["t:acme"], acl, kinds, tags);
        assert_eq!(
            id_set(&vsearch(ix, c, &q, &f, 10)),
            set(want),
            "{c}: acl {acl:?} kinds {kinds:?} tags {tags:?}"
        );
    }
}

fn vector_delete(ix: &dyn VectorIndex) {
    let c = "vector/delete";
    let f = filter(&["t:acme"], &["public"], &[], &[]);
    let v = unit_vector(20);
    vupsert(
        ix,
        c,
        &[
            entry(
                keys("keep", AssetKind::Memory, "t:acme", &["public"], &[]),
                unit_vector(21),
            ),
            entry(
                keys("gone", AssetKind::Memory, "t:acme", &["public"], &[]),
                v.clone(),
            ),
            entry(
                keys("other", AssetKind::Memory, "t:acme", &["public"], &[]),
                unit_vector(22),
            ),
        ],
    );
    ix.delete(&["gone".to_string()])
        .unwrap_or_else(|e| panic!("{c}: delete failed: {e}"));
    let hits = vsearch(ix, c, &v, &f, 10);
    assert_eq!(
        id_set(&hits),
        set(&["keep", "other"]),
        "{c}: right after delete"
    );
    assert_eq!(ix.len().unwrap(), 2, "{c}: len after delete");
    ix.delete(&["never-existed".to_string()])
        .unwrap_or_else(|e| panic!("{c}: deleting an unknown id must succeed: {e}"));
    ix.delete(&[])
        .unwrap_or_else(|e| panic!("{c}: empty delete: {e}"));
    ix.compact()
        .unwrap_or_else(|e| panic!("{c}: compact failed: {e}"));
    assert_eq!(
        id_set(&vsearch(ix, c, &v, &f, 10)),
        set(&["keep", "other"]),
        "{c}: after compact"
    );
    ix.delete(&["keep".to_string(), "other".to_string()])
        .unwrap();
    assert!(
        vsearch(ix, c, &v, &f, 10).is_empty(),
        "{c}: everything deleted"
    );
    assert!(ix.is_empty().unwrap(), "{c}: is_empty after deleting all");
    ix.compact()
        .unwrap_or_else(|e| panic!("{c}: compact of an empty index: {e}"));
}

fn vector_upsert_replaces(ix: &dyn VectorIndex) {
    let c = "vector/upsert-replaces";
    let f = filter(&["t:acme"], &["public"], &[], &[]);
    let (old, new) = (unit_vector(30), unit_vector(31));
    vupsert(
        ix,
        c,
        &[entry(
            keys("x", AssetKind::Memory, "t:acme", &["public"], &[]),
            old.clone(),
        )],
    );
    vupsert(
        ix,
        c,
        &[entry(
            keys("x", AssetKind::Memory, "t:acme", &["public"], &[]),
            new.clone(),
        )],
    );
    assert_eq!(
        ix.len().unwrap(),
        1,
        "{c}: replacement must not add an entry"
    );
    let hits = vsearch(ix, c, &old, &f, 10);
    assert_eq!(
        id_set(&hits),
        set(&["x"]),
        "{c}: the id is still there once"
    );
    assert!(
        (hits[0].score - cos(&old, &new)).abs() < 1e-4,
        "{c}: the old vector still scores ({}), expected the new one's cosine {}",
        hits[0].score,
        cos(&old, &new)
    );
    vupsert(
        ix,
        c,
        &[entry(
            keys("x", AssetKind::Memory, "t:globex", &["group:hr"], &[]),
            new.clone(),
        )],
    );
    assert!(
        vsearch(ix, c, &new, &f, 10).is_empty(),
        "{c}: old scope still admits it"
    );
    let g = filter(&["t:globex"], &["group:hr"], &[], &[]);
    assert_eq!(
        id_set(&vsearch(ix, c, &new, &g, 10)),
        set(&["x"]),
        "{c}: new scope"
    );
    vupsert(
        ix,
        c,
        &[
            entry(
                keys("y", AssetKind::Memory, "t:acme", &["public"], &[]),
                old.clone(),
            ),
            entry(
                keys("y", AssetKind::Memory, "t:acme", &["public"], &[]),
                new.clone(),
            ),
        ],
    );
    let hits = vsearch(ix, c, &new, &f, 10);
    assert_eq!(id_set(&hits), set(&["y"]), "{c}: batch with a repeated id");
    assert!(
        (hits[0].score - 1.0).abs() < 1e-4,
        "{c}: the last entry of a batch wins"
    );
    assert_eq!(ix.len().unwrap(), 2, "{c}: len");
}

fn vector_exact_k_and_order(ix: &dyn VectorIndex) {
    let c = "vector/exact-k-order";
    let entries: Vec<VectorEntry> = (0..200)
        .map(|i| {
            entry(
                keys(
                    &format!("v{i:03}"),
                    AssetKind::Chunk,
                    "t:acme",
                    &["public"],
                    &[],
                ),
                unit_vector(1000 + i),
            )
        })
        .collect();
    vupsert(ix, c, &entries);
    let f = filter(&["t:acme"], &["public"], &[], &[]);
    for qs in 0..5 {
        let q = unit_vector(5000 + qs);
        let mut brute: Vec<(f32, &str)> = entries
            .iter()
            .map(|e| (cos(&q, &e.vector), e.keys.asset_id.as_str()))
            .collect();
        brute.sort_by(|a, b| b.0.total_cmp(&a.0));
        for k in [1, 7, 50] {
            let hits = vsearch(ix, c, &q, &f, k);
            assert_eq!(hits.len(), k, "{c}: k={k}");
            for (h, (s, id)) in hits.iter().zip(&brute) {
                assert_eq!(
                    h.asset_id, *id,
                    "{c}: k={k}: not the exact nearest neighbours"
                );
                assert!((h.score - s).abs() < 1e-4, "{c}: score is not the cosine");
            }
        }
        assert_eq!(
            vsearch(ix, c, &q, &f, 1000).len(),
            200,
            "{c}: k above the entry count"
        );
        assert!(vsearch(ix, c, &q, &f, 0).is_empty(), "{c}: k=0");
    }
}

fn vector_matches_reference_filter(ix: &dyn VectorIndex) {
    let c = "vector/reference-filter";
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let all: Vec<IndexKeys> = (0..120).map(|i| random_keys(&mut rng, i)).collect();
    let entries: Vec<VectorEntry> = all
        .iter()
        .enumerate()
        .map(|(i, k)| entry(k.clone(), unit_vector(2000 + i as u64)))
        .collect();
    vupsert(ix, c, &entries);
    for n in 0..60 {
        let f = random_filter(&mut rng);
        let want: BTreeSet<String> = all
            .iter()
            .filter(|k| f.admits(k))
            .map(|k| k.asset_id.clone())
            .collect();
        let got = id_set(&vsearch(ix, c, &unit_vector(9000 + n), &f, 1000));
        assert_eq!(
            got, want,
            "{c}: filter {f:?} disagrees with VisibilityFilter::admits"
        );
    }
}

fn vector_model_tags(ix: &dyn VectorIndex) {
    let c = "vector/model-tags";
    let mk = |id: &str, model: &str, seed: u64| VectorEntry {
        keys: keys(id, AssetKind::Memory, "t:acme", &["public"], &[]),
        vector: unit_vector(seed),
        model: model.to_string(),
    };
    vupsert(
        ix,
        c,
        &[
            mk("o1", "old@1", 40),
            mk("o2", "old@1", 41),
            mk("o3", "old@1", 42),
            mk("n1", "new@2", 43),
        ],
    );
    let stale = |limit| -> BTreeSet<AssetId> {
        ix.ids_not_made_by("new@2", limit)
            .unwrap_or_else(|e| panic!("{c}: ids_not_made_by failed: {e}"))
            .into_iter()
            .collect()
    };
    assert_eq!(stale(10), set(&["o1", "o2", "o3"]), "{c}: stale ids");
    assert_eq!(stale(2).len(), 2, "{c}: limit respected");
    vupsert(ix, c, &[mk("o1", "new@2", 40)]);
    assert_eq!(
        stale(10),
        set(&["o2", "o3"]),
        "{c}: re-embedded id no longer stale"
    );
    ix.delete(&["o2".to_string()]).unwrap();
    assert_eq!(stale(10), set(&["o3"]), "{c}: deleted id no longer listed");
}

fn vector_rejects_bad_vectors(ix: &dyn VectorIndex) {
    let c = "vector/rejects-bad-vectors";
    let ok = entry(
        keys("ok", AssetKind::Memory, "t:acme", &["public"], &[]),
        unit_vector(50),
    );
    let short = entry(
        keys("short", AssetKind::Memory, "t:acme", &["public"], &[]),
        vec![1.0; 3],
    );
    let mut nan = unit_vector(51);
    nan[0] = f32::NAN;
    let nan = entry(
        keys("nan", AssetKind::Memory, "t:acme", &["public"], &[]),
        nan,
    );
    for bad in [short, nan] {
        let id = bad.keys.asset_id.clone();
        assert!(
            ix.upsert(&[ok.clone(), bad]).is_err(),
            "{c}: a batch containing vector {id:?} must be refused"
        );
        assert_eq!(
            ix.len().unwrap(),
            0,
            "{c}: a refused batch must write nothing"
        );
    }
    let f = filter(&["t:acme"], &["public"], &[], &[]);
    assert!(
        ix.search(&[1.0; 3], &f, 5).is_err(),
        "{c}: a query of the wrong dimension must be refused"
    );
}
