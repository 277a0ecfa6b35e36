//! The dense-vector leg of the embedded form: cosine search over in-memory partitions, made
//! durable by a SQLite file.
//!
//! Layout in memory: one [`Partition`] per scope key, holding a contiguous row-major `f32`
//! matrix and, per row, the asset id and a *label*: the interned (kind, ACL keys, tags) of the
//! entry. A search visits only the partitions whose scope key is in the filter, decides once per
//! label whether the filter admits it (with [`VisibilityFilter::admits`] itself), and scores only
//! admitted rows. No graph index: every admitted row is scored. A partition of 4,096 rows or
//! more is first scanned in an int8 copy, and one of 16,384 or more in a copy of its sign bits
//! before that, each pass keeping a wider pool than the next; every score returned is the exact
//! f32 cosine of a row the passes kept (recall figures at [`BINARY_FACTOR`] and
//! [`RESCORE_MIN`]).
//!
//! Durability: every upsert/delete is one SQLite transaction (WAL, `synchronous=FULL`), committed
//! before the in-memory state changes and before the call returns. `secure_delete` zeroes deleted
//! rows and freed pages in place; [`VectorIndex::compact`] checkpoints and truncates the WAL
//! (which still holds earlier images of those pages), so no deleted vector survives in any
//! file. It vacuums only when free pages make up [`VACUUM_FREE_FRACTION`] of the file: a vacuum
//! rewrites the whole file, which a deletion of a few entries should not pay for.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};

use multiversion::multiversion;
use parking_lot::{Mutex, RwLock};
use registry_core::asset::{AssetId, AssetKind};
use registry_core::retrieval::{IndexKeys, ScoredId, VectorEntry, VectorIndex, VisibilityFilter};
use registry_core::{CoreError, CoreResult};
use rusqlite::{Connection, OptionalExtension, params};

const DB_FILE: &str = "vectors.sqlite3";
/// Share of free pages above which [`VectorIndex::compact`] gives the space back (vacuum).
pub const VACUUM_FREE_FRACTION: f64 = 0.25;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("vector has dimension {got}, index has {want}")]
    Dimension { want: usize, got: usize },
    #[error("vector for {0} has a non-finite component")]
    NonFinite(AssetId),
    #[error("stored row is corrupt: {0}")]
    Corrupt(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl From<Error> for CoreError {
    fn from(e: Error) -> Self {
        match e {
            Error::Dimension { .. } | Error::NonFinite(_) => CoreError::validation(e.to_string()),
            other => CoreError::backend("vector-index", other),
        }
    }
}

/// Dot product in chunks of eight lanes, so LLVM keeps eight independent accumulators in SIMD
/// registers instead of one serial dependency chain; compiled for the wider vector units too and
/// chosen at run time by what the CPU has.
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0.0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut tail = 0.0f32;
    for (x, y) in ra.iter().zip(rb) {
        tail += x * y;
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// The part of an entry's keys that a filter inspects besides the scope key.
#[derive(Clone, PartialEq, Eq, Hash)]
struct LabelKey {
    kind: AssetKind,
    acl: Vec<String>,
    tags: Vec<String>,
}

/// Rows an admitted scan must have before it goes through the int8 copy first.
const QUANTISED_FROM_ROWS: usize = 4096;
/// Candidates the int8 pass keeps beyond the requested hits (at least as many again as are
/// requested), re-scored exactly in f32. The int8 error is small next to the gaps between
/// neighbours: `registry-bench scale` measures recall 1.0 at k 10 and k 200 on random unit
/// vectors (the hardest case: their scores crowd together).
const RESCORE_MIN: usize = 128;
/// Rows a partition must have before its int8 pass is split across cores.
const PARALLEL_FROM_ROWS: usize = 32_768;
/// Rows a partition must have before its search starts with the one-bit pass: below this the
/// int8 pass reads little enough.
const BINARY_FROM_ROWS: usize = 16_384;
/// Rows the one-bit pass hands the int8 pass, per row the int8 pass keeps. On 50,706 SciFact
/// sentence vectors (`vector-recall`), 8 keeps recall@10 at 1.0000 and recall@200 at 0.9994
/// against an exact scan (6: 0.9999 and 0.9985); on random unit vectors, where scores crowd
/// together, 0.982 and 0.950 (`registry-bench scale`).
const BINARY_FACTOR: usize = 8;

/// The query's four-bit code, plane by plane, for the one-bit pass: `q[i] ≈ step · (c[i] −
/// 7.5)` with `c[i] = Σ_p 2^p · bit_p(i)` in `0..=15`.
struct QueryCode {
    /// `planes[w * 4 + p]`: bit plane `p` of word `w`.
    planes: Vec<u64>,
    words: usize,
}

impl QueryCode {
    fn new(q: &[f32]) -> Self {
        let m = q.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let step = if m > 0.0 { 2.0 * m / 15.0 } else { 1.0 };
        let words = q.len().div_ceil(64);
        let mut planes = vec![0u64; words * 4];
        for (i, x) in q.iter().enumerate() {
            let c = ((x + m) / step).round().clamp(0.0, 15.0) as u32;
            for p in 0..4 {
                if (c >> p) & 1 == 1 {
                    planes[(i / 64) * 4 + p] |= 1 << (i % 64);
                }
            }
        }
        QueryCode { planes, words }
    }

    /// An integer in `-15·dim..=15·dim`, monotone in the estimate `Σ_i q[i]·(2b[i] − 1)` of the
    /// cosine with a row whose sign bits are `b` (every row's ±1 code has the same norm):
    /// `Σ q·b ≈ step · (S − 7.5·pop)` with `S = Σ_i c[i]·b[i]`, so `2S − 15·pop` orders rows
    /// as the estimate does.
    #[cfg(test)]
    fn score(&self, row: &[u64]) -> i32 {
        code_score(&self.planes, row)
    }
}

#[inline(always)]
fn code_score(planes: &[u64], row: &[u64]) -> i32 {
    let (mut pop, mut s) = (0u32, 0u32);
    for (p, b) in planes.chunks_exact(4).zip(row) {
        pop += b.count_ones();
        s += (p[0] & b).count_ones()
            + 2 * (p[1] & b).count_ones()
            + 4 * (p[2] & b).count_ones()
            + 8 * (p[3] & b).count_ones();
    }
    2 * s as i32 - 15 * pop as i32
}

/// [`QueryCode::score`] of every row of `rows`: `i32::MIN` for a row not admitted, each other
/// score also counted in `hist` (offset by `span`). Built for CPUs with a population-count
/// instruction (x86-64's baseline has none, and the portable fallback costs several times more).
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx512vpopcntdq+avx2+fma+popcnt",
    "x86_64+avx2+fma+popcnt",
    "x86_64+popcnt",
    "aarch64+neon"
))]
fn score_rows(
    planes: &[u64],
    bits: &[u64],
    labels: &[u32],
    admitted: &[bool],
    span: i32,
    hist: &mut [u32],
    scores: &mut Vec<i32>,
) {
    let words = planes.len() / 4;
    for (row, &label) in bits.chunks_exact(words).zip(labels) {
        if admitted[label as usize] {
            let sc = code_score(planes, row);
            hist[(sc + span) as usize] += 1;
            scores.push(sc);
        } else {
            scores.push(i32::MIN);
        }
    }
}

