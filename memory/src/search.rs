//! Mixed-signal retrieval. Candidates come from the hybrid searcher with the principal's
//! visibility filter applied inside both indexes; every candidate is then re-read from the store
//! and dropped unless it is servable, visible, unexpired and valid at `as_of`, and the rest are
//! ranked by a weighted mix of signals whose parts are returned with each hit.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use registry_core::asset::{AssetKind, AssetStatus};
use registry_core::retrieval::VisibilityFilter;
use registry_core::store::AssetQuery;
use registry_core::{Principal, Trust};
use registry_engine::{Fusion, Legs, SearchOptions};
use serde::{Deserialize, Serialize};

use crate::record::{LevelName, MemoryBody, MemoryClass, MemoryView, normalise};
use crate::service::{MemoryService, SERVABLE};
use crate::{Error, Result};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchFilters {
    /// Only records naming at least one of these entities.
    #[serde(default)]
    pub entities: Vec<String>,
    #[serde(default)]
    pub speaker: Option<String>,
    #[serde(default)]
    pub subject: Option<String>,
    #[serde(default)]
    pub min_trust: Option<Trust>,
    #[serde(default)]
    pub session_label: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "MemorySearchRequest")]
pub struct SearchRequest {
    #[schemars(pattern(registry_core::text::NOT_BLANK))]
    pub query: String,
    /// Empty: every class.
    #[serde(default)]
    pub classes: Vec<MemoryClass>,
    /// Only memories at this level of the caller's own path.
    #[serde(default)]
    pub scope: Option<LevelName>,
    /// Hits returned (default 10, at most 100).
    #[serde(default)]
    pub k: Option<usize>,
    /// Rank as of this time: records not yet valid (or not yet happened) are left out, and
    /// recency is measured from it.
    #[serde(default)]
    pub as_of: Option<DateTime<Utc>>,
    #[serde(default)]
    pub filters: SearchFilters,
}

/// Every signal in [0, 1], and the weight it carries in `score`. `exact` is outside the
/// weighted mix: a hit holding every rare identifier of the query ranks before every hit that
/// does not, whatever the rest says.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Breakdown {
    pub exact: f32,
    pub semantic: f32,
    pub lexical: f32,
    pub entity: f32,
    pub recency: f32,
    /// How close the record's event date is to the time the query names ("in May 2023",
    /// "the week before 3 August"); 0 for every hit when the query names no time.
    pub temporal: f32,
    pub valid_time: f32,
    pub scope_distance: f32,
    pub trust: f32,
    pub feedback: f32,
}

pub const WEIGHTS: Breakdown = Breakdown {
    exact: 0.0,
    semantic: 0.40,
    lexical: 0.15,
    entity: 0.10,
    recency: 0.10,
    temporal: 0.25,
    valid_time: 0.05,
    scope_distance: 0.05,
    trust: 0.05,
    feedback: 0.10,
};

impl Breakdown {
    /// The weighted mix, with `exact` outside it.
    pub fn total(&self, w: &Breakdown) -> f32 {
        self.semantic * w.semantic
            + self.lexical * w.lexical
            + self.entity * w.entity
            + self.recency * w.recency
            + self.temporal * w.temporal
            + self.valid_time * w.valid_time
            + self.scope_distance * w.scope_distance
            + self.trust * w.trust
            + self.feedback * w.feedback
            + self.exact
    }
}

