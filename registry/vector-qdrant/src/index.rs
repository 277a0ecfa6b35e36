//! [`QdrantVectorIndex`]: the synchronous [`VectorIndex`] over Qdrant's asynchronous gRPC client.
//!
//! The index owns a small tokio runtime (one worker, which drives the connections) and blocks
//! the calling thread on each request (see [`QdrantVectorIndex::block_on`] for where it may be
//! called from).

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use qdrant_client::Qdrant;
use qdrant_client::qdrant::points_update_operation::{Operation, SetPayload};
use qdrant_client::qdrant::value::Kind;
use qdrant_client::qdrant::vectors_config::Config as VectorsConfigKind;
use qdrant_client::qdrant::{
    Condition, CountPointsBuilder, CreateCollectionBuilder, CreateFieldIndexCollectionBuilder,
    DeletePointsBuilder, Distance, FieldType, Filter, GetPointsBuilder, KeywordIndexParamsBuilder,
    OptimizersConfigDiffBuilder, PayloadIncludeSelector, PointId, PointStruct, PointsIdsList,
    PointsUpdateOperation, QueryPointsBuilder, ScrollPointsBuilder, SearchParamsBuilder,
    UpdateBatchPointsBuilder, UpdateCollectionBuilder, UpsertPointsBuilder, Value,
    VectorParamsBuilder, WalConfigDiffBuilder,
};
use registry_core::CoreResult;
use registry_core::asset::AssetId;
use registry_core::retrieval::{IndexKeys, ScoredId, VectorEntry, VectorIndex, VisibilityFilter};
use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

use crate::filter::{self, ASSET_ID, KEYWORD_FIELDS, SCOPE_KEY};
use crate::{Error, Result};

/// Points per upsert or payload request: keeps each gRPC message well under Qdrant's default
/// 32 MiB limit at 1024 dimensions, with a margin for payloads.
const BATCH: usize = 256;

/// The vacuum optimiser rewrites a segment once more than this share of its points is deleted:
/// zero, so that one purged point is enough and its bytes leave the segment files within
/// seconds (Qdrant's default, 0.2, would keep them until a fifth of the segment is deleted).
pub const DELETED_THRESHOLD: f64 = 0.0;
/// ... but only a segment of at least this many points (live and deleted): Qdrant refuses less.
pub const VACUUM_MIN_POINTS: u64 = 100;
/// Size of one write-ahead-log segment of a collection the index creates, in MiB: a deleted
/// point's upsert record stays in the log until later writes have filled its segment and the
/// next one (Qdrant keeps one closed segment), so a small one bounds that residue (Qdrant's
/// default is 32 MiB).
pub const WAL_SEGMENT_MIB: u64 = 1;

/// What a purge leaves in Qdrant and when it goes: the deletion receipt's `method` for the
/// vector index. Checked against a real server by the deletion canary test.
pub const PURGE_METHOD: &str = "Qdrant: points deleted (waited for), then the vacuum optimizer \
    triggered (deleted_threshold 0): within seconds it rewrites each segment of at least 100 \
    points that holds a deleted point, and the old segment files go at Qdrant's next flush \
    (every 5 s by default); a segment of fewer than 100 points keeps the deleted point's vector \
    and payload until it reaches 100 points or is merged. Qdrant's write-ahead log keeps the \
    point's upsert record (vector and payload) until later writes have filled its 1 MiB \
    segment and the next one, and the next flush after that";

/// The optimiser settings a purge relies on (see [`DELETED_THRESHOLD`]).
fn purge_optimizers() -> OptimizersConfigDiffBuilder {
    OptimizersConfigDiffBuilder::default()
        .deleted_threshold(DELETED_THRESHOLD)
        .vacuum_min_vector_number(VACUUM_MIN_POINTS)
}