/// `v`'s sign bits, 64 to a word.
fn sign_bits(v: &[f32], out: &mut Vec<u64>) {
    for chunk in v.chunks(64) {
        let mut w = 0u64;
        for (i, x) in chunk.iter().enumerate() {
            if *x > 0.0 {
                w |= 1 << i;
            }
        }
        out.push(w);
    }
}

/// The one-bit pass: every admitted row whose [`QueryCode::score`] is at least the `pool`-th
/// best (ties kept, so possibly more than `pool` rows), in row order, the same whatever the
/// number of threads. Each thread scores its share of the rows and counts the scores in a
/// histogram; the cut is read off the summed histogram, so no row is ordered against another.
fn binary_pass(
    part: &Partition,
    admitted: &[bool],
    q: &QueryCode,
    pool: usize,
    threads: usize,
) -> Vec<usize> {
    let rows = part.ids.len();
    let words = q.words;
    let span = 15 * 64 * words as i32;
    let bins = 2 * span as usize + 1;
    let score_range = |range: std::ops::Range<usize>| {
        let mut hist = vec![0u32; bins];
        let mut scores = Vec::with_capacity(range.len());
        score_rows(
            &q.planes,
            &part.bits[range.start * words..range.end * words],
            &part.labels[range],
            admitted,
            span,
            &mut hist,
            &mut scores,
        );
        (hist, scores)
    };
    let shares = on_shares(rows, threads, score_range);
    let mut hist = vec![0u32; bins];
    for (_, (h, _)) in &shares {
        for (a, b) in hist.iter_mut().zip(h) {
            *a += b;
        }
    }
    let mut cut = i32::MIN + 1;
    let mut seen = 0usize;
    for b in (0..bins).rev() {
        seen += hist[b] as usize;
        if seen >= pool {
            cut = b as i32 - span;
            break;
        }
    }
    let mut out = Vec::with_capacity(seen.min(rows));
    for (range, (_, scores)) in shares {
        out.extend(
            range
                .zip(scores)
                .filter(|(_, sc)| *sc >= cut)
                .map(|(row, _)| row),
        );
    }
    out
}

/// Threads a large scan is split across: the cores this process may use, at most four.
fn scan_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)))
}

