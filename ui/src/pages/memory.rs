//! Memory: search with the score breakdown per hit, the visible records paged, and one record
//! with its versions, evidence, feedback counters and derivation.

use axum::extract::{Path, Query, State};
use maud::html;
use registry_core::asset::AssetKind;
use registry_memory::search::SearchRequest;
use serde::Deserialize;

use crate::layout::{json, page, pager, scalar, scroll, status, to_json, when};
use crate::{Console, Ctx, Page, UiError};

#[derive(Debug, Deserialize)]
pub struct SearchQuery {
    #[serde(default)]
    q: String,
    k: Option<usize>,
    after: Option<String>,
}

pub async fn search(State(c): State<Console>, ctx: Ctx, Query(q): Query<SearchQuery>) -> Page {
    let p = ctx.principal.clone();
    let query = q.q.trim().to_string();
    let k = q.k.unwrap_or(10).clamp(1, 100);
    let after = q.after.clone();
    let (hits, list, next) = c
        .run(move |s| {
            if query.is_empty() {
                let (list, next) =
                    s.list_assets(&p, Some(AssetKind::Memory), after.as_deref(), 25)?;
                let views: Vec<_> = list
                    .iter()
                    .filter_map(|r| s.memory.view_as(&p, r).ok().flatten())
                    .collect();
                Ok((None, views, next))
            } else {
                let req: SearchRequest =
                    serde_json::from_value(serde_json::json!({ "query": query, "k": k }))
                        .map_err(|e| UiError::validation(e.to_string()))?;
                Ok((Some(s.memory.search(&p, &req)?), vec![], None))
            }
        })
        .await?;
    let body = html! {
        form method="get" action="/ui/memory" class="filter" role="search" {
            label for="q" { "Search memories" }
            input id="q" name="q" type="search" value=(q.q);
            label for="k" { "Hits" }
            input id="k" name="k" type="number" min="1" max="100" value=(k);
            button type="submit" { "Search" }
        }
        @if let Some(res) = &hits {
            section aria-labelledby="h-hits" {
                h2 id="h-hits" { (res.hits.len()) " hits (labelled " (res.label) ": past experience, not current fact)" }
                @for h in &res.hits {
                    article class="card" data-testid="memory-hit" aria-label=(format!("Hit {}", h.memory.id)) {
                        h3 { a href=(format!("/ui/memory/{}", h.memory.id)) { (h.memory.content) } }
                        p { "Score " strong { (format!("{:.4}", h.score)) } " · " (status(&h.memory.status)) " · " (h.note) }
                        (scroll("Score breakdown", html! {
                            table class="breakdown" {
                                caption { "Score breakdown" }
                                thead { tr { @for (k, _) in to_json(&h.breakdown).as_object().into_iter().flatten() { th scope="col" { (k) } } } }
                                tbody { tr { @for (_, v) in to_json(&h.breakdown).as_object().into_iter().flatten() { td { (scalar(v)) } } } }
                            }
                        }))
                    }
                }
            }
        } @else {
            section aria-labelledby="h-list" {
                h2 id="h-list" { "Memories visible to this key" }
                (scroll("Memories", html! {
                    table {
                        thead { tr { th scope="col" { "Content" } th scope="col" { "Class" } th scope="col" { "Status" } th scope="col" { "Written" } } }
                        tbody {
                            @for m in &list {
                                tr {
                                    td { a href=(format!("/ui/memory/{}", m.id)) { @if m.content.is_empty() { "(content withheld) " (m.id) } @else { (m.content) } } }
                                    td { (scalar(&to_json(&m.class))) }
                                    td { (status(&m.status)) }
                                    td { (when(&m.created_at)) }
                                }
                            }
                        }
                    }
                }))
                (pager("/ui/memory", next, ""))
            }
        }
    };
    Ok(page(&ctx, "/ui/memory", "Memory", body))
}

pub async fn record(State(c): State<Console>, ctx: Ctx, Path(id): Path<String>) -> Page {
    let p = ctx.principal.clone();
    let d = c.run(move |s| Ok(s.memory.get(&p, &id)?)).await?;
    let m = &d.memory;
    let body = html! {
        p class="content" data-testid="memory-content" { (m.content) }
        p { "Status " (status(&m.status)) " · " a href=(format!("/ui/derivation?id={}", m.id)) { "Derivation graph" } }
        section aria-labelledby="h-gov" {
            h2 id="h-gov" { "Governance" }
            (json(&to_json(m)))
        }
        section aria-labelledby="h-ev" {
            h2 id="h-ev" { "Evidence" }
            @if m.evidence.is_empty() { p { "No evidence recorded." } }
            ul { @for e in &m.evidence { li { (e) } } }
        }
        section aria-labelledby="h-fb" {
            h2 id="h-fb" { "Feedback and use" }
            (json(&to_json(&m.stats)))
        }
        section aria-labelledby="h-ver" {
            h2 id="h-ver" { "Versions" }
            (scroll("Versions", html! {
                table {
                    thead { tr { th scope="col" { "Version" } th scope="col" { "Status" } th scope="col" { "Content" } th scope="col" { "Written" } } }
                    tbody { @for v in &d.versions { tr { th scope="row" { (v.version) } td { (status(&v.status)) } td { (v.content) } td { (when(&v.created_at)) } } } }
                }
            }))
        }
        section aria-labelledby="h-rel" {
            h2 id="h-rel" { "Related records (same subject and attribute)" }
            @if d.related.is_empty() { p { "None." } }
            ul { @for r in &d.related { li { a href=(format!("/ui/memory/{}", r.id)) { (r.id) } " " (status(&r.status)) " " (r.content) } } }
        }
    };
    Ok(page(&ctx, "/ui/memory", &format!("Memory {}", m.id), body))
}
