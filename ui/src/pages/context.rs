//! Context: the stored context manifests a key may read, one manifest, and the comparison of
//! two.

use axum::extract::{Path, Query, State};
use maud::html;
use serde::Deserialize;

use crate::layout::{field, json, page, scroll, to_json, when};
use crate::{Console, Ctx, Page};

pub async fn list(State(c): State<Console>, ctx: Ctx) -> Page {
    let p = ctx.principal.clone();
    let manifests = c.run(move |s| Ok(s.recent_manifests(&p, 100)?)).await?;
    let body = html! {
        @if manifests.is_empty() { p { "No context pack has been compiled for this key yet." } }
        @if manifests.len() >= 2 {
            form method="get" action="/ui/context/compare" class="filter" {
                label for="a" { "Compare" }
                select id="a" name="a" { @for m in &manifests { option value=(m.id) { (m.id) } } }
                label for="b" { "with" }
                select id="b" name="b" { @for (i, m) in manifests.iter().enumerate() { option value=(m.id) selected[i == 1] { (m.id) } } }
                button type="submit" { "Compare" }
            }
        }
        (scroll("Context manifests", html! {
            table data-testid="manifests" {
                thead { tr { th scope="col" { "Manifest" } th scope="col" { "Compiled" } th scope="col" { "For" } th scope="col" { "Query" } } }
                tbody {
                    @for m in &manifests {
                        tr {
                            td { a href=(format!("/ui/context/{}", m.id)) { (m.id) } }
                            td { (when(&m.created_at)) }
                            td { (m.principal) }
                            td { (field(&m.manifest, "query")) }
                        }
                    }
                }
            }
        }))
    };
    Ok(page(&ctx, "/ui/context", "Context", body))
}

pub async fn manifest(State(c): State<Console>, ctx: Ctx, Path(id): Path<String>) -> Page {
    let p = ctx.principal.clone();
    let m = c.run(move |s| Ok(s.context.load(&p, &id)?)).await?;
    let v = to_json(&m);
    let body = html! { (json(&v)) };
    Ok(page(
        &ctx,
        "/ui/context",
        &format!("Context manifest {}", field(&v, "id")),
        body,
    ))
}

#[derive(Debug, Deserialize)]
pub struct CompareQuery {
    a: String,
    b: String,
}

pub async fn compare(State(c): State<Console>, ctx: Ctx, Query(q): Query<CompareQuery>) -> Page {
    let p = ctx.principal.clone();
    let (a, b) = (q.a.clone(), q.b.clone());
    let cmp = c.run(move |s| Ok(s.context.compare(&p, &a, &b)?)).await?;
    let v = to_json(&cmp);
    let body = html! {
        p { "Manifest " a href=(format!("/ui/context/{}", q.a)) { (q.a) } " against " a href=(format!("/ui/context/{}", q.b)) { (q.b) } }
        (json(&v))
    };
    Ok(page(&ctx, "/ui/context", "Context comparison", body))
}
