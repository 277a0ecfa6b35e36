//! How governance keys live in a Qdrant point, and how a [`VisibilityFilter`] becomes the Qdrant
//! [`Filter`] that runs inside Qdrant, before any point is scored.
//!
//! Everything here is pure (no server): the point id of an asset, the collection name of a
//! model, the payload of an entry and the filter translation.
//!
//! Invariant: for every entry `k`, `filter_for(f)` admits the point of `k` exactly when
//! [`VisibilityFilter::admits`] admits `k` (the tests check it against an evaluator of the
//! subset of Qdrant's filter language used here).

use std::collections::HashMap;

use qdrant_client::qdrant::{Condition, Filter, Value};
use registry_core::retrieval::{IndexKeys, VisibilityFilter};
use sha2::{Digest, Sha256};

/// Payload key: the asset id (points are keyed by a UUID derived from it, see [`point_id`]).
pub const ASSET_ID: &str = "asset_id";
/// Payload key: [`registry_core::asset::AssetKind::as_str`].
pub const KIND: &str = "kind";
/// Payload key: the scope key (a tenant index: most filters name one tenant's scopes).
pub const SCOPE_KEY: &str = "scope_key";
/// Payload key: the ACL keys (a list).
pub const ACL_KEYS: &str = "acl_keys";
/// Payload key: the tags, governance tags included (a list).
pub const TAGS: &str = "tags";
/// Payload key: `name@digest` of the model that made the vector.
pub const MODEL: &str = "model";

/// Every payload key, each with a keyword index.
pub const KEYWORD_FIELDS: [&str; 6] = [ASSET_ID, KIND, SCOPE_KEY, ACL_KEYS, TAGS, MODEL];

/// Prefix hashed with the asset id into its point id; changing it re-keys every collection.
const POINT_ID_DOMAIN: &[u8] = b"harness-registry/asset-id\0";

/// The Qdrant point id of an asset: the first 16 bytes of
/// `sha256("harness-registry/asset-id\0" ‖ asset id)` as a UUID (version 8, "custom").
/// Deterministic, so an upsert replaces the point of the same asset and a delete needs no lookup.
pub fn point_id(asset_id: &str) -> String {
    let digest = Sha256::new()
        .chain_update(POINT_ID_DOMAIN)
        .chain_update(asset_id.as_bytes())
        .finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes)
        .into_uuid()
        .hyphenated()
        .to_string()
}

/// Lower-case ASCII letters and digits of `s`, every other run of characters as one `-`.
fn slug(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// The collection of a model: `{prefix}_{model-slug}_{dim}`, e.g.
/// `registry_all-minilm-l6-v2-0123456789abcdef_384` for `all-MiniLM-L6-v2@0123456789abcdef`.
/// A change of model (or of its file, whose digest is in the tag) starts a new collection.
pub fn collection_name(prefix: &str, model_tag: &str, dim: usize) -> String {
    let model = slug(model_tag);
    let model = if model.is_empty() { "model" } else { &model };
    format!("{prefix}_{model}_{dim}")
}

/// Whether `name` is a collection [`collection_name`] makes under `prefix`, for any model: the
/// model slug holds no `_`, so another prefix that merely starts with this one (`registry_x`)
/// never matches.
pub fn is_collection_of(prefix: &str, name: &str) -> bool {
    let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('_')) else {
        return false;
    };
    let Some((model, dim)) = rest.rsplit_once('_') else {
        return false;
    };
    !model.is_empty()
        && model
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !dim.is_empty()
        && dim.chars().all(|c| c.is_ascii_digit())
}

fn strings(v: &[String]) -> Value {
    Value::from(
        v.iter()
            .map(|s| Value::from(s.as_str()))
            .collect::<Vec<_>>(),
    )
}