/// A query identifier is rare when at most this many candidates hold it: an exact match of
/// such a token is the strongest evidence a search has.
const RARE_TOKEN_MAX_HITS: usize = 3;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MemoryHit {
    /// Always `memory`: this is past experience, not a verified current fact.
    pub label: &'static str,
    pub note: String,
    pub score: f32,
    pub breakdown: Breakdown,
    pub memory: MemoryView,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SearchResponse {
    pub label: &'static str,
    pub as_of: DateTime<Utc>,
    pub hits: Vec<MemoryHit>,
}

/// Recency half-life in days.
const RECENCY_DAYS: f32 = 90.0;

impl MemoryService {
    /// Searches and counts every hit returned as used (the caller serves them all).
    pub fn search(&self, p: &Principal, req: &SearchRequest) -> Result<SearchResponse> {
        let res = self.search_candidates(p, req)?;
        let used: Vec<String> = res.hits.iter().map(|h| h.memory.id.clone()).collect();
        self.record_use(&used)?;
        Ok(res)
    }

    /// Counts memories as used now: whatever door served them (a context pack, a retriever),
    /// so decay never weakens what agents rely on.
    pub fn record_use(&self, ids: &[String]) -> Result<()> {
        if !ids.is_empty() {
            self.stats.record_retrievals(ids, Utc::now())?;
        }
        Ok(())
    }

    /// Searches without counting use: for a caller that serves only some of the hits (a
    /// context pack within its budget) and then counts those with [`Self::record_use`].
    pub fn search_candidates(&self, p: &Principal, req: &SearchRequest) -> Result<SearchResponse> {
        if registry_core::text::is_blank(&req.query) {
            return Err(Error::invalid("query", "query is empty"));
        }
        if req.query.len() > self.limits.max_query_bytes {
            return Err(Error::TooLarge {
                field: "query",
                len: req.query.len(),
                limit: self.limits.max_query_bytes,
            });
        }
        let now = Utc::now();
        let as_of = req.as_of.unwrap_or(now);
        let k = req.k.unwrap_or(10).clamp(1, 100);
        let me = p.scope();
        let mut filter = VisibilityFilter::for_principal(p, &[AssetKind::Memory]);
        if !req.classes.is_empty() {
            filter = filter.with_tags(req.classes.iter().map(|c| c.tag()).collect());
        }
        if let Some(level) = req.scope {
            let want = match level {
                LevelName::Tenant => registry_core::ScopeLevel::Tenant,
                LevelName::Project => registry_core::ScopeLevel::Project,
                LevelName::User => registry_core::ScopeLevel::User,
                LevelName::Session => registry_core::ScopeLevel::Session,
                LevelName::Task => registry_core::ScopeLevel::Task,
            };
            let keys: Vec<String> = me
                .path_keys()
                .into_iter()
                .filter(|key| scope_level_of_key(key) == Some(want))
                .collect();
            filter.scope_keys = keys;
        }
        let candidates = (k * 5).max(50);
        let hits = self.search.search(
            &req.query,
            &filter,
            &SearchOptions {
                k: candidates,
                candidates_per_leg: candidates,
                fusion: Fusion::Rrf { k: 60.0 },
                legs: Legs::Both,
            },
        )?;
        if hits.is_empty() {
            return Ok(SearchResponse {
                label: "memory",
                as_of,
                hits: vec![],
            });
        }
        let ids: Vec<String> = hits.iter().map(|h| h.asset_id.clone()).collect();
        // By id only: the primary key answers it; adding kind/tenant lets SQLite pick a
        // tenant-wide index instead. Kind and visibility are checked per record below.
        let recs = self.store.find(&AssetQuery {
            ids: Some(ids.clone()),
            statuses: Some(SERVABLE.to_vec()),
            heads_only: true,
            ..Default::default()
        })?;
        let stats = self.stats.stats(&ids)?;
        let by_id: HashMap<&str, _> = recs.iter().map(|r| (r.meta.id.as_str(), r)).collect();
        let max_text = hits
            .iter()
            .filter_map(|h| h.text.map(|t| t.score))
            .fold(0.0f32, f32::max);
        let query_l = normalise(&req.query);
        let window = crate::temporal::resolve(&req.query, as_of);
        let weights = self.weights();
        let rare = rare_query_tokens(&req.query, &recs);
        let want_entities: Vec<String> =
            req.filters.entities.iter().map(|e| normalise(e)).collect();
        let mut out = vec![];
        for h in &hits {
            let Some(rec) = by_id.get(h.asset_id.as_str()) else {
                continue;
            };
            let m = &rec.meta;
            // Defence in depth: the indexes filtered already; the store decides.
            if m.kind != AssetKind::Memory
                || !SERVABLE.contains(&m.status)
                || m.status == AssetStatus::Revoked
                || !p.can_see(m)
                || m.is_expired_at(now)
                || m.valid_from.is_some_and(|f| f > as_of)
            {
                continue;
            }
            let Some(body) = MemoryBody::from_record(rec) else {
                continue;
            };
            if body.session_date.is_some_and(|d| d > as_of)
                || (req.as_of.is_some() && m.created_at > as_of && body.session_date.is_none())
            {
                continue;
            }
            if !req.classes.is_empty() && !req.classes.contains(&body.class) {
                continue;
            }
            let f = &req.filters;
            let ents: Vec<String> = body.entities.iter().map(|e| normalise(e)).collect();
            if !want_entities.is_empty() && !ents.iter().any(|e| want_entities.contains(e)) {
                continue;
            }
            if f.speaker
                .as_ref()
                .is_some_and(|s| body.speaker.as_deref().map(normalise) != Some(normalise(s)))
            {
                continue;
            }
            if f.subject
                .as_ref()
                .is_some_and(|s| body.subject.as_deref().map(normalise) != Some(normalise(s)))
            {
                continue;
            }
            if f.session_label
                .as_ref()
                .is_some_and(|s| body.session_label.as_ref() != Some(s))
            {
                continue;
            }
            if f.min_trust.is_some_and(|t| m.trust < t) {
                continue;
            }
            let st = stats.get(&m.id).cloned().unwrap_or_default();
            let matched = ents
                .iter()
                .filter(|e| {
                    !e.is_empty() && (query_l.contains(e.as_str()) || want_entities.contains(e))
                })
                .count();
            let when = body.session_date.or(m.valid_from).unwrap_or(m.created_at);
            let age_days = ((as_of - when).num_seconds().max(0) as f32) / 86400.0;
            let distance = m.scope.distance_to(&me).unwrap_or(5);
            let b = Breakdown {
                exact: exact_signal(&rare, &body),
                semantic: h.vector.map(|v| v.score.clamp(0.0, 1.0)).unwrap_or(0.0),
                lexical: match h.text {
                    Some(t) if max_text > 0.0 => (t.score / max_text).clamp(0.0, 1.0),
                    _ => 0.0,
                },
                entity: (matched as f32 / 2.0).min(1.0),
                recency: 0.5f32.powf(age_days / RECENCY_DAYS),
                temporal: window.map_or(0.0, |w| w.closeness(when)),
                valid_time: if m.valid_at(as_of) { 1.0 } else { 0.0 },
                scope_distance: 1.0 / (1.0 + distance as f32),
                trust: trust_score(m.trust),
                feedback: ((st.helpful as f32 + 1.0) / ((st.helpful + st.harmful) as f32 + 2.0))
                    * st.decay_weight.clamp(0.0, 1.0),
            };
            let view = match MemoryView::of(rec, st) {
                Some(v) => v,
                None => continue,
            };
            out.push(MemoryHit {
                label: "memory",
                note: format!(
                    "past experience recorded {} from {}; not a verified current fact",
                    when.format("%Y-%m-%d"),
                    serde_json::to_value(m.source)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                ),
                score: b.total(&weights),
                breakdown: b,
                memory: view,
            });
        }
        out.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.memory.id.cmp(&b.memory.id))
        });
        out.truncate(k);
        Ok(SearchResponse {
            label: "memory",
            as_of,
            hits: out,
        })
    }
}