/// Where the index lives and what it holds.
#[derive(Debug, Clone)]
pub struct QdrantOptions {
    /// gRPC endpoint, e.g. `http://127.0.0.1:6334` (`https://` for TLS with the system's roots).
    pub url: String,
    /// Sent as `api-key` with every request.
    pub api_key: Option<String>,
    /// First part of the collection name; lets several registries share one Qdrant.
    /// ASCII letters, digits, `_` and `-` only.
    pub collection_prefix: String,
    /// Dimension of the vectors (the embedding model's).
    pub dim: usize,
    /// [`registry_core::retrieval::ModelInfo::tag`] of the embedder: with `dim` it names the
    /// collection (see [`filter::collection_name`]).
    pub model_tag: String,
    /// Per request, and for establishing the connection.
    pub timeout: Duration,
    /// Exact (brute-force) search instead of Qdrant's HNSW. Qdrant searches exactly anyway
    /// while a segment is below its indexing threshold (about 10 000 vectors by default).
    pub exact: bool,
}

impl QdrantOptions {
    /// Options with the defaults: prefix `registry`, no API key, 30 s timeout, HNSW search.
    pub fn new(url: impl Into<String>, dim: usize, model_tag: impl Into<String>) -> Self {
        QdrantOptions {
            url: url.into(),
            api_key: None,
            collection_prefix: "registry".into(),
            dim,
            model_tag: model_tag.into(),
            timeout: Duration::from_secs(30),
            exact: false,
        }
    }

    /// The collection these options name.
    pub fn collection(&self) -> String {
        filter::collection_name(&self.collection_prefix, &self.model_tag, self.dim)
    }

    fn validate(&self) -> Result<()> {
        if self.dim == 0 {
            return Err(Error::Dimension { want: 1, got: 0 });
        }
        let p = &self.collection_prefix;
        if p.is_empty()
            || p.len() > 64
            || !p
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(Error::config(format!(
                "collection_prefix {p:?}: 1 to 64 ASCII letters, digits, '_' or '-'"
            )));
        }
        if self.timeout.is_zero() {
            return Err(Error::config("timeout must be above zero"));
        }
        Ok(())
    }
}

/// A [`VectorIndex`] in one Qdrant collection (cosine distance), one point per asset.
///
/// Each point's payload holds the governance keys ([`filter`]'s keys, each with a keyword
/// payload index) and the model tag; [`VectorIndex::search`] sends the
/// [`filter::filter_for`] translation of the caller's filter with the query, so Qdrant never
/// scores a point outside it.
pub struct QdrantVectorIndex {
    client: Qdrant,
    prefix: String,
    collection: String,
    dim: usize,
    exact: bool,
    server_version: String,
    /// `None` only while dropping.
    rt: Option<Runtime>,
}

impl std::fmt::Debug for QdrantVectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QdrantVectorIndex")
            .field("collection", &self.collection)
            .field("dim", &self.dim)
            .field("exact", &self.exact)
            .field("server_version", &self.server_version)
            .finish_non_exhaustive()
    }
}

impl Drop for QdrantVectorIndex {
    /// Dropping a runtime blocks until its workers stop, which tokio refuses inside an async
    /// context (the end of an async `main`); `shutdown_background` does not wait.
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// The asset id a point carries in its payload.
fn asset_id_of(payload: &HashMap<String, Value>) -> Result<AssetId> {
    match payload.get(ASSET_ID).and_then(|v| v.kind.as_ref()) {
        Some(Kind::StringValue(s)) => Ok(s.clone()),
        _ => Err(Error::Corrupt(format!(
            "a point without a string {ASSET_ID}"
        ))),
    }
}

fn ids_list(ids: impl IntoIterator<Item = String>) -> PointsIdsList {
    PointsIdsList {
        ids: ids.into_iter().map(PointId::from).collect(),
    }
}

/// Runs `fut` on `rt` and waits for it. From a plain thread or a `spawn_blocking` thread it
/// simply blocks. On a worker of a multi-threaded runtime (an async handler) the worker first
/// hands its other tasks away (`block_in_place`), because tokio refuses to block a worker on
/// another runtime. A current-thread runtime cannot give its thread away: there the request runs
/// on a scoped thread of its own while the caller's thread waits (and that runtime's other
/// tasks with it).
fn block_on<F>(rt: &Runtime, fut: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    match Handle::try_current() {
        Err(_) => rt.block_on(fut),
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| rt.block_on(fut))
        }
        Ok(_) => std::thread::scope(|s| {
            s.spawn(|| rt.block_on(fut))
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        }),
    }
}

