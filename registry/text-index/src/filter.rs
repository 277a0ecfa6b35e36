//! The visibility filter's clauses as one bit set per segment, kept for the next search with the
//! same filter.
//!
//! A filter is several required clauses (scope keys, ACL keys, kinds, clearance, purpose), each
//! a union of terms that can match most of the index (every document carries a purpose and a
//! sensitivity tag). Intersecting the query with those unions costs more than scoring the
//! query: at a million documents, 100,000 of them in the caller's scope, the filter made a
//! search about four times slower. A caller asks again and again with the same filter, and a
//! segment never changes once written (deletions live in its alive set, which the collector
//! applies on its own), so the documents a filter admits in a segment are worked out once and
//! kept, keyed by the segment and the filter's exact terms.
//!
//! The cache holds document numbers only, never text, and is bounded by [`MAX_CACHED_BYTES`]
//! (least recently used first out), keys included: many distinct filters over many small
//! segments cannot grow it past the bound. A merged-away segment's sets are never asked for again and
//! age out.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use tantivy::query::{ConstScorer, EnableScoring, Explanation, Query, Scorer, Weight};
use tantivy::{DocId, DocSet, Score, SegmentReader, TERMINATED, Term};

/// Bytes of bit sets the cache keeps (a segment of a million documents takes 125 KiB per
/// filter).
pub(crate) const MAX_CACHED_BYTES: usize = 64 << 20;

/// The documents of one segment that a filter admits.
#[derive(Debug)]
struct Bits {
    words: Vec<u64>,
    count: u32,
}

impl Bits {
    fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

type Key = (tantivy::index::SegmentId, Arc<str>);

/// What an entry costs the bound: its bits, its key (counted whole for every entry, though
/// entries of one filter share it) and the map's bookkeeping.
fn cost(key: &Key, bits: &Bits) -> usize {
    bits.bytes() + key.1.len() + ENTRY_OVERHEAD
}

/// Bytes of an entry besides its bits and key text (segment id, pointers, list links).
const ENTRY_OVERHEAD: usize = 96;

/// Bit sets by segment and filter, least recently used first out.
pub(crate) struct FilterCache {
    inner: Mutex<CacheInner>,
    max_bytes: usize,
}

struct CacheInner {
    map: lru::LruCache<Key, Arc<Bits>>,
    bytes: usize,
}

impl fmt::Debug for FilterCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.inner.lock();
        f.debug_struct("FilterCache")
            .field("entries", &g.map.len())
            .field("bytes", &g.bytes)
            .finish()
    }
}

impl FilterCache {
    pub(crate) fn new(max_bytes: usize) -> Self {
        FilterCache {
            inner: Mutex::new(CacheInner {
                map: lru::LruCache::unbounded(),
                bytes: 0,
            }),
            max_bytes,
        }
    }

    fn get(&self, key: &Key) -> Option<Arc<Bits>> {
        self.inner.lock().map.get(key).cloned()
    }

    fn put(&self, key: Key, bits: Arc<Bits>) {
        let mut g = self.inner.lock();
        let add = cost(&key, &bits);
        if add > self.max_bytes {
            return;
        }
        if let Some((k, old)) = g.map.push(key, bits) {
            g.bytes -= cost(&k, &old);
        }
        g.bytes += add;
        while g.bytes > self.max_bytes {
            match g.map.pop_lru() {
                Some((k, old)) => g.bytes -= cost(&k, &old),
                None => break,
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().map.len()
    }
}

/// A required clause matching what `inner` matches, scored 0, answered from the cache.
pub(crate) struct CachedFilter {
    inner: Box<dyn Query>,
    /// The filter's exact terms, canonical: two filters share sets only when they are equal.
    key: Arc<str>,
    cache: Arc<FilterCache>,
}

impl CachedFilter {
    pub(crate) fn new(inner: Box<dyn Query>, key: String, cache: Arc<FilterCache>) -> Self {
        CachedFilter {
            inner,
            key: key.into(),
            cache,
        }
    }
}

impl Clone for CachedFilter {
    fn clone(&self) -> Self {
        CachedFilter {
            inner: self.inner.box_clone(),
            key: self.key.clone(),
            cache: self.cache.clone(),
        }
    }
}

impl fmt::Debug for CachedFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CachedFilter({:?})", self.inner)
    }
}

impl Query for CachedFilter {
    fn weight(&self, enable_scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        let inner = self
            .inner
            .weight(EnableScoring::disabled_from_schema(enable_scoring.schema()))?;
        Ok(Box::new(CachedFilterWeight {
            inner,
            key: self.key.clone(),
            cache: self.cache.clone(),
        }))
    }

    fn query_terms<'a>(&'a self, visitor: &mut dyn FnMut(&'a Term, bool)) {
        self.inner.query_terms(visitor);
    }
}

struct CachedFilterWeight {
    inner: Box<dyn Weight>,
    key: Arc<str>,
    cache: Arc<FilterCache>,
}

impl CachedFilterWeight {
    fn bits(&self, reader: &SegmentReader) -> tantivy::Result<Arc<Bits>> {
        let key = (reader.segment_id(), self.key.clone());
        if let Some(b) = self.cache.get(&key) {
            return Ok(b);
        }
        let mut words = vec![0u64; (reader.max_doc() as usize).div_ceil(64)];
        let mut count = 0u32;
        let mut s = self.inner.scorer(reader, 1.0)?;
        let mut d = s.doc();
        while d != TERMINATED {
            words[d as usize / 64] |= 1 << (d % 64);
            count += 1;
            d = s.advance();
        }
        let bits = Arc::new(Bits { words, count });
        self.cache.put(key, bits.clone());
        Ok(bits)
    }
}