/// The int8 pass over all of `part` on `threads` threads: the best `keep` admitted rows by
/// approximate score, best first, the same whatever the number of threads. The pass is bound by
/// memory bandwidth, which one core does not saturate: each thread scans its share of the rows
/// and keeps its own best `keep`, and the union holds the best `keep` overall.
fn int8_pass(
    part: &Partition,
    admitted: &[bool],
    qq: &[i8],
    q_scale: f32,
    keep: usize,
    threads: usize,
) -> Vec<(OrdF32, usize)> {
    let mut all: Vec<(OrdF32, usize)> = on_shares(part.ids.len(), threads, |range| {
        int8_top(part, admitted, qq, q_scale, range, keep)
    })
    .into_iter()
    .flat_map(|(_, top)| top)
    .collect();
    all.sort_unstable_by(|a, b| b.cmp(a));
    all.truncate(keep);
    all
}

/// The int8 pass over `rows` of `part`: the best `keep` admitted rows by approximate score.
fn int8_top(
    part: &Partition,
    admitted: &[bool],
    qq: &[i8],
    q_scale: f32,
    rows: std::ops::Range<usize>,
    keep: usize,
) -> Vec<(OrdF32, usize)> {
    best_int8(
        part,
        rows.filter(|row| admitted[part.labels[*row] as usize]),
        qq,
        q_scale,
        keep,
    )
}

/// The int8 pass over the given rows only: the best `keep` by approximate score.
fn int8_rows(
    part: &Partition,
    rows: &[usize],
    qq: &[i8],
    q_scale: f32,
    keep: usize,
) -> Vec<(OrdF32, usize)> {
    best_int8(part, rows.iter().copied(), qq, q_scale, keep)
}

/// The best `keep` of `rows` by their int8 score against `qq`.
fn best_int8(
    part: &Partition,
    rows: impl Iterator<Item = usize>,
    qq: &[i8],
    q_scale: f32,
    keep: usize,
) -> Vec<(OrdF32, usize)> {
    let dim = qq.len();
    let mut approx: BinaryHeap<std::cmp::Reverse<(OrdF32, usize)>> =
        BinaryHeap::with_capacity(keep + 1);
    for row in rows {
        let v = &part.q8[row * dim..(row + 1) * dim];
        let item = std::cmp::Reverse((
            OrdF32(dot_i8(qq, v) as f32 * q_scale * part.scales[row]),
            row,
        ));
        if approx.len() < keep {
            approx.push(item);
        } else if let Some(mut worst) = approx.peek_mut()
            && item < *worst
        {
            *worst = item;
        }
    }
    approx.into_iter().map(|std::cmp::Reverse(c)| c).collect()
}

/// `f` over `rows` rows split into `threads` consecutive shares, each on a thread of its own
/// (on this one when `threads` is 1): each share's range with its answer, in row order.
fn on_shares<T: Send>(
    rows: usize,
    threads: usize,
    f: impl Fn(std::ops::Range<usize>) -> T + Sync,
) -> Vec<(std::ops::Range<usize>, T)> {
    if threads <= 1 {
        return vec![(0..rows, f(0..rows))];
    }
    let share = rows.div_ceil(threads);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let range = (t * share).min(rows)..((t + 1) * share).min(rows);
                s.spawn(move || (range.clone(), f(range)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a scan thread does not panic"))
            .collect()
    })
}

/// `v` as int8 with one scale per row: `v[i] ≈ q[i] * scale`.
fn quantise(v: &[f32], out: &mut Vec<i8>) -> f32 {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    out.extend(
        v.iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8),
    );
    scale
}

/// Integer dot product of two int8 rows (widened so the compiler can use multiply-add), built
/// for the same targets as [`dot`].
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0i32; 16];
    let ca = a.chunks_exact(16);
    let cb = b.chunks_exact(16);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += i32::from(i16::from(x[i]) * i16::from(y[i]));
        }
    }
    let mut tail = 0i32;
    for (x, y) in ra.iter().zip(rb) {
        tail += i32::from(*x) * i32::from(*y);
    }
    acc.iter().sum::<i32>() + tail
}

#[derive(Default)]
struct Partition {
    /// Row-major, `ids.len() * dim` values.
    data: Vec<f32>,
    /// The same rows as int8, for a first pass over large partitions (a quarter of the bytes
    /// to read); every hit returned is re-scored from `data`.
    q8: Vec<i8>,
    scales: Vec<f32>,
    /// The same rows as sign bits (`dim.div_ceil(64)` words each), for a first pass over the
    /// largest partitions that reads an eighth of the int8 rows' bytes.
    bits: Vec<u64>,
    ids: Vec<AssetId>,
    labels: Vec<u32>,
    /// Label id → keys (asset id empty, scope key = the partition's), judged by `admits`.
    label_keys: Vec<IndexKeys>,
    label_ids: HashMap<LabelKey, u32>,
}