impl QdrantVectorIndex {
    /// Connects (checking that the server answers), then opens the collection the options name,
    /// creating it and its payload indexes if missing. A collection of that name with another
    /// dimension or distance is refused.
    ///
    /// Like every method, it may be called from any thread, inside a tokio runtime or not
    /// (see [`block_on`]).
    pub fn connect(options: QdrantOptions) -> Result<Self> {
        options.validate()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("qdrant-index")
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        // The client's own compatibility check prints to stdout (which the MCP stdio transport
        // owns) and starts a runtime of its own; the health check below replaces it.
        let client = Qdrant::from_url(&options.url)
            .api_key(options.api_key.clone())
            .timeout(options.timeout)
            .connect_timeout(options.timeout)
            .skip_compatibility_check()
            .build()?;
        let mut ix = QdrantVectorIndex {
            client,
            prefix: options.collection_prefix.clone(),
            collection: options.collection(),
            dim: options.dim,
            exact: options.exact,
            server_version: String::new(),
            rt: Some(rt),
        };
        ix.server_version = ix.block_on(ix.client.health_check())?.version;
        ix.block_on(ix.open_collection())?;
        Ok(ix)
    }

    /// Runs `fut` on the index's runtime and waits for it (see [`block_on`]).
    fn block_on<F>(&self, fut: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        block_on(self.rt.as_ref().expect("the runtime lives until drop"), fut)
    }

    async fn open_collection(&self) -> Result<()> {
        let c = &self.collection;
        if !self.client.collection_exists(c).await? {
            let created = self
                .client
                .create_collection(
                    CreateCollectionBuilder::new(c)
                        .vectors_config(VectorParamsBuilder::new(self.dim as u64, Distance::Cosine))
                        .optimizers_config(purge_optimizers())
                        .wal_config(
                            WalConfigDiffBuilder::default().wal_capacity_mb(WAL_SEGMENT_MIB),
                        ),
                )
                .await;
            // Another node may have created it in between; the check below judges it.
            if let Err(e) = created
                && !self.client.collection_exists(c).await?
            {
                return Err(e.into());
            }
        }
        self.check_collection().await?;
        for field in KEYWORD_FIELDS {
            let mut params = KeywordIndexParamsBuilder::default();
            if field == SCOPE_KEY {
                // Qdrant keeps each tenant's points together on disk when told which field
                // names the tenant (most filters name scopes of one tenant).
                params = params.is_tenant(true);
            }
            self.client
                .create_field_index(
                    CreateFieldIndexCollectionBuilder::new(c, field, FieldType::Keyword)
                        .field_index_params(params)
                        .wait(true),
                )
                .await?;
        }
        Ok(())
    }

    async fn check_collection(&self) -> Result<()> {
        let info = self.client.collection_info(&self.collection).await?;
        let params = info
            .result
            .and_then(|i| i.config)
            .and_then(|c| c.params)
            .and_then(|p| p.vectors_config)
            .and_then(|v| v.config);
        match params {
            Some(VectorsConfigKind::Params(p))
                if p.size == self.dim as u64 && p.distance == Distance::Cosine as i32 =>
            {
                Ok(())
            }
            Some(VectorsConfigKind::Params(p)) if p.size != self.dim as u64 => {
                Err(Error::Dimension {
                    want: p.size as usize,
                    got: self.dim,
                })
            }
            other => Err(Error::Collection {
                name: self.collection.clone(),
                found: format!("{other:?}"),
            }),
        }
    }

