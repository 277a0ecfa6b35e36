//! Knowledge: documents with their versions, chunks, freshness and authority; search showing
//! the evidence records, or INSUFFICIENT_EVIDENCE.

use axum::extract::{Path, Query, State};
use maud::html;
use registry_knowledge::{SearchRequest, freshness};
use serde::Deserialize;

use crate::layout::{self, json, pager, scalar, scroll, status, to_json, when};
use crate::{Console, Ctx, Page, UiError};

#[derive(Debug, Deserialize)]
pub struct KnowledgeQuery {
    #[serde(default)]
    q: String,
    after: Option<String>,
}

pub async fn page(State(c): State<Console>, ctx: Ctx, Query(q): Query<KnowledgeQuery>) -> Page {
    let p = ctx.principal.clone();
    let query = q.q.trim().to_string();
    let after = q.after.clone();
    let (answer, docs, stale_after) = c
        .run(move |s| {
            let answer = if query.is_empty() {
                None
            } else {
                let req: SearchRequest =
                    serde_json::from_value(serde_json::json!({ "query": query }))
                        .map_err(|e| UiError::validation(e.to_string()))?;
                Some(s.knowledge.search(&p, req)?)
            };
            let docs = s.knowledge.list_documents(&p, 26, after.as_deref())?;
            Ok((answer, docs, s.knowledge.config().stale_after))
        })
        .await?;
    let now = chrono::Utc::now();
    let more = docs.len() > 25;
    let docs = &docs[..docs.len().min(25)];
    let next = more.then(|| docs.last().map(|d| d.id.clone())).flatten();
    let body = html! {
        form method="get" action="/ui/knowledge" class="filter" role="search" {
            label for="q" { "Search knowledge" }
            input id="q" name="q" type="search" value=(q.q);
            button type="submit" { "Search" }
        }
        @if let Some(a) = &answer {
            section aria-labelledby="h-ev" {
                h2 id="h-ev" { "Evidence" }
                p data-testid="evidence-status" { "Status: " strong { (a.status) } }
                @if a.evidence.is_empty() { p { "No admissible, fresh evidence cleared the bar." } }
                @for e in &a.evidence {
                    article class="card" data-testid="evidence" aria-label=(format!("Evidence from {}", e.source_id)) {
                        h3 { (e.source_id) " " (e.source_version) " · " (e.heading_path.join(" › ")) }
                        p class="content" { (e.content) }
                        dl class="facts" {
                            dt { "Score" } dd { (format!("{:.4}", e.score)) }
                            dt { "Authority" } dd { (scalar(&to_json(&e.authority))) }
                            dt { "Freshness" } dd { (scalar(&to_json(&e.freshness))) }
                            dt { "Owner, scope" } dd { (e.owner) ", " (e.scope) }
                            dt { "Effective" } dd { (when(&e.effective_at)) }
                            dt { "Why retrieved" } dd { (json(&to_json(&e.retrieval))) }
                            dt { "Citation" } dd { (json(&to_json(&e.citation))) }
                            dt { "Instruction-like text" } dd { (json(&to_json(&e.instruction))) }
                        }
                    }
                }
            }
        }
        section aria-labelledby="h-docs" {
            h2 id="h-docs" { "Documents" }
            (scroll("Documents", html! {
                table data-testid="documents" {
                    thead { tr { th scope="col" { "Source" } th scope="col" { "Version" } th scope="col" { "Authority" } th scope="col" { "Freshness" } th scope="col" { "Chunks" } th scope="col" { "Status" } th scope="col" { "Effective" } } }
                    tbody {
                        @for d in docs {
                            tr {
                                td { a href=(format!("/ui/knowledge/{}", d.id)) { (d.source_id) } }
                                td { (d.source_version) " (v" (d.version) ")" }
                                td { (scalar(&to_json(&d.authority))) }
                                td { (scalar(&to_json(&freshness(d.effective_at, d.expires_at, stale_after, now)))) }
                                td { (d.chunk_count) }
                                td { (status(d.status.as_str())) }
                                td { (when(&d.effective_at)) }
                            }
                        }
                    }
                }
            }))
            (pager("/ui/knowledge", next, ""))
        }
    };
    Ok(layout::page(&ctx, "/ui/knowledge", "Knowledge", body))
}

pub async fn document(State(c): State<Console>, ctx: Ctx, Path(id): Path<String>) -> Page {
    let p = ctx.principal.clone();
    let (view, versions) = c
        .run(move |s| {
            let view = s.knowledge.get_document(&p, &id)?;
            // Visible: the current version was checked above; its history shares its scope.
            let versions = s.backends.store.history(&id)?;
            Ok((view, versions))
        })
        .await?;
    let d = &view.document;
    let body = html! {
        p { a href=(format!("/ui/derivation?id={}", d.id)) { "Derivation graph" } }
        section aria-labelledby="h-meta" { h2 id="h-meta" { "Document" } (json(&to_json(d))) }
        section aria-labelledby="h-versions" {
            h2 id="h-versions" { "Versions" }
            ul { @for v in &versions { li { "v" (v.meta.version) " " (status(v.meta.status.as_str())) " " (when(&v.meta.created_at)) " " code { (v.meta.content_hash) } } } }
        }
        section aria-labelledby="h-chunks" {
            h2 id="h-chunks" { "Chunks (" (view.chunks.len()) ")" }
            (scroll("Chunks", html! {
                table {
                    thead { tr { th scope="col" { "#" } th scope="col" { "Heading" } th scope="col" { "Characters" } th scope="col" { "Status" } th scope="col" { "Instruction-like" } } }
                    tbody {
                        @for ch in &view.chunks {
                            tr {
                                th scope="row" { a href=(format!("/ui/derivation?id={}", ch.id)) { (ch.ordinal) } }
                                td { (ch.heading_path.join(" › ")) }
                                td { (ch.char_start) "–" (ch.char_end) }
                                td { (status(ch.status.as_str())) }
                                td { (json(&to_json(&ch.instruction))) }
                            }
                        }
                    }
                }
            }))
        }
        section aria-labelledby="h-content" { h2 id="h-content" { "Content" } pre class="content" { (view.content) } }
    };
    Ok(layout::page(
        &ctx,
        "/ui/knowledge",
        &format!("Document {}", d.source_id),
        body,
    ))
}