/// The query's identity tokens that at most [`RARE_TOKEN_MAX_HITS`] candidates hold.
fn rare_query_tokens(query: &str, recs: &[registry_core::asset::AssetRecord]) -> Vec<String> {
    let tokens = crate::identity::identity_tokens(query);
    if tokens.is_empty() {
        return vec![];
    }
    let holders: Vec<std::collections::BTreeSet<String>> = recs
        .iter()
        .filter_map(MemoryBody::from_record)
        .map(|b| crate::identity::identity_tokens(&b.index_text()))
        .collect();
    tokens
        .into_iter()
        // Single characters (CJK ideographs, one-digit numbers) identify nothing alone.
        .filter(|t| t.chars().count() > 1)
        .filter(|t| {
            let n = holders.iter().filter(|h| h.contains(t)).count();
            (1..=RARE_TOKEN_MAX_HITS).contains(&n)
        })
        .collect()
}

/// 1 when the record holds every rare identifier of the query (some, proportionally).
fn exact_signal(rare: &[String], body: &MemoryBody) -> f32 {
    if rare.is_empty() {
        return 0.0;
    }
    let have = crate::identity::identity_tokens(&body.index_text());
    rare.iter().filter(|t| have.contains(*t)).count() as f32 / rare.len() as f32
}

fn trust_score(t: Trust) -> f32 {
    t as u8 as f32 / Trust::PlatformRule as u8 as f32
}

/// The level of a canonical scope key (its last component).
pub fn scope_level_of_key(key: &str) -> Option<registry_core::ScopeLevel> {
    use registry_core::ScopeLevel::*;
    if key == "global" {
        return Some(Global);
    }
    let last = key.rsplit('/').next()?;
    match last.split_once(':')?.0 {
        "t" => Some(Tenant),
        "p" => Some(Project),
        "u" => Some(User),
        "s" => Some(Session),
        "k" => Some(Task),
        _ => None,
    }
}