    /// Deletes the collection and every point in it (an operator's clean-up after a model
    /// change, or a test's).
    pub fn drop_collection(self) -> Result<()> {
        self.block_on(self.client.delete_collection(&self.collection))?;
        Ok(())
    }

    /// Deletes the collections other models made under this index's prefix (see
    /// [`filter::is_collection_of`]) and names them: after a change of model has been
    /// re-embedded into this index's collection, a purge reaches only this one, so no other may
    /// keep a vector of what it purged.
    pub fn drop_other_models(&self) -> Result<Vec<String>> {
        let names: Vec<String> = self
            .block_on(self.client.list_collections())?
            .collections
            .into_iter()
            .map(|c| c.name)
            .filter(|n| *n != self.collection && filter::is_collection_of(&self.prefix, n))
            .collect();
        for n in &names {
            self.block_on(self.client.delete_collection(n.as_str()))?;
        }
        Ok(names)
    }

    /// The collection this index reads and writes.
    pub fn collection(&self) -> &str {
        &self.collection
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The version the server reported at connect.
    pub fn server_version(&self) -> &str {
        &self.server_version
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
        // The last entry of an id wins, as in the embedded index; one point per id per request.
        let mut last: HashMap<&str, usize> = HashMap::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            last.insert(&e.keys.asset_id, i);
        }
        let points: Vec<PointStruct> = entries
            .iter()
            .enumerate()
            .filter(|(i, e)| last[e.keys.asset_id.as_str()] == *i)
            .map(|(_, e)| {
                PointStruct::new(
                    filter::point_id(&e.keys.asset_id),
                    e.vector.clone(),
                    filter::entry_payload(&e.keys, &e.model),
                )
            })
            .collect();
        self.block_on(async {
            for chunk in points.chunks(BATCH) {
                self.client
                    .upsert_points(
                        UpsertPointsBuilder::new(&self.collection, chunk.to_vec()).wait(true),
                    )
                    .await?;
            }
            Ok(())
        })
    }

    fn delete_ids(&self, ids: &[AssetId]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.block_on(async {
            for chunk in ids.chunks(BATCH * 4) {
                self.client
                    .delete_points(
                        DeletePointsBuilder::new(&self.collection)
                            .points(ids_list(chunk.iter().map(|id| filter::point_id(id))))
                            .wait(true),
                    )
                    .await?;
            }
            Ok(())
        })
    }

