//! Mixed-signal retrieval. Candidates come from the hybrid searcher with the principal's
//! visibility filter applied inside both indexes; every candidate is then re-read from the store
//! and dropped unless it is servable, visible, unexpired and valid at `as_of`, and the rest are
//! ranked by a weighted mix of signals whose parts are returned with each hit.
//!
//! Conversation turns get three more things: the lexical leg runs the query without its
//! question words ([`lexical_query`]); a turn by a speaker the query names scores `speaker`;
//! and the reply to a question among the strongest hits (the next turn of its session) joins
//! the candidates with that question's relevance as `context`. A reply comes from the store,
//! not from an index, so it passes the same [`VisibilityFilter`] the legs applied before it
//! can be ranked.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use registry_core::asset::{AssetKind, AssetRecord, AssetStatus};
use registry_core::retrieval::VisibilityFilter;
use registry_core::store::AssetQuery;
use registry_core::{Principal, Trust};
use registry_engine::{Fusion, HybridHit, Legs, SearchOptions};
use serde::{Deserialize, Serialize};

use crate::record::{LevelName, MemoryBody, MemoryClass, MemoryView, normalise};
use crate::service::{MemoryService, SERVABLE, index_keys};
pub use crate::weights::{Breakdown, WEIGHTS};
use crate::{Error, Result};