/// The governance part of a point's payload: kind, scope, ACL keys, tags (and the asset id).
pub fn keys_payload(k: &IndexKeys) -> HashMap<String, Value> {
    HashMap::from([
        (ASSET_ID.to_string(), Value::from(k.asset_id.as_str())),
        (KIND.to_string(), Value::from(k.kind.as_str())),
        (SCOPE_KEY.to_string(), Value::from(k.scope_key.as_str())),
        (ACL_KEYS.to_string(), strings(&k.acl_keys)),
        (TAGS.to_string(), strings(&k.tags)),
    ])
}

/// A point's whole payload: [`keys_payload`] and the model tag.
pub fn entry_payload(k: &IndexKeys, model: &str) -> HashMap<String, Value> {
    let mut p = keys_payload(k);
    p.insert(MODEL.to_string(), Value::from(model));
    p
}

/// `field` (a keyword or a list of keywords) holds at least one of `values`.
fn any_of<'a>(field: &str, values: impl IntoIterator<Item = &'a str>) -> Condition {
    let mut v: Vec<String> = values.into_iter().map(str::to_owned).collect();
    v.sort();
    v.dedup();
    Condition::matches(field, v)
}

fn strs(v: &[String]) -> impl Iterator<Item = &str> {
    v.iter().map(String::as_str)
}

/// The Qdrant filter with the semantics of [`VisibilityFilter::admits`], or `None` when the
/// filter admits nothing (no scope key or no ACL key): Qdrant reads an empty `should` or an
/// empty `any` as no condition at all, so such a filter must never be sent.
///
/// Every clause is a `must`; the one disjunction of `admits` (a sensitivity tag within the
/// clearance, or one of the caller's own scopes) is a nested `should`. A keyword match on a
/// list field (ACL keys, tags) holds when any element matches, which is `admits`' "at least one".
pub fn filter_for(f: &VisibilityFilter) -> Option<Filter> {
    if f.scope_keys.is_empty() || f.acl_keys.is_empty() {
        return None;
    }
    let mut must = vec![
        any_of(SCOPE_KEY, strs(&f.scope_keys)),
        any_of(ACL_KEYS, strs(&f.acl_keys)),
    ];
    if !f.kinds.is_empty() {
        must.push(any_of(KIND, f.kinds.iter().map(|k| k.as_str())));
    }
    if !f.any_tags.is_empty() {
        must.push(any_of(TAGS, strs(&f.any_tags)));
    }
    if !f.sensitivity_tags.is_empty() {
        let mut either = vec![any_of(TAGS, strs(&f.sensitivity_tags))];
        if !f.own_scopes.is_empty() {
            either.push(any_of(SCOPE_KEY, strs(&f.own_scopes)));
        }
        must.push(Filter::should(either).into());
    }
    if !f.purpose_tags.is_empty() {
        must.push(any_of(TAGS, strs(&f.purpose_tags)));
    }
    Some(Filter::must(must))
}

/// Points whose vectors another model made (for [`registry_core::retrieval::VectorIndex::ids_not_made_by`]).
pub fn not_made_by(model_tag: &str) -> Filter {
    Filter::must_not([Condition::matches(MODEL, model_tag.to_string())])
}

#[cfg(test)]
mod tests {
    use qdrant_client::qdrant::condition::ConditionOneOf;
    use qdrant_client::qdrant::r#match::MatchValue;
    use qdrant_client::qdrant::value::Kind;
    use registry_core::asset::AssetKind;
    use registry_core::principal::Principal;

    use super::*;

    #[test]
    fn only_this_prefixs_collections_of_other_models_are_recognised() {
        let mine = collection_name("registry", "all-MiniLM-L6-v2@0123456789abcdef", 384);
        let other = collection_name("registry", "multilingual-e5-small@fedcba9876543210", 384);
        assert!(is_collection_of("registry", &mine));
        assert!(is_collection_of("registry", &other));
        // Another registry whose prefix starts with this one, and names that are not ours.
        let longer = collection_name("registry_x", "all-MiniLM-L6-v2@0123456789abcdef", 384);
        assert!(!is_collection_of("registry", &longer));
        assert!(is_collection_of("registry_x", &longer));
        for name in [
            "registry",
            "registry_",
            "registry__384",
            "registry_m_",
            "registry_M_384",
            "registryx_m_384",
            "other_m_384",
            "registry_m_384x",
        ] {
            assert!(!is_collection_of("registry", name), "{name}");
        }
    }