    fn search_vec(&self, q: &[f32], f: &VisibilityFilter, k: usize) -> Result<Vec<ScoredId>> {
        if q.len() != self.dim {
            return Err(Error::Dimension {
                want: self.dim,
                got: q.len(),
            });
        }
        if !q.iter().all(|x| x.is_finite()) {
            return Err(Error::NonFinite("the query".into()));
        }
        let Some(qf) = filter::filter_for(f) else {
            return Ok(vec![]);
        };
        if k == 0 {
            return Ok(vec![]);
        }
        let request = QueryPointsBuilder::new(&self.collection)
            .query(q.to_vec())
            .filter(qf)
            .limit(k as u64)
            .with_payload(PayloadIncludeSelector {
                fields: vec![ASSET_ID.to_string()],
            })
            .params(SearchParamsBuilder::default().exact(self.exact));
        let points = self.block_on(self.client.query(request))?.result;
        let mut hits = points
            .iter()
            .map(|p| {
                Ok(ScoredId {
                    asset_id: asset_id_of(&p.payload)?,
                    score: p.score,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // Best first; equal scores by asset id, as the embedded index orders them.
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.asset_id.cmp(&b.asset_id))
        });
        Ok(hits)
    }

    /// Sets the governance keys of the points that exist, leaving vectors and model tags as
    /// they are. Each update selects its point by a filter (`has_id`), so a point deleted
    /// meanwhile is skipped instead of failing the batch.
    /// The asset ids among `ids` (at most [`BATCH`]) that have a point in the collection.
    async fn present(&self, ids: impl Iterator<Item = &AssetId>) -> Result<Vec<AssetId>> {
        let found = self
            .client
            .get_points(
                GetPointsBuilder::new(
                    &self.collection,
                    ids.map(|id| PointId::from(filter::point_id(id)))
                        .collect::<Vec<_>>(),
                )
                .with_payload(PayloadIncludeSelector {
                    fields: vec![ASSET_ID.to_string()],
                })
                .with_vectors(false),
            )
            .await?
            .result;
        found.iter().map(|p| asset_id_of(&p.payload)).collect()
    }

    /// The ids among `ids` that have no point in the collection.
    fn absent(&self, ids: &[AssetId]) -> Result<Vec<AssetId>> {
        self.block_on(async {
            let mut out = vec![];
            for chunk in ids.chunks(BATCH) {
                let present = self.present(chunk.iter()).await?;
                out.extend(chunk.iter().filter(|id| !present.contains(*id)).cloned());
            }
            Ok(out)
        })
    }

    fn relabel_keys(&self, keys: &[IndexKeys]) -> Result<usize> {
        self.block_on(async {
            let mut done = 0;
            for chunk in keys.chunks(BATCH) {
                let present = self.present(chunk.iter().map(|k| &k.asset_id)).await?;
                let ops: Vec<PointsUpdateOperation> = chunk
                    .iter()
                    .filter(|k| present.contains(&k.asset_id))
                    .map(|k| PointsUpdateOperation {
                        operation: Some(Operation::SetPayload(SetPayload {
                            payload: filter::keys_payload(k),
                            points_selector: Some(
                                Filter::must([Condition::has_id([filter::point_id(&k.asset_id)])])
                                    .into(),
                            ),
                            ..Default::default()
                        })),
                    })
                    .collect();
                if ops.is_empty() {
                    continue;
                }
                done += ops.len();
                self.client
                    .update_points_batch(
                        UpdateBatchPointsBuilder::new(&self.collection, ops).wait(true),
                    )
                    .await?;
            }
            Ok(done)
        })
    }

    fn stale_ids(&self, model_tag: &str, limit: usize) -> Result<Vec<AssetId>> {
        let mut out = Vec::new();
        self.block_on(async {
            let mut offset: Option<PointId> = None;
            while out.len() < limit {
                let page = (limit - out.len()).min(1024) as u32;
                let mut req = ScrollPointsBuilder::new(&self.collection)
                    .filter(filter::not_made_by(model_tag))
                    .limit(page)
                    .with_payload(PayloadIncludeSelector {
                        fields: vec![ASSET_ID.to_string()],
                    })
                    .with_vectors(false);
                if let Some(o) = offset.take() {
                    req = req.offset(o);
                }
                let resp = self.client.scroll(req).await?;
                for p in &resp.result {
                    out.push(asset_id_of(&p.payload)?);
                }
                match resp.next_page_offset {
                    Some(next) if !resp.result.is_empty() => offset = Some(next),
                    _ => break,
                }
            }
            Ok::<_, Error>(())
        })?;
        out.truncate(limit);
        Ok(out)
    }

    /// Asks Qdrant to run its optimisers now (an update of the collection's optimiser settings,
    /// which is how Qdrant's documentation says to trigger them), with the vacuum settings a
    /// purge relies on (a collection made by an earlier version gets them here). The vacuum
    /// optimiser then rewrites, in the background, the segments that hold a deleted point (see
    /// [`PURGE_METHOD`]): unlike the embedded index, deleted vectors are not gone from disk when
    /// this returns.
    fn trigger_optimisers(&self) -> Result<()> {
        self.block_on(self.client.update_collection(
            UpdateCollectionBuilder::new(&self.collection).optimizers_config(purge_optimizers()),
        ))?;
        Ok(())
    }

    fn count(&self) -> Result<u64> {
        let resp = self.block_on(
            self.client
                .count(CountPointsBuilder::new(&self.collection).exact(true)),
        )?;
        Ok(resp.result.map(|r| r.count).unwrap_or(0))
    }
}

impl VectorIndex for QdrantVectorIndex {
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
        Ok(self.trigger_optimisers()?)
    }