impl Partition {
    fn label_for(&mut self, scope_key: &str, keys: &IndexKeys) -> u32 {
        let mut acl = keys.acl_keys.clone();
        acl.sort();
        acl.dedup();
        let mut tags = keys.tags.clone();
        tags.sort();
        tags.dedup();
        let lk = LabelKey {
            kind: keys.kind,
            acl,
            tags,
        };
        if let Some(&id) = self.label_ids.get(&lk) {
            return id;
        }
        let id = self.label_keys.len() as u32;
        self.label_keys.push(IndexKeys {
            asset_id: String::new(),
            kind: lk.kind,
            scope_key: scope_key.to_owned(),
            acl_keys: lk.acl.clone(),
            tags: lk.tags.clone(),
        });
        self.label_ids.insert(lk, id);
        id
    }
}

/// Where an id's row lives.
#[derive(Clone)]
struct Slot {
    scope_key: String,
    row: usize,
}

struct Mem {
    dim: usize,
    partitions: HashMap<String, Partition>,
    slots: HashMap<AssetId, Slot>,
}

impl Mem {
    fn insert(&mut self, keys: &IndexKeys, vector: &[f32]) {
        self.remove(&keys.asset_id);
        let part = self.partitions.entry(keys.scope_key.clone()).or_default();
        let label = part.label_for(&keys.scope_key, keys);
        let row = part.ids.len();
        part.data.extend_from_slice(vector);
        let scale = quantise(vector, &mut part.q8);
        part.scales.push(scale);
        sign_bits(vector, &mut part.bits);
        part.ids.push(keys.asset_id.clone());
        part.labels.push(label);
        self.slots.insert(
            keys.asset_id.clone(),
            Slot {
                scope_key: keys.scope_key.clone(),
                row,
            },
        );
    }

    fn remove(&mut self, id: &str) -> bool {
        let Some(slot) = self.slots.remove(id) else {
            return false;
        };
        let dim = self.dim;
        let part = self
            .partitions
            .get_mut(&slot.scope_key)
            .expect("a slot always points into an existing partition");
        let last = part.ids.len() - 1;
        if slot.row != last {
            let (head, tail) = part.data.split_at_mut(last * dim);
            head[slot.row * dim..(slot.row + 1) * dim].copy_from_slice(&tail[..dim]);
            let (qhead, qtail) = part.q8.split_at_mut(last * dim);
            qhead[slot.row * dim..(slot.row + 1) * dim].copy_from_slice(&qtail[..dim]);
            part.scales.swap(slot.row, last);
            let words = dim.div_ceil(64);
            let (bhead, btail) = part.bits.split_at_mut(last * words);
            bhead[slot.row * words..(slot.row + 1) * words].copy_from_slice(&btail[..words]);
            part.ids.swap(slot.row, last);
            part.labels.swap(slot.row, last);
            let moved = &part.ids[slot.row];
            if let Some(s) = self.slots.get_mut(moved) {
                s.row = slot.row;
            }
        }
        part.data.truncate(last * dim);
        part.q8.truncate(last * dim);
        part.scales.pop();
        part.bits.truncate(last * dim.div_ceil(64));
        part.ids.pop();
        part.labels.pop();
        if part.ids.is_empty() {
            self.partitions.remove(&slot.scope_key);
        }
        true
    }
}

