//! Deletions: the receipts a key may read, and one receipt with the level reached per store.

use axum::extract::{Path, Query, State};
use maud::html;
use serde::Deserialize;

use crate::layout::{json, page, scalar, scroll, status, to_json, when};
use crate::{Console, Ctx, Page};

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    limit: Option<usize>,
}

pub async fn list(State(c): State<Console>, ctx: Ctx, Query(q): Query<ListQuery>) -> Page {
    let p = ctx.principal.clone();
    let limit = q.limit.unwrap_or(50).clamp(1, 500);
    let receipts = c.run(move |s| Ok(s.recent_receipts(&p, limit)?)).await?;
    let body = html! {
        p { "The newest " (limit) " receipts this key may read (its own deletions; an admin: the tenant's)." }
        @if receipts.is_empty() { p { "No deletion yet." } }
        (scroll("Receipts", html! {
            table data-testid="receipts" {
                thead { tr { th scope="col" { "Receipt" } th scope="col" { "Started" } th scope="col" { "By" } th scope="col" { "Reason" } th scope="col" { "Target" } th scope="col" { "Reached" } th scope="col" { "Assets" } } }
                tbody {
                    @for r in &receipts {
                        tr {
                            td { a href=(format!("/ui/deletions/{}", r.id)) { (r.id) } }
                            td { (when(&r.started_at)) }
                            td { (r.actor) }
                            td { (r.reason) }
                            td { (scalar(&to_json(&r.target))) }
                            td { (status(&scalar(&to_json(&r.level_reached)))) }
                            td { (r.assets.len()) }
                        }
                    }
                }
            }
        }))
    };
    Ok(page(&ctx, "/ui/deletions", "Deletions", body))
}

pub async fn receipt(State(c): State<Console>, ctx: Ctx, Path(id): Path<String>) -> Page {
    let p = ctx.principal.clone();
    let r = c.run(move |s| Ok(s.deletions.receipt(&p, &id)?)).await?;
    let body = html! {
        dl class="facts" data-testid="receipt" {
            dt { "Status" } dd { (status(&scalar(&to_json(&r.status)))) }
            dt { "Target" } dd { (scalar(&to_json(&r.target))) }
            dt { "Level reached" } dd data-testid="level-reached" { (scalar(&to_json(&r.level_reached))) }
            dt { "Asked by" } dd { (r.actor) }
            dt { "Reason" } dd { (r.reason) }
            dt { "Roots" } dd { (r.roots.join(", ")) }
            dt { "Started" } dd { (when(&r.started_at)) }
            dt { "Counts" } dd { (json(&to_json(&r.counts))) }
        }
        section aria-labelledby="h-assets" {
            h2 id="h-assets" { "Level reached per asset and store" }
            (scroll("Stores reached", html! {
                table data-testid="stores" {
                    thead { tr { th scope="col" { "Asset" } th scope="col" { "Kind" } th scope="col" { "Reached via" } th scope="col" { "Store" } th scope="col" { "Level" } th scope="col" { "Count" } } }
                    tbody {
                        @for a in &r.assets {
                            @for st in &a.stores {
                                tr {
                                    td { code { (a.id) } }
                                    td { (a.kind.as_str()) }
                                    td { (a.via) }
                                    td { (st.store) }
                                    td { (status(&scalar(&to_json(&st.level)))) }
                                    td { (st.count) }
                                }
                            }
                        }
                    }
                }
            }))
            h3 { "Content hashes (never the content)" }
            ul { @for a in &r.assets { li { code { (a.id) } ": " (a.content_hashes.join(", ")) } } }
            @if !r.flagged.is_empty() { h3 { "Flagged" } (json(&to_json(&r.flagged))) }
        }
    };
    Ok(page(
        &ctx,
        "/ui/deletions",
        &format!("Receipt {}", r.id),
        body,
    ))
}