    fn relabel(&self, keys: &[IndexKeys]) -> CoreResult<usize> {
        Ok(self.relabel_keys(keys)?)
    }

    fn ids_not_made_by(&self, model_tag: &str, limit: usize) -> CoreResult<Vec<AssetId>> {
        Ok(self.stale_ids(model_tag, limit)?)
    }

    fn missing(&self, ids: &[AssetId]) -> CoreResult<Vec<AssetId>> {
        Ok(self.absent(ids)?)
    }

    fn len(&self) -> CoreResult<u64> {
        Ok(self.count()?)
    }

    fn shared(&self) -> bool {
        true
    }

    fn purge_method(&self) -> Option<&'static str> {
        Some(PURGE_METHOD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    /// A future that needs the index runtime's timer, as a gRPC request needs its IO driver.
    async fn work() -> u32 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        7
    }

    #[test]
    fn block_on_from_a_plain_thread() {
        let rt = runtime();
        assert_eq!(block_on(&rt, work()), 7);
        rt.shutdown_background();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn block_on_from_a_multi_thread_worker_and_a_blocking_thread() {
        let rt = std::sync::Arc::new(runtime());
        assert_eq!(block_on(&rt, work()), 7);
        let rt2 = rt.clone();
        let v = tokio::task::spawn_blocking(move || block_on(&rt2, work()))
            .await
            .unwrap();
        assert_eq!(v, 7);
        let rt = std::sync::Arc::into_inner(rt).unwrap();
        rt.shutdown_background();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn block_on_from_a_current_thread_runtime() {
        let rt = runtime();
        assert_eq!(block_on(&rt, work()), 7);
        rt.shutdown_background();
    }

    #[test]
    fn options_are_validated_before_connecting() {
        let bad = |f: &dyn Fn(&mut QdrantOptions)| {
            let mut o = QdrantOptions::new("http://127.0.0.1:1", 16, "m@1");
            f(&mut o);
            QdrantVectorIndex::connect(o).unwrap_err()
        };
        assert!(matches!(bad(&|o| o.dim = 0), Error::Dimension { .. }));
        assert!(matches!(
            bad(&|o| o.collection_prefix = "a/b".into()),
            Error::Config(_)
        ));
        assert!(matches!(
            bad(&|o| o.collection_prefix = String::new()),
            Error::Config(_)
        ));
        assert!(matches!(
            bad(&|o| o.timeout = Duration::ZERO),
            Error::Config(_)
        ));
    }

    #[test]
    fn connecting_to_no_server_is_an_error_not_a_hang() {
        let mut o = QdrantOptions::new("http://127.0.0.1:1", 16, "m@1");
        o.timeout = Duration::from_secs(5);
        let t = std::time::Instant::now();
        let e = QdrantVectorIndex::connect(o).unwrap_err();
        assert!(matches!(e, Error::Qdrant(_)), "{e}");
        assert!(t.elapsed() < Duration::from_secs(10));
        let core: registry_core::CoreError = e.into();
        assert_eq!(core.code(), registry_core::ErrorCode::Internal);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_index_dropped_inside_a_runtime_does_not_panic() {
        // connect fails without a server; what matters is a runtime built and dropped here.
        let o = QdrantOptions::new("http://127.0.0.1:1", 16, "m@1");
        let _ = QdrantVectorIndex::connect(o);
    }
}