/// A total order on scores for the int8 pass's heap.
#[derive(Clone, Copy, PartialEq)]
struct OrdF32(f32);
impl Eq for OrdF32 {}
impl PartialOrd for OrdF32 {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for OrdF32 {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// Candidate in the bounded top-k heap; ordered so the heap's top is the *worst* kept hit.
struct Cand<'a> {
    score: f32,
    id: &'a str,
}

impl PartialEq for Cand<'_> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Cand<'_> {}
impl PartialOrd for Cand<'_> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Cand<'_> {
    /// "Greater" means worse: lower score, then larger id.
    fn cmp(&self, o: &Self) -> Ordering {
        o.score
            .total_cmp(&self.score)
            .then_with(|| self.id.cmp(o.id))
    }
}

/// Exact vector index: SQLite for durability, partitioned matrices in memory for search.
pub struct EmbeddedVectorIndex {
    path: PathBuf,
    dim: usize,
    /// Also serialises writers, so SQLite and memory change in the same order.
    conn: Mutex<Connection>,
    mem: RwLock<Mem>,
}

impl std::fmt::Debug for EmbeddedVectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedVectorIndex")
            .field("path", &self.path)
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

fn encode_list(v: &[String]) -> String {
    serde_json::to_string(v).expect("a list of strings always serialises")
}

fn decode_list(s: &str) -> Result<Vec<String>> {
    serde_json::from_str(s).map_err(|e| Error::Corrupt(e.to_string()))
}

fn vector_to_blob(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 4);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

fn blob_into(blob: &[u8], out: &mut Vec<f32>) {
    out.extend(
        blob.chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
    );
}

impl EmbeddedVectorIndex {
    /// Opens (or creates) the index in `dir` for vectors of dimension `dim`, loading every
    /// stored vector into memory. A directory made for another dimension is refused.
    pub fn open(dir: impl AsRef<Path>, dim: usize) -> Result<Self> {
        if dim == 0 {
            return Err(Error::Dimension { want: 1, got: 0 });
        }
        std::fs::create_dir_all(dir.as_ref())?;
        let path = dir.as_ref().join(DB_FILE);
        let conn = Connection::open(&path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "secure_delete", "ON")?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS vectors (
                 asset_id  TEXT PRIMARY KEY,
                 kind      TEXT NOT NULL,
                 scope_key TEXT NOT NULL,
                 acl_keys  TEXT NOT NULL,
                 tags      TEXT NOT NULL,
                 model     TEXT NOT NULL,
                 vector    BLOB NOT NULL
             );
             CREATE INDEX IF NOT EXISTS vectors_model ON vectors (model);",
        )?;
        let stored: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key = 'dim'", [], |r| r.get(0))
            .optional()?;
        match stored {
            Some(s) => {
                let want: usize = s.parse().map_err(|_| Error::Corrupt(format!("dim {s}")))?;
                if want != dim {
                    return Err(Error::Dimension { want, got: dim });
                }
            }
            None => {
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('dim', ?1)",
                    params![dim.to_string()],
                )?;
            }
        }
        let mem = Self::load(&conn, dim)?;
        Ok(EmbeddedVectorIndex {
            path,
            dim,
            conn: Mutex::new(conn),
            mem: RwLock::new(mem),
        })
    }

    fn load(conn: &Connection, dim: usize) -> Result<Mem> {
        let mut mem = Mem {
            dim,
            partitions: HashMap::new(),
            slots: HashMap::new(),
        };
        let mut stmt = conn.prepare(
            "SELECT asset_id, kind, scope_key, acl_keys, tags, vector FROM vectors ORDER BY rowid",
        )?;
        let mut rows = stmt.query([])?;
        let mut buf = Vec::with_capacity(dim);
        while let Some(r) = rows.next()? {
            let asset_id: String = r.get(0)?;
            let kind: String = r.get(1)?;
            let kind = AssetKind::parse(&kind).ok_or_else(|| Error::Corrupt(kind.clone()))?;
            let keys = IndexKeys {
                asset_id,
                kind,
                scope_key: r.get(2)?,
                acl_keys: decode_list(r.get_ref(3)?.as_str().map_err(rusqlite::Error::from)?)?,
                tags: decode_list(r.get_ref(4)?.as_str().map_err(rusqlite::Error::from)?)?,
            };
            let blob = r.get_ref(5)?.as_blob().map_err(rusqlite::Error::from)?;
            if blob.len() != dim * 4 {
                return Err(Error::Corrupt(format!(
                    "{}: vector of {} bytes",
                    keys.asset_id,
                    blob.len()
                )));
            }
            buf.clear();
            blob_into(blob, &mut buf);
            mem.insert(&keys, &buf);
        }
        for p in mem.partitions.values_mut() {
            p.data.shrink_to_fit();
            p.q8.shrink_to_fit();
            p.scales.shrink_to_fit();
            p.bits.shrink_to_fit();
        }
        Ok(mem)
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Path of the SQLite file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of scope partitions held in memory.
    pub fn partition_count(&self) -> usize {
        self.mem.read().partitions.len()
    }

    fn check(&self, e: &VectorEntry) -> Result<()> {
        if e.vector.len() != self.dim {
            return Err(Error::Dimension {
                want: self.dim,
                got: e.vector.len(),
            });
        }
        if !e.vector.iter().all(|x| x.is_finite()) {
            return Err(Error::NonFinite(e.keys.asset_id.clone()));
        }
        Ok(())
    }

    fn upsert_entries(&self, entries: &[VectorEntry]) -> Result<()> {
        for e in entries {
            self.check(e)?;
        }
        if entries.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn.lock();
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO vectors (asset_id, kind, scope_key, acl_keys, tags, model, vector)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (asset_id) DO UPDATE SET
                   kind = excluded.kind, scope_key = excluded.scope_key,
                   acl_keys = excluded.acl_keys, tags = excluded.tags,
                   model = excluded.model, vector = excluded.vector",
            )?;
            for e in entries {
                let k = &e.keys;
                stmt.execute(params![
                    k.asset_id,
                    k.kind.as_str(),
                    k.scope_key,
                    encode_list(&k.acl_keys),
                    encode_list(&k.tags),
                    e.model,
                    vector_to_blob(&e.vector),
                ])?;
            }
        }
        tx.commit()?;
        let mut mem = self.mem.write();
        for e in entries {
            mem.insert(&e.keys, &e.vector);
        }
        Ok(())
    }

    /// Replaces the governance keys of entries already stored, keeping their vectors and
    /// models (an index whose labels predate a change of tags is re-labelled without
    /// re-embedding). Ids not in the index are skipped; returns how many were re-labelled.
    pub fn relabel(&self, keys: &[IndexKeys]) -> Result<usize> {
        let mut entries = Vec::with_capacity(keys.len());
        {
            let conn = self.conn.lock();
            let mut stmt =
                conn.prepare_cached("SELECT model, vector FROM vectors WHERE asset_id = ?1")?;
            for k in keys {
                let row: Option<(String, Vec<u8>)> = stmt
                    .query_row([&k.asset_id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                let Some((model, blob)) = row else { continue };
                let mut vector = Vec::with_capacity(self.dim);
                blob_into(&blob, &mut vector);
                entries.push(VectorEntry {
                    keys: k.clone(),
                    vector,
                    model,
                });
            }
        }
        for batch in entries.chunks(1000) {
            self.upsert_entries(batch)?;
        }
        Ok(entries.len())
    }

    fn delete_ids(&self, ids: &[AssetId]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn.lock();
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached("DELETE FROM vectors WHERE asset_id = ?1")?;
            for id in ids {
                stmt.execute(params![id])?;
            }
        }
        tx.commit()?;
        let mut mem = self.mem.write();
        for id in ids {
            mem.remove(id);
        }
        Ok(())
    }

    fn search_vec(&self, q: &[f32], filter: &VisibilityFilter, k: usize) -> Result<Vec<ScoredId>> {
        if q.len() != self.dim {
            return Err(Error::Dimension {
                want: self.dim,
                got: q.len(),
            });
        }
        if k == 0 || filter.acl_keys.is_empty() {
            return Ok(vec![]);
        }
        let mem = self.mem.read();
        let dim = self.dim;
        let mut heap: BinaryHeap<Cand<'_>> = BinaryHeap::with_capacity(k + 1);
        let mut visited: Vec<&str> = Vec::with_capacity(filter.scope_keys.len());
        for scope in &filter.scope_keys {
            if visited.contains(&scope.as_str()) {
                continue;
            }
            visited.push(scope);
            let Some(part) = mem.partitions.get(scope) else {
                continue;
            };
            let admitted: Vec<bool> = part.label_keys.iter().map(|l| filter.admits(l)).collect();
            if !admitted.iter().any(|a| *a) {
                continue;
            }
            let mut offer = |row: usize, score: f32| {
                let cand = Cand {
                    score,
                    id: &part.ids[row],
                };
                if heap.len() < k {
                    heap.push(cand);
                } else if let Some(mut worst) = heap.peek_mut()
                    && cand < *worst
                {
                    *worst = cand;
                }
            };
            if part.ids.len() >= QUANTISED_FROM_ROWS {
                // First pass over the int8 rows keeps the best `keep` by approximate score;
                // those are re-scored exactly, so every score returned is the f32 cosine.
                let keep = k + k.max(RESCORE_MIN);
                let mut qq = Vec::with_capacity(dim);
                let q_scale = quantise(q, &mut qq);
                let rows = part.ids.len();
                let threads = if rows >= PARALLEL_FROM_ROWS {
                    scan_threads()
                } else {
                    1
                };
                let approx = if rows >= BINARY_FROM_ROWS {
                    // One bit per value first, then the int8 pass over the rows it keeps.
                    let coarse = binary_pass(
                        part,
                        &admitted,
                        &QueryCode::new(q),
                        keep * BINARY_FACTOR,
                        threads,
                    );
                    int8_rows(part, &coarse, &qq, q_scale, keep)
                } else {
                    int8_pass(part, &admitted, &qq, q_scale, keep, threads)
                };
                for (_, row) in approx {
                    offer(row, dot(q, &part.data[row * dim..(row + 1) * dim]));
                }
            } else {
                for (row, (v, &label)) in part
                    .data
                    .chunks_exact(dim)
                    .zip(part.labels.iter())
                    .enumerate()
                {
                    if admitted[label as usize] {
                        offer(row, dot(q, v));
                    }
                }
            }
        }
        Ok(heap
            .into_sorted_vec()
            .into_iter()
            .map(|c| ScoredId {
                asset_id: c.id.to_owned(),
                score: c.score,
            })
            .collect())
    }

    fn compact_storage(&self) -> Result<()> {
        let conn = self.conn.lock();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
        let free: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
        if pages > 0 && free as f64 / pages as f64 > VACUUM_FREE_FRACTION {
            conn.execute_batch("VACUUM")?;
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        }
        let mut mem = self.mem.write();
        for p in mem.partitions.values_mut() {
            p.data.shrink_to_fit();
            p.q8.shrink_to_fit();
            p.scales.shrink_to_fit();
            p.bits.shrink_to_fit();
        }
        Ok(())
    }

    fn stale_ids(&self, model_tag: &str, limit: usize) -> Result<Vec<AssetId>> {
        let conn = self.conn.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT asset_id FROM vectors WHERE model <> ?1 ORDER BY asset_id LIMIT ?2",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let ids = stmt
            .query_map(params![model_tag, limit], |r| r.get(0))?
            .collect::<std::result::Result<Vec<String>, _>>()?;
        Ok(ids)
    }
}