    /// The payload value of `field` as the list of strings a keyword match compares against (a
    /// single keyword is a list of one).
    fn field_values(payload: &HashMap<String, Value>, field: &str) -> Vec<String> {
        match payload.get(field).and_then(|v| v.kind.as_ref()) {
            Some(Kind::StringValue(s)) => vec![s.clone()],
            Some(Kind::ListValue(l)) => l
                .values
                .iter()
                .map(|v| match &v.kind {
                    Some(Kind::StringValue(s)) => s.clone(),
                    other => panic!("{field}: a list of non-strings: {other:?}"),
                })
                .collect(),
            None => vec![],
            other => panic!("{field}: unexpected payload value {other:?}"),
        }
    }

    /// Qdrant's semantics for the subset of the filter language `filter_for` emits: `must`
    /// all, `should` at least one when not empty, `must_not` none; a keyword or keywords match
    /// holds when any stored value equals any given one. Anything else panics, so a translation
    /// that strays outside this subset fails here instead of being judged by guesswork.
    fn eval(f: &Filter, payload: &HashMap<String, Value>) -> bool {
        assert!(f.min_should.is_none(), "min_should is not used");
        let cond = |c: &Condition| match c.condition_one_of.as_ref().expect("empty condition") {
            ConditionOneOf::Filter(inner) => eval(inner, payload),
            ConditionOneOf::Field(fc) => {
                let stored = field_values(payload, &fc.key);
                let wanted: Vec<String> = match fc
                    .r#match
                    .as_ref()
                    .and_then(|m| m.match_value.as_ref())
                    .expect("a field condition without a match")
                {
                    MatchValue::Keyword(k) => vec![k.clone()],
                    MatchValue::Keywords(ks) => {
                        assert!(!ks.strings.is_empty(), "an empty `any` matches everything");
                        ks.strings.clone()
                    }
                    other => panic!("unexpected match {other:?}"),
                };
                stored.iter().any(|s| wanted.contains(s))
            }
            other => panic!("unexpected condition {other:?}"),
        };
        f.must.iter().all(cond)
            && (f.should.is_empty() || f.should.iter().any(cond))
            && !f.must_not.iter().any(cond)
    }

    fn admits(f: &VisibilityFilter, k: &IndexKeys) -> bool {
        filter_for(f).is_some_and(|q| eval(&q, &entry_payload(k, "m@1")))
    }

    fn admits_payload(q: Option<&Filter>, payload: &HashMap<String, Value>) -> bool {
        q.is_some_and(|q| eval(q, payload))
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn subset(&mut self, pool: &[&str]) -> Vec<String> {
            pool.iter()
                .filter(|_| self.below(2) == 0)
                .map(|s| s.to_string())
                .collect()
        }
    }

    const SCOPES: [&str; 5] = [
        "t:acme",
        "t:acme/u:ann",
        "t:acme/p:web",
        "t:globex",
        "t:acme2",
    ];
    const ACLS: [&str; 4] = ["public", "group:hr", "user:ann", "user:bob"];
    const TAG_POOL: [&str; 10] = [
        "class:semantic",
        "class:episodic",
        "sens:public",
        "sens:internal",
        "sens:confidential",
        "sens:secret",
        "purpose:*",
        "purpose:hr",
        "purpose:ops",
        "lang:en",
    ];
    const SENS: [&str; 4] = [
        "sens:public",
        "sens:internal",
        "sens:confidential",
        "sens:secret",
    ];
    const PURPOSES: [&str; 3] = ["purpose:*", "purpose:hr", "purpose:ops"];

