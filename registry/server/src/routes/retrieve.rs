//! Endpoints that framework retrievers call as they are:
//! - `POST /v1/retrieve` — LlamaIndex's `PathwayRetriever` (`llama-index-retrievers-pathway`):
//!   `{query, k}` in, a bare array of `{text, metadata, dist}` out (the client scores `1 - dist`).
//! - `POST /v1/retrieve/langchain` — LangChain's `RemoteLangChainRetriever`
//!   (`langchain-community`): `{message}` in, `{response: [{page_content, metadata}]}` out.
//!
//! Both draw memory and knowledge hits the caller may see (each source filters by scope and
//! ACL before it ranks), merge them by relevance (cosine for memory; for evidence, the
//! knowledge search's relevance, max(cosine, bm25/(bm25+10))) and keep the k best; `min_score`
//! (default 0) drops weaker ones. Metadata says which is which: memory is past experience, evidence is cited.

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use registry_core::FieldError;
use registry_core::principal::Principal;
use registry_memory::MemoryClass;
use registry_memory::search::SearchRequest as MemorySearch;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ApiJson, ApiQuery as Query, RetrieverAuth};
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(
    paths(retrieve, retrieve_langchain),
    components(schemas(RetrieveBody, RetrievedNode, LangChainBody, LangChainAnswer, ErrorBody))
)]
pub struct RetrieveApi;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/retrieve", post(retrieve))
        .route("/v1/retrieve/langchain", post(retrieve_langchain))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RetrieveSource {
    Memory,
    Knowledge,
}

/// The Pathway retriever's request, plus optional registry fields.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrieveBody {
    /// At most 4,096 characters (a memory search's and a knowledge search's cap).
    #[schema(pattern = r"\S", max_length = 4096)]
    pub query: String,
    /// Hits (default 4, at most 100).
    #[schema(minimum = 0, maximum = 100)]
    pub k: Option<usize>,
    /// Pathway's JMESPath filter; not supported here (must be absent or null).
    #[schema(schema_with = null_only)]
    pub metadata_filter: Option<Value>,
    /// Default both.
    pub sources: Option<Vec<RetrieveSource>>,
    // Read and checked as a double: as a float, a negative too small for it (`-1e-250`)
    // became `-0.0` and passed the check.
    /// Relevance bar in 0..1 (default 0: the k most relevant, as a vector store returns).
    #[schema(minimum = 0, maximum = 1)]
    pub min_score: Option<f64>,
}

fn null_only() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::Object::builder()
        .schema_type(utoipa::openapi::schema::Type::Null)
        .build()
}

/// One node: `text`, `metadata` and `dist` = 1 − relevance.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievedNode {
    pub text: String,
    #[schema(value_type = HashMap<String, serde_json::Value>)]
    pub metadata: Value,
    pub dist: f32,
}