impl VectorIndex for EmbeddedVectorIndex {
    fn upsert(&self, entries: &[VectorEntry]) -> CoreResult<()> {
        Ok(self.upsert_entries(entries)?)
    }

    fn delete(&self, ids: &[AssetId]) -> CoreResult<()> {
        Ok(self.delete_ids(ids)?)
    }

    fn search(
        &self,
        vector: &[f32],
        filter: &VisibilityFilter,
        k: usize,
    ) -> CoreResult<Vec<ScoredId>> {
        Ok(self.search_vec(vector, filter, k)?)
    }

    fn compact(&self) -> CoreResult<()> {
        Ok(self.compact_storage()?)
    }

    fn ids_not_made_by(&self, model_tag: &str, limit: usize) -> CoreResult<Vec<AssetId>> {
        Ok(self.stale_ids(model_tag, limit)?)
    }

    fn missing(&self, ids: &[AssetId]) -> CoreResult<Vec<AssetId>> {
        let mem = self.mem.read();
        Ok(ids
            .iter()
            .filter(|id| !mem.slots.contains_key(*id))
            .cloned()
            .collect())
    }

    fn relabel(&self, keys: &[IndexKeys]) -> CoreResult<usize> {
        Ok(EmbeddedVectorIndex::relabel(self, keys)?)
    }