/// Longest search query, in characters.
pub const MAX_QUERY_CHARS: usize = 4096;

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
    #[schemars(pattern(registry_core::text::NOT_BLANK), length(max = MAX_QUERY_CHARS))]
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
    /// so decay never weakens what agents rely on. Counting is a write: it happens only while
    /// the request's deadline holds (after it, the request answers 408 and nothing is
    /// counted), and once counted the request answers its real outcome.
    pub fn record_use(&self, ids: &[String]) -> Result<()> {
        if !ids.is_empty() {
            registry_core::deadline::begin_commit()?;
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
        if let Some(len) = registry_core::text::over(&req.query, MAX_QUERY_CHARS) {
            return Err(Error::TooLarge {
                field: "query",
                len,
                limit: MAX_QUERY_CHARS,
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
        let candidates = (k * 5).max(MIN_CANDIDATES);
        let hits = self.search.search_split(
            &lexical_query(&req.query),
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
        let by_id: HashMap<&str, _> = recs.iter().map(|r| (r.meta.id.as_str(), r)).collect();
        let gate = Admission {
            p,
            req,
            filter: &filter,
            now,
            as_of,
            want_entities: req.filters.entities.iter().map(|e| normalise(e)).collect(),
        };
        let admitted: Vec<(&AssetRecord, MemoryBody, &HybridHit)> = hits
            .iter()
            .filter_map(|h| {
                let rec = *by_id.get(h.asset_id.as_str())?;
                Some((rec, gate.admit(rec)?, h))
            })
            .collect();
        let max_text = hits
            .iter()
            .filter_map(|h| h.text.map(|t| t.score))
            .fold(0.0f32, f32::max);
        let scorer = Scorer {
            me,
            as_of,
            query_l: normalise(&req.query),
            window: crate::temporal::resolve(&req.query, as_of),
            rare: rare_query_tokens(&req.query, admitted.iter().map(|(_, b, _)| b)),
            speakers: named_speakers(&req.query, admitted.iter().map(|(_, b, _)| b)),
            want_entities: &gate.want_entities,
            max_text,
        };
        let mut stats = self.stats.stats(&ids)?;
        let mut out: Vec<(MemoryHit, &AssetRecord, Option<String>)> = vec![];
        for (rec, body, h) in admitted {
            let st = stats.get(&rec.meta.id).cloned().unwrap_or_default();
            let label = body.session_label.clone();
            if let Some(hit) = scorer.hit(rec, body, Some(h), st) {
                out.push((hit, rec, label));
            }
        }
        let weights = self.weights();
        for (hit, _, _) in &mut out {
            hit.score = hit.breakdown.total(&weights);
        }
        out.sort_by(|(a, _, _), (b, _, _)| by_score(a, b));

        // Context: the reply to a question among the strongest hits joins the candidates (or
        // is lifted, when the legs found it already), through the same admission as the rest.
        let best = out.first().map_or(0.0, |(h, _, _)| h.score);
        let seeds: Vec<(f32, AssetRecord, String)> = out
            .iter()
            .take(CONTEXT_SEEDS)
            .filter(|(h, _, _)| asks_question(&h.memory.content))
            .filter_map(|(h, rec, label)| {
                let rel = if best > 0.0 { h.score / best } else { 0.0 };
                Some((rel.clamp(0.0, 1.0), (*rec).clone(), label.clone()?))
            })
            .collect();
        // Replies the legs did not find, each with the best relevance of a question it answers.
        let mut replies: Vec<(AssetRecord, f32)> = vec![];
        for (rel, seed, label) in &seeds {
            let Some(reply) = self.reply_to(seed, label)? else {
                continue;
            };
            if let Some((hit, _, _)) = out
                .iter_mut()
                .find(|(h, _, _)| h.memory.id == reply.meta.id)
            {
                hit.breakdown.context = hit.breakdown.context.max(*rel);
            } else if let Some((_, r)) =
                replies.iter_mut().find(|(r, _)| r.meta.id == reply.meta.id)
            {
                *r = r.max(*rel);
            } else {
                replies.push((reply, *rel));
            }
        }
        let mut extra = vec![];
        if !replies.is_empty() {
            let reply_ids: Vec<String> = replies.iter().map(|(r, _)| r.meta.id.clone()).collect();
            stats.extend(self.stats.stats(&reply_ids)?);
        }
        for (reply, rel) in &replies {
            let Some(body) = gate.admit(reply) else {
                continue;
            };
            let st = stats.get(&reply.meta.id).cloned().unwrap_or_default();
            if let Some(mut hit) = scorer.hit(reply, body, None, st) {
                hit.breakdown.context = *rel;
                extra.push(hit);
            }
        }
        let mut ranked: Vec<MemoryHit> = out.into_iter().map(|(h, _, _)| h).collect();
        ranked.extend(extra);
        for hit in &mut ranked {
            hit.score = hit.breakdown.total(&weights);
        }
        ranked.sort_by(by_score);
        ranked.truncate(k);
        Ok(SearchResponse {
            label: "memory",
            as_of,
            hits: ranked,
        })
    }
}

/// Best first; ties by id, so equal scores come back in a stable order.
fn by_score(a: &MemoryHit, b: &MemoryHit) -> std::cmp::Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| a.memory.id.cmp(&b.memory.id))
}

/// Candidates each leg contributes at least: enough that the reply to a strong question, or a
/// record only one leg ranks high, is among them with the other leg's score too.
const MIN_CANDIDATES: usize = 200;

/// The strongest hits whose replies join the candidates when they ask something.
const CONTEXT_SEEDS: usize = 5;
/// Records looked at after a question for its reply (other sessions interleave in one scope).
const REPLY_LOOKAHEAD: usize = 8;
/// A reply is written within this long after its question.
const REPLY_WITHIN_HOURS: i64 = 24;

/// Whether a turn asks something (its reply is likely to hold the answer).
fn asks_question(content: &str) -> bool {
    content.contains('?') || content.contains('？')
}

/// English words that make a sentence a question and say nothing of its subject. BM25 over
/// conversation turns would otherwise favour short turns that ask something back ("What did
/// you do?"); the embedding keeps them, since it reads the whole sentence.
const QUESTION_WORDS: &[&str] = &[
    "what", "what's", "when", "where", "which", "who", "whom", "whose", "why", "how", "did",
    "does", "do", "is", "are", "was", "were", "has", "have", "had", "would", "could", "should",
    "can", "might",
];

/// The query the lexical leg runs: `query` without [`QUESTION_WORDS`], unless nothing else is
/// left of it.
pub fn lexical_query(query: &str) -> String {
    let kept: Vec<&str> = query
        .split_whitespace()
        .filter(|w| {
            let bare = w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
            !QUESTION_WORDS.contains(&bare.to_lowercase().as_str())
        })
        .collect();
    if kept.iter().all(|w| !w.chars().any(char::is_alphanumeric)) {
        query.to_string()
    } else {
        kept.join(" ")
    }
}

/// The speakers among `bodies` whose name the query holds as a word (case-folded).
fn named_speakers<'a>(query: &str, bodies: impl Iterator<Item = &'a MemoryBody>) -> Vec<String> {
    let words: std::collections::HashSet<String> = query
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut out: Vec<String> = vec![];
    for b in bodies {
        if let Some(s) = b.speaker.as_deref().map(normalise)
            && !s.is_empty()
            && !out.contains(&s)
            && s.split(|c: char| !c.is_alphanumeric() && c != '-')
                .filter(|w| !w.is_empty())
                .all(|w| words.contains(w))
        {
            out.push(s);
        }
    }
    out
}

/// What every candidate passes, whichever way it came (an index leg or context expansion): the
/// same visibility filter the index legs applied, then the store's own checks and the
/// request's filters.
struct Admission<'a> {
    p: &'a Principal,
    req: &'a SearchRequest,
    filter: &'a VisibilityFilter,
    now: DateTime<Utc>,
    as_of: DateTime<Utc>,
    want_entities: Vec<String>,
}