/// LangChain's `RemoteLangChainRetriever` request.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LangChainBody {
    /// At most 4,096 characters (a memory search's and a knowledge search's cap).
    #[schema(pattern = r"\S", max_length = 4096)]
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LangChainDoc {
    pub page_content: String,
    #[schema(value_type = HashMap<String, serde_json::Value>)]
    pub metadata: Value,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LangChainAnswer {
    pub response: Vec<LangChainDoc>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct LangChainParams {
    /// Hits (default 4, at most 100).
    #[param(minimum = 0, maximum = 100)]
    pub k: Option<usize>,
    /// Relevance bar in 0..1 (default 0).
    #[param(minimum = 0, maximum = 1)]
    pub min_score: Option<f64>,
}

struct Hit {
    relevance: f32,
    text: String,
    metadata: Value,
}

fn hits(
    s: &AppState,
    p: &Principal,
    query: &str,
    k: usize,
    sources: &[RetrieveSource],
    min_score: f64,
) -> ApiResult<Vec<Hit>> {
    if registry_core::text::is_blank(query) {
        return Err(ApiError::validation("query is empty").with_details(FieldError::new("query")));
    }
    // Checked here as well as by each search: with no source asked for, no search runs.
    let limit = registry_memory::search::MAX_QUERY_CHARS;
    if let Some(len) = registry_core::text::over(query, limit) {
        return Err(registry_core::text::too_long("query", len, limit).into());
    }
    if !(0.0..=1.0).contains(&min_score) {
        return Err(ApiError::validation("min_score must be within 0..1")
            .with_details(FieldError::new("min_score")));
    }
    // Hits carry f32 relevance; the knowledge search below takes the checked double.
    let bar = min_score as f32;
    let mut out = vec![];
    if sources.contains(&RetrieveSource::Memory) {
        let res = s.services.memory.search_candidates(
            p,
            &MemorySearch {
                query: query.to_string(),
                classes: vec![
                    MemoryClass::Episodic,
                    MemoryClass::Semantic,
                    MemoryClass::Procedural,
                ],
                scope: None,
                k: Some(k),
                as_of: None,
                filters: Default::default(),
            },
        )?;
        for h in res.hits {
            let relevance = h.breakdown.semantic;
            if relevance < bar && h.breakdown.lexical == 0.0 {
                continue;
            }
            let m = h.memory;
            out.push(Hit {
                relevance,
                text: m.content.clone(),
                metadata: json!({
                    "source_type": "memory",
                    "label": "memory: past experience, not current fact",
                    "id": m.id, "version": m.version, "class": m.class, "scope": m.scope,
                    "trust": m.trust, "created_at": m.created_at, "session_date": m.session_date,
                    "entities": m.entities, "content_hash": m.content_hash,
                    "score": h.score, "breakdown": h.breakdown,
                }),
            });
        }
    }
    if sources.contains(&RetrieveSource::Knowledge) {
        let ans = s.services.knowledge.search(
            p,
            registry_knowledge::SearchRequest {
                query: query.to_string(),
                k: Some(k),
                as_of: None,
                min_score: Some(min_score),
                allow_stale: None,
                legs: None,
                fusion: None,
                alpha: None,
            },
        )?;
        for e in ans.evidence {
            if e.retrieval.relevance < bar {
                continue;
            }
            out.push(Hit {
                relevance: e.retrieval.relevance,
                metadata: json!({
                    "source_type": "knowledge",
                    "label": "evidence",
                    "source_id": e.source_id, "source_version": e.source_version,
                    "document_id": e.citation.document_id,
                    "document_version": e.citation.document_version,
                    "chunk_id": e.citation.chunk_id,
                    "char_start": e.citation.char_start, "char_end": e.citation.char_end,
                    "heading_path": e.heading_path, "scope": e.scope,
                    "authority": e.authority, "freshness": e.freshness,
                    "instruction_flagged": e.instruction.flagged,
                    "score": e.score,
                }),
                text: e.content,
            });
        }
    }
    out.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
    out.truncate(k);
    // The memories served count as used.
    let served: Vec<String> = out
        .iter()
        .filter(|h| h.metadata["source_type"] == "memory")
        .filter_map(|h| h.metadata["id"].as_str().map(String::from))
        .collect();
    s.services.memory.record_use(&served)?;
    Ok(out)
}

/// For LlamaIndex's `PathwayRetriever`: memory and knowledge hits as `{text, metadata, dist}`,
/// nearest first. Accepts `Authorization: Bearer <key>` or Basic with the key as the password
/// (`PathwayRetriever(url="http://registry:KEY@host:port")`).
#[utoipa::path(post, path = "/v1/retrieve", security(("bearer" = [])), request_body = RetrieveBody,
    responses((status = 200, body = Vec<RetrievedNode>), (status = 401, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn retrieve(
    State(state): State<AppState>,
    RetrieverAuth(p): RetrieverAuth,
    ApiJson(req): ApiJson<RetrieveBody>,
) -> ApiResult<axum::Json<Vec<RetrievedNode>>> {
    if req.metadata_filter.as_ref().is_some_and(|f| !f.is_null()) {
        return Err(
            ApiError::validation("metadata_filter is not supported; use `sources`")
                .with_details(FieldError::new("metadata_filter")),
        );
    }
    let k = crate::extract::bounded("k", req.k.map(|k| k as u64), 4, 100)?;
    let sources = req
        .sources
        .unwrap_or_else(|| vec![RetrieveSource::Memory, RetrieveSource::Knowledge]);
    let min = req.min_score.unwrap_or(0.0);
    state
        .blocking(move |s| {
            let nodes = hits(s, &p, &req.query, k, &sources, min)?
                .into_iter()
                .map(|h| RetrievedNode {
                    dist: 1.0 - h.relevance,
                    text: h.text,
                    metadata: h.metadata,
                })
                .collect();
            Ok(axum::Json(nodes))
        })
        .await
}

/// For LangChain's `RemoteLangChainRetriever`: `{message}` → `{response: [{page_content,
/// metadata}]}`, most relevant first.
#[utoipa::path(post, path = "/v1/retrieve/langchain", security(("bearer" = [])),
    request_body = LangChainBody, params(LangChainParams),
    responses((status = 200, body = LangChainAnswer), (status = 401, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn retrieve_langchain(
    State(state): State<AppState>,
    RetrieverAuth(p): RetrieverAuth,
    Query(q): Query<LangChainParams>,
    ApiJson(req): ApiJson<LangChainBody>,
) -> ApiResult<axum::Json<LangChainAnswer>> {
    let k = crate::extract::bounded("k", q.k.map(|k| k as u64), 4, 100)?;
    state
        .blocking(move |s| {
            let response = hits(
                s,
                &p,
                &req.message,
                k,
                &[RetrieveSource::Memory, RetrieveSource::Knowledge],
                q.min_score.unwrap_or(0.0),
            )?
            .into_iter()
            .map(|h| {
                let mut metadata = h.metadata;
                metadata["relevance"] = json!(h.relevance);
                LangChainDoc {
                    page_content: h.text,
                    metadata,
                }
            })
            .collect();
            Ok(axum::Json(LangChainAnswer { response }))
        })
        .await
}

// The documented `maxLength` of `query` and `message` is the searches' own cap.
const _: () = assert!(registry_memory::search::MAX_QUERY_CHARS == 4096);