    fn len(&self) -> CoreResult<u64> {
        Ok(self.mem.read().slots.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_i8_matches_the_naive_sum_at_every_length() {
        for len in [0usize, 1, 15, 16, 17, 383, 384, 385] {
            let a: Vec<i8> = (0..len)
                .map(|i| ((i * 37 % 255) as i32 - 127) as i8)
                .collect();
            let b: Vec<i8> = (0..len)
                .map(|i| ((i * 91 % 255) as i32 - 127) as i8)
                .collect();
            let naive: i32 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| i32::from(*x) * i32::from(*y))
                .sum();
            assert_eq!(dot_i8(&a, &b), naive, "len {len}");
        }
    }

    #[test]
    fn dot_matches_the_naive_sum_at_every_length() {
        for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 383, 384, 385] {
            let a: Vec<f32> = (0..len)
                .map(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0)
                .collect();
            let b: Vec<f32> = (0..len)
                .map(|i| ((i * 5 % 11) as f32 - 5.0) / 10.0)
                .collect();
            let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - naive).abs() < 1e-4, "len {len}");
        }
    }

    /// `n` deterministic vectors in partition `s`, every `hidden`-th one not public, repeating
    /// after `period` rows so that equal scores must be broken the same way on every split.
    fn spread(dim: usize, n: usize, period: usize, hidden: usize) -> Mem {
        let mut mem = Mem {
            dim,
            partitions: HashMap::new(),
            slots: HashMap::new(),
        };
        for i in 0..n {
            let v: Vec<f32> = (0..dim)
                .map(|j| (((i % period) * 31 + j * 17) % 97) as f32 / 97.0 - 0.5)
                .collect();
            let acl = if i % hidden == 0 { "hidden" } else { "public" };
            mem.insert(
                &IndexKeys {
                    asset_id: format!("a{i:05}"),
                    kind: AssetKind::Chunk,
                    scope_key: "s".into(),
                    acl_keys: vec![acl.into()],
                    tags: vec![],
                },
                &v,
            );
        }
        mem
    }

    /// Which labels of `part` a filter for public entries admits.
    fn public_only(part: &Partition) -> Vec<bool> {
        part.label_keys
            .iter()
            .map(|l| l.acl_keys == ["public"])
            .collect()
    }

    #[test]
    fn the_int8_pass_keeps_the_same_rows_on_any_number_of_threads() {
        let dim = 24;
        let mem = spread(dim, 5000, 1700, 7);
        let part = &mem.partitions["s"];
        let admitted = public_only(part);
        let q: Vec<f32> = (0..dim).map(|j| (j as f32 * 0.37).sin()).collect();
        let mut qq = Vec::new();
        let scale = quantise(&q, &mut qq);
        let one = int8_pass(part, &admitted, &qq, scale, 300, 1);
        assert_eq!(one.len(), 300);
        assert!(one.windows(2).all(|w| w[0] >= w[1]), "best first");
        assert!(
            one.iter()
                .all(|(_, row)| part.label_keys[part.labels[*row] as usize].acl_keys == ["public"]),
            "only admitted rows"
        );
        for threads in [2, 3, 4, 7] {
            let rows: Vec<usize> = int8_pass(part, &admitted, &qq, scale, 300, threads)
                .into_iter()
                .map(|(_, r)| r)
                .collect();
            let want: Vec<usize> = one.iter().map(|(_, r)| *r).collect();
            assert_eq!(rows, want, "{threads} threads");
        }
    }

    #[test]
    fn the_one_bit_pass_keeps_at_least_the_pool_and_the_same_rows_on_any_number_of_threads() {
        let dim = 130; // three words, the last one partial
        let mem = spread(dim, 6000, 2100, 5);
        let part = &mem.partitions["s"];
        let admitted = public_only(part);
        let q: Vec<f32> = (0..dim).map(|j| (j as f32 * 0.29).cos()).collect();
        let code = QueryCode::new(&q);
        let one = binary_pass(part, &admitted, &code, 400, 1);
        assert!(
            one.len() >= 400,
            "ties may add rows, never drop below the pool"
        );
        assert!(one.windows(2).all(|w| w[0] < w[1]), "row order");
        assert!(
            one.iter()
                .all(|row| part.label_keys[part.labels[*row] as usize].acl_keys == ["public"]),
            "only admitted rows"
        );
        // Every kept row scores at least as well as every row left out.
        let words = dim.div_ceil(64);
        let score = |row: usize| code.score(&part.bits[row * words..(row + 1) * words]);
        let worst_kept = one.iter().map(|r| score(*r)).min().unwrap();
        let kept: std::collections::HashSet<usize> = one.iter().copied().collect();
        assert!(
            (0..part.ids.len())
                .filter(|r| admitted[part.labels[*r] as usize] && !kept.contains(r))
                .all(|r| score(r) < worst_kept)
        );
        for threads in [2, 3, 4] {
            assert_eq!(binary_pass(part, &admitted, &code, 400, threads), one);
        }
        // A pool larger than the admitted rows keeps them all.
        let all = binary_pass(part, &admitted, &code, 1_000_000, 2);
        assert_eq!(all.len(), admitted_rows(part, &admitted));
    }

    fn admitted_rows(part: &Partition, admitted: &[bool]) -> usize {
        part.labels
            .iter()
            .filter(|l| admitted[**l as usize])
            .count()
    }

    #[test]
    fn the_one_bit_estimate_orders_rows_as_the_cosine_does_for_clear_cases() {
        let dim = 64;
        let q: Vec<f32> = (0..dim)
            .map(|j| if j % 2 == 0 { 0.2 } else { -0.1 })
            .collect();
        let code = QueryCode::new(&q);
        let bits = |v: &[f32]| {
            let mut out = vec![];
            sign_bits(v, &mut out);
            out
        };
        let same = bits(&q);
        let opposite = bits(&q.iter().map(|x| -x).collect::<Vec<_>>());
        let half: Vec<f32> = q
            .iter()
            .enumerate()
            .map(|(j, x)| if j < 32 { *x } else { -x })
            .collect();
        let (s, h, o) = (
            code.score(&same),
            code.score(&bits(&half)),
            code.score(&opposite),
        );
        assert!(s > h && h > o, "{s} > {h} > {o}");
    }

    #[test]
    fn swap_remove_keeps_slots_consistent() {
        let mut mem = Mem {
            dim: 2,
            partitions: HashMap::new(),
            slots: HashMap::new(),
        };
        let k = |id: &str| IndexKeys {
            asset_id: id.into(),
            kind: AssetKind::Memory,
            scope_key: "s".into(),
            acl_keys: vec!["public".into()],
            tags: vec![],
        };
        for (i, id) in ["a", "b", "c", "d"].iter().enumerate() {
            mem.insert(&k(id), &[i as f32, 0.0]);
        }
        assert!(mem.remove("b"));
        assert!(!mem.remove("b"));
        let p = &mem.partitions["s"];
        for (id, slot) in &mem.slots {
            assert_eq!(&p.ids[slot.row], id);
            let want = match id.as_str() {
                "a" => 0.0,
                "c" => 2.0,
                "d" => 3.0,
                _ => unreachable!(),
            };
            assert_eq!(p.data[slot.row * 2], want);
            // The int8 and sign-bit copies moved with the row.
            let mut q8 = vec![];
            quantise(&[want, 0.0], &mut q8);
            assert_eq!(&p.q8[slot.row * 2..slot.row * 2 + 2], &q8[..]);
            assert_eq!(p.bits[slot.row], u64::from(want > 0.0));
        }
        assert_eq!(p.bits.len(), p.ids.len(), "one word per row at dimension 2");
        for id in ["a", "c", "d"] {
            assert!(mem.remove(id));
        }
        assert!(mem.partitions.is_empty(), "an empty partition is dropped");
    }
}