    fn random_keys(rng: &mut Rng, i: usize) -> IndexKeys {
        IndexKeys {
            asset_id: format!("a{i}"),
            kind: AssetKind::ALL[rng.below(AssetKind::ALL.len())],
            scope_key: SCOPES[rng.below(SCOPES.len())].to_string(),
            acl_keys: rng.subset(&ACLS),
            tags: rng.subset(&TAG_POOL),
        }
    }

    fn random_filter(rng: &mut Rng) -> VisibilityFilter {
        let mut f = VisibilityFilter {
            scope_keys: rng.subset(&SCOPES),
            acl_keys: rng.subset(&ACLS),
            kinds: AssetKind::ALL
                .into_iter()
                .filter(|_| rng.below(3) == 0)
                .collect(),
            any_tags: if rng.below(2) == 0 {
                vec![]
            } else {
                rng.subset(&TAG_POOL)
            },
            ..Default::default()
        };
        if rng.below(2) == 0 {
            f.sensitivity_tags = SENS[..=rng.below(SENS.len())]
                .iter()
                .map(|s| s.to_string())
                .collect();
            f.own_scopes = rng.subset(&SCOPES);
            f.purpose_tags = rng.subset(&PURPOSES);
        }
        f
    }

    #[test]
    fn translated_filter_agrees_with_admits_on_random_entries() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let keys: Vec<IndexKeys> = (0..300).map(|i| random_keys(&mut rng, i)).collect();
        let payloads: Vec<_> = keys.iter().map(|k| entry_payload(k, "m@1")).collect();
        let (mut admitted, mut refused) = (0, 0);
        for _ in 0..1000 {
            let f = random_filter(&mut rng);
            let q = filter_for(&f);
            for (k, p) in keys.iter().zip(&payloads) {
                let want = f.admits(k);
                assert_eq!(admits_payload(q.as_ref(), p), want, "filter {f:?} on {k:?}");
                if want {
                    admitted += 1;
                } else {
                    refused += 1;
                }
            }
        }
        // The cases must exercise both answers, or the agreement says nothing.
        assert!(
            admitted > 5_000 && refused > 5_000,
            "{admitted} / {refused}"
        );
    }

    #[test]
    fn principal_filter_applies_clearance_except_own_scopes_and_purpose() {
        let mut p = Principal::new("acme", "ann");
        p.clearance = registry_core::asset::Sensitivity::Internal;
        let f = VisibilityFilter::for_principal(&p, &[]);
        let k = |scope: &str, tags: &[&str]| IndexKeys {
            asset_id: "x".into(),
            kind: AssetKind::Memory,
            scope_key: scope.into(),
            acl_keys: vec!["public".into()],
            tags: tags.iter().map(|t| t.to_string()).collect(),
        };
        for (keys, want) in [
            (k("t:acme", &["sens:internal", "purpose:*"]), true),
            (k("t:acme", &["sens:confidential", "purpose:*"]), false),
            (k("t:acme/u:ann", &["sens:secret", "purpose:*"]), true),
            (k("t:acme", &["sens:public", "purpose:hr"]), false),
            (k("t:acme", &[]), false),
            (k("t:globex", &["sens:public", "purpose:*"]), false),
        ] {
            assert_eq!(f.admits(&keys), want, "reference on {keys:?}");
            assert_eq!(admits(&f, &keys), want, "translation on {keys:?}");
        }
    }

    #[test]
    fn a_filter_without_scopes_or_acl_keys_is_never_sent() {
        let full = VisibilityFilter {
            scope_keys: vec!["t:acme".into()],
            acl_keys: vec!["public".into()],
            ..Default::default()
        };
        assert!(filter_for(&full).is_some());
        let no_scopes = VisibilityFilter {
            scope_keys: vec![],
            ..full.clone()
        };
        let no_acl = VisibilityFilter {
            acl_keys: vec![],
            ..full
        };
        assert!(filter_for(&no_scopes).is_none());
        assert!(filter_for(&no_acl).is_none());
    }

    #[test]
    fn filter_shape_is_musts_with_one_nested_should() {
        let f = VisibilityFilter {
            scope_keys: vec!["t:b".into(), "t:a".into(), "t:a".into()],
            acl_keys: vec!["public".into()],
            kinds: vec![AssetKind::Memory],
            any_tags: vec!["class:semantic".into()],
            sensitivity_tags: vec!["sens:public".into()],
            own_scopes: vec!["t:a/u:ann".into()],
            purpose_tags: vec!["purpose:*".into()],
        };
        let q = filter_for(&f).unwrap();
        assert!(q.should.is_empty() && q.must_not.is_empty());
        assert_eq!(q.must.len(), 6);
        let keywords = |c: &Condition| match &c.condition_one_of {
            Some(ConditionOneOf::Field(fc)) => match fc.r#match.as_ref().unwrap().match_value {
                Some(MatchValue::Keywords(ref k)) => (fc.key.clone(), k.strings.clone()),
                ref other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        assert_eq!(
            keywords(&q.must[0]),
            (SCOPE_KEY.into(), vec!["t:a".into(), "t:b".into()]),
            "sorted, without repeats"
        );
        assert_eq!(keywords(&q.must[2]), (KIND.into(), vec!["memory".into()]));
        let Some(ConditionOneOf::Filter(nested)) = &q.must[4].condition_one_of else {
            panic!("the sensitivity clause is a nested filter");
        };
        assert!(nested.must.is_empty());
        assert_eq!(nested.should.len(), 2);
        assert_eq!(keywords(&nested.should[1]).0, SCOPE_KEY);
    }

    #[test]
    fn point_ids_are_stable_distinct_uuids() {
        let a = point_id("mem_01");
        assert_eq!(a, point_id("mem_01"));
        assert_ne!(a, point_id("mem_02"));
        let u = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(u.get_version_num(), 8);
        // Pinned (Python: uuid from sha256(domain + id)[:16] with version 8 and the RFC 4122
        // variant): a change would orphan every point stored under the old ids.
        assert_eq!(a, "3017935c-55aa-8a27-b7d1-25d1a9aff5ce");
    }

    #[test]
    fn collection_names_follow_the_model_and_dimension() {
        assert_eq!(
            collection_name("registry", "all-MiniLM-L6-v2@0123456789abcdef", 384),
            "registry_all-minilm-l6-v2-0123456789abcdef_384"
        );
        assert_eq!(
            collection_name("hr", "multilingual-e5-small@ffee", 384),
            "hr_multilingual-e5-small-ffee_384"
        );
        assert_eq!(collection_name("hr", "@@", 8), "hr_model_8");
        assert_ne!(
            collection_name("hr", "m@1", 384),
            collection_name("hr", "m@2", 384)
        );
    }

    #[test]
    fn payload_carries_every_key_and_the_model() {
        let k = IndexKeys {
            asset_id: "x".into(),
            kind: AssetKind::Chunk,
            scope_key: "t:acme".into(),
            acl_keys: vec!["public".into(), "group:hr".into()],
            tags: vec![],
        };
        let p = entry_payload(&k, "m@1");
        assert_eq!(field_values(&p, ASSET_ID), ["x"]);
        assert_eq!(field_values(&p, KIND), ["chunk"]);
        assert_eq!(field_values(&p, ACL_KEYS), ["public", "group:hr"]);
        assert!(field_values(&p, TAGS).is_empty());
        assert_eq!(field_values(&p, MODEL), ["m@1"]);
        assert!(!eval(&not_made_by("m@1"), &p));
        assert!(eval(&not_made_by("m@2"), &p));
        for f in KEYWORD_FIELDS {
            assert!(p.contains_key(f), "{f}");
        }
    }
}