impl Weight for CachedFilterWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        Ok(Box::new(ConstScorer::new(
            BitsDocSet::new(self.bits(reader)?),
            boost * 0.0,
        )))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let mut s = self.scorer(reader, 1.0)?;
        if s.seek(doc) != doc {
            return Err(tantivy::TantivyError::InvalidArgument(format!(
                "document #{doc} is not admitted by the filter"
            )));
        }
        Ok(Explanation::new("filter", 0.0))
    }
}

/// The documents of a [`Bits`], in order.
struct BitsDocSet {
    bits: Arc<Bits>,
    doc: DocId,
}

impl BitsDocSet {
    fn new(bits: Arc<Bits>) -> Self {
        let mut s = BitsDocSet { bits, doc: 0 };
        s.doc = s.first_from(0);
        s
    }

    /// The first admitted document at or after `from`, or [`TERMINATED`].
    fn first_from(&self, from: DocId) -> DocId {
        let words = &self.bits.words;
        let mut w = from as usize / 64;
        if w >= words.len() {
            return TERMINATED;
        }
        let mut word = words[w] & (u64::MAX << (from % 64));
        loop {
            if word != 0 {
                return (w * 64) as DocId + word.trailing_zeros();
            }
            w += 1;
            if w >= words.len() {
                return TERMINATED;
            }
            word = words[w];
        }
    }
}

impl DocSet for BitsDocSet {
    fn advance(&mut self) -> DocId {
        if self.doc != TERMINATED {
            self.doc = self.first_from(self.doc + 1);
        }
        self.doc
    }

    fn seek(&mut self, target: DocId) -> DocId {
        if self.doc != TERMINATED && target > self.doc {
            self.doc = self.first_from(target);
        }
        self.doc
    }

    fn doc(&self) -> DocId {
        self.doc
    }

    fn size_hint(&self) -> u32 {
        self.bits.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(words: Vec<u64>) -> Vec<DocId> {
        let count = words.iter().map(|w| w.count_ones()).sum();
        let mut s = BitsDocSet::new(Arc::new(Bits { words, count }));
        let mut out = vec![];
        while s.doc() != TERMINATED {
            out.push(s.doc());
            s.advance();
        }
        out
    }

    #[test]
    fn the_doc_set_walks_and_seeks_its_bits_in_order() {
        assert_eq!(docs(vec![]), Vec::<DocId>::new());
        assert_eq!(docs(vec![0, 0]), Vec::<DocId>::new());
        assert_eq!(docs(vec![0b1011, 0, 1 << 63]), vec![0, 1, 3, 191]);
        let bits = Arc::new(Bits {
            words: vec![0b1011, 0, 1 << 63],
            count: 4,
        });
        let mut s = BitsDocSet::new(bits.clone());
        assert_eq!(s.seek(2), 3);
        assert_eq!(
            s.seek(3),
            3,
            "a seek behind or at the current document stays"
        );
        assert_eq!(s.seek(100), 191);
        assert_eq!(s.advance(), TERMINATED);
        assert_eq!(s.advance(), TERMINATED);
        let mut s = BitsDocSet::new(bits);
        assert_eq!(s.seek(500), TERMINATED);
    }

    #[test]
    fn the_cache_keeps_within_its_bytes_least_recently_used_out() {
        // Room for two one-word entries with one-letter keys, not three.
        let cache = FilterCache::new(2 * (8 + 1 + ENTRY_OVERHEAD) + 10);
        let seg = tantivy::index::SegmentId::generate_random();
        let bits = || {
            Arc::new(Bits {
                words: vec![1],
                count: 1,
            })
        };
        cache.put((seg, "a".into()), bits());
        cache.put((seg, "b".into()), bits());
        assert!(cache.get(&(seg, "a".into())).is_some());
        cache.put((seg, "c".into()), bits());
        assert_eq!(cache.len(), 2);
        assert!(
            cache.get(&(seg, "b".into())).is_none(),
            "least recently used"
        );
        assert!(cache.get(&(seg, "a".into())).is_some());
        cache.put(
            (seg, "big".into()),
            Arc::new(Bits {
                words: vec![0; 40],
                count: 0,
            }),
        );
        assert!(
            cache.get(&(seg, "big".into())).is_none(),
            "larger than the cache"
        );
    }

    #[test]
    fn many_long_filters_over_small_segments_stay_within_the_bound() {
        let max = 64 << 10;
        let cache = FilterCache::new(max);
        for i in 0..10_000 {
            let key = format!("{i:05}{}", "k".repeat(1000));
            cache.put(
                (tantivy::index::SegmentId::generate_random(), key.into()),
                Arc::new(Bits {
                    words: vec![1],
                    count: 1,
                }),
            );
            assert!(cache.inner.lock().bytes <= max);
        }
        let g = cache.inner.lock();
        let counted: usize = g.map.iter().map(|(k, b)| cost(k, b)).sum();
        assert_eq!(counted, g.bytes, "the count matches what is held");
        assert!(g.map.len() < max / 1000);
    }
}