impl Admission<'_> {
    fn admit(&self, rec: &AssetRecord) -> Option<MemoryBody> {
        let m = &rec.meta;
        let (now, as_of) = (self.now, self.as_of);
        // Defence in depth for index hits: the indexes filtered already; the store decides.
        if m.kind != AssetKind::Memory
            || !SERVABLE.contains(&m.status)
            || m.status == AssetStatus::Revoked
            || !self.p.can_see(m)
            || m.is_expired_at(now)
            || m.valid_from.is_some_and(|f| f > as_of)
        {
            return None;
        }
        let body = MemoryBody::from_record(rec)?;
        if !self.filter.admits(&index_keys(rec, &body)) {
            return None;
        }
        let req = self.req;
        if body.session_date.is_some_and(|d| d > as_of)
            || (req.as_of.is_some() && m.created_at > as_of && body.session_date.is_none())
        {
            return None;
        }
        if !req.classes.is_empty() && !req.classes.contains(&body.class) {
            return None;
        }
        let f = &req.filters;
        let want = &self.want_entities;
        if !want.is_empty() && !body.entities.iter().any(|e| want.contains(&normalise(e))) {
            return None;
        }
        let same = |want: &Option<String>, have: &Option<String>| {
            want.as_ref()
                .is_none_or(|s| have.as_deref().map(normalise) == Some(normalise(s)))
        };
        if !same(&f.speaker, &body.speaker) || !same(&f.subject, &body.subject) {
            return None;
        }
        if f.session_label
            .as_ref()
            .is_some_and(|s| body.session_label.as_ref() != Some(s))
        {
            return None;
        }
        if f.min_trust.is_some_and(|t| m.trust < t) {
            return None;
        }
        Some(body)
    }
}

/// The signals of one admitted candidate (all but `context`, which expansion sets).
struct Scorer<'a> {
    me: registry_core::Scope,
    as_of: DateTime<Utc>,
    query_l: String,
    window: Option<crate::temporal::TimeWindow>,
    rare: Vec<String>,
    speakers: Vec<String>,
    want_entities: &'a [String],
    max_text: f32,
}

impl Scorer<'_> {
    fn hit(
        &self,
        rec: &AssetRecord,
        body: MemoryBody,
        leg: Option<&HybridHit>,
        st: crate::record::MemoryStats,
    ) -> Option<MemoryHit> {
        let m = &rec.meta;
        let ents: Vec<String> = body.entities.iter().map(|e| normalise(e)).collect();
        let matched = ents
            .iter()
            .filter(|e| {
                !e.is_empty()
                    && (self.query_l.contains(e.as_str()) || self.want_entities.contains(e))
            })
            .count();
        let when = body.session_date.or(m.valid_from).unwrap_or(m.created_at);
        let age_days = ((self.as_of - when).num_seconds().max(0) as f32) / 86400.0;
        let distance = m.scope.distance_to(&self.me).unwrap_or(5);
        let b = Breakdown {
            exact: exact_signal(&self.rare, &body),
            semantic: leg
                .and_then(|h| h.vector)
                .map(|v| v.score.clamp(0.0, 1.0))
                .unwrap_or(0.0),
            lexical: match leg.and_then(|h| h.text) {
                Some(t) if self.max_text > 0.0 => (t.score / self.max_text).clamp(0.0, 1.0),
                _ => 0.0,
            },
            entity: (matched as f32 / 2.0).min(1.0),
            recency: 0.5f32.powf(age_days / RECENCY_DAYS),
            temporal: self.window.map_or(0.0, |w| w.closeness(when)),
            speaker: match body.speaker.as_deref().map(normalise) {
                Some(s) if self.speakers.contains(&s) => 1.0,
                _ => 0.0,
            },
            context: 0.0,
            valid_time: if m.valid_at(self.as_of) { 1.0 } else { 0.0 },
            scope_distance: 1.0 / (1.0 + distance as f32),
            trust: trust_score(m.trust),
            feedback: ((st.helpful as f32 + 1.0) / ((st.helpful + st.harmful) as f32 + 2.0))
                * st.decay_weight.clamp(0.0, 1.0),
        };
        let memory = MemoryView::of(rec, st)?;
        Some(MemoryHit {
            label: "memory",
            note: format!(
                "past experience recorded {} from {}; not a verified current fact",
                when.format("%Y-%m-%d"),
                serde_json::to_value(m.source)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ),
            score: 0.0,
            breakdown: b,
            memory,
        })
    }
}

impl MemoryService {
    /// The turn told right after `seed` in its session: the first of the next few memories of
    /// the same scope, written within a day of it, that carries the same session label. The
    /// caller admits it like any other candidate.
    fn reply_to(&self, seed: &AssetRecord, label: &str) -> Result<Option<AssetRecord>> {
        let m = &seed.meta;
        let next = self.store.find(&AssetQuery {
            kind: Some(AssetKind::Memory),
            scope_keys: Some(vec![m.scope.key()]),
            statuses: Some(SERVABLE.to_vec()),
            heads_only: true,
            after: Some((m.created_at, m.id.clone(), m.version)),
            created_before: Some(m.created_at + chrono::Duration::hours(REPLY_WITHIN_HOURS)),
            limit: Some(REPLY_LOOKAHEAD),
            ..Default::default()
        })?;
        Ok(next.into_iter().find(|r| {
            MemoryBody::from_record(r).is_some_and(|b| b.session_label.as_deref() == Some(label))
        }))
    }
}

/// The query's identity tokens that at most [`RARE_TOKEN_MAX_HITS`] admitted candidates hold.
fn rare_query_tokens<'a>(query: &str, bodies: impl Iterator<Item = &'a MemoryBody>) -> Vec<String> {
    let tokens = crate::identity::identity_tokens(query);
    if tokens.is_empty() {
        return vec![];
    }
    let holders: Vec<std::collections::BTreeSet<String>> = bodies
        .map(|b| crate::identity::identity_tokens(&b.index_text()))
        .collect();
    tokens
        .into_iter()
        // Single characters (CJK ideographs, one-digit numbers) identify nothing alone, and a
        // question word is capitalised because it opens the question, not because it names.
        .filter(|t| t.chars().count() > 1 && !QUESTION_WORDS.contains(&t.as_str()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lexical_query_drops_question_words_only() {
        assert_eq!(
            lexical_query("What did Caroline paint in May?"),
            "Caroline paint in May?"
        );
        assert_eq!(lexical_query("How is it?"), "it?");
        // Nothing but question words: the query stays as it was.
        assert_eq!(lexical_query("What did?"), "What did?");
        assert_eq!(lexical_query("printer on floor 2"), "printer on floor 2");
    }

    #[test]
    fn a_speaker_is_named_by_every_word_of_the_name() {
        let body = |s: &str| MemoryBody {
            speaker: Some(s.into()),
            ..serde_json::from_value(serde_json::json!({"class": "episodic", "content": "x",
                "layer": "raw", "log_day": "2023-05-08"}))
            .unwrap()
        };
        let bodies = [
            body("Melanie"),
            body("Ann Lee"),
            body("Mel"),
            body("melanie"),
        ];
        assert_eq!(
            named_speakers("What did melanie tell Ann?", bodies.iter()),
            ["melanie"]
        );
        assert_eq!(
            named_speakers("Did Ann Lee call?", bodies.iter()),
            ["ann lee"]
        );
    }
}
