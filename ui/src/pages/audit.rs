//! Audit: the event list (admins, as over the API) and a Verify button that walks the keyed
//! hash chain and names the first broken event, if any.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse};
use maud::{Markup, html};
use registry_core::audit::Verification;
use serde::Deserialize;

use crate::layout::{self, csrf_field, scroll, when};
use crate::pages::{Posted, TokenForm, is_htmx};
use crate::{Console, Ctx, Page};

const PAGE: usize = 50;

#[derive(Debug, Deserialize)]
pub struct AuditQuery {
    after: Option<u64>,
    #[serde(default)]
    action: String,
}

fn verification(v: &Verification) -> Markup {
    html! {
        div role="status" data-testid="verify-result" class=(if v.ok { "card ok" } else { "card error" }) {
            @if v.ok {
                p { strong { "The chain verifies." } " " (v.events) " events and " (v.checkpoints) " signed checkpoints checked." }
            } @else {
                p {
                    strong { "The chain is broken" }
                    @if let Some(seq) = v.broken_at { " at event " strong data-testid="broken-at" { (seq) } }
                    @if let Some(r) = &v.reason { ": " (r) }
                }
                p { (v.events) " events and " (v.checkpoints) " checkpoints checked." }
            }
        }
    }
}

async fn render(c: &Console, ctx: &Ctx, q: &AuditQuery, result: Option<Verification>) -> Page {
    let p = ctx.principal.clone();
    let after = q.after.unwrap_or(0);
    let page = c.run(move |s| Ok(s.audit_events(&p, after, PAGE)?)).await?;
    let events = page.events;
    let action = q.action.trim().to_string();
    let shown: Vec<_> = events
        .iter()
        .filter(|e| action.is_empty() || e.draft.action.contains(&action))
        .collect();
    let next = page.next;
    let body = html! {
        form method="post" action="/ui/audit/verify" hx-post="/ui/audit/verify" hx-target="#verify" hx-swap="innerHTML" class="inline" {
            (csrf_field(ctx))
            button type="submit" { "Verify the audit chain" }
        }
        div id="verify" aria-live="polite" { @if let Some(v) = &result { (verification(v)) } }
        form method="get" action="/ui/audit" class="filter" role="search" {
            label for="action" { "Action contains" }
            input id="action" name="action" type="search" value=(q.action);
            button type="submit" { "Filter" }
        }
        (scroll("Audit events", html! {
            table data-testid="audit-events" {
                thead { tr { th scope="col" { "#" } th scope="col" { "At" } th scope="col" { "Actor" } th scope="col" { "Action" } th scope="col" { "Asset" } th scope="col" { "Reason" } th scope="col" { "Hash" } } }
                tbody {
                    @for e in &shown {
                        tr {
                            th scope="row" { (e.seq) }
                            td { (when(&e.at)) }
                            td { (e.draft.actor) }
                            td { (e.draft.action) }
                            td { @if let Some(a) = &e.draft.asset_id { a href=(format!("/ui/derivation?id={a}")) { (a) } } }
                            td { (e.draft.reason.clone().unwrap_or_default()) }
                            td { code class="digest" { (e.hash.chars().take(16).collect::<String>()) "…" } }
                        }
                    }
                }
            }
        }))
        nav class="pager" aria-label="Pages" {
            a href=(format!("/ui/audit?action={}", q.action)) { "First page" }
            @if let Some(n) = next { " · " a rel="next" href=(format!("/ui/audit?after={n}&action={}", q.action)) { "Next page" } }
        }
    };
    Ok(layout::page(ctx, "/ui/audit", "Audit", body))
}

pub async fn page(State(c): State<Console>, ctx: Ctx, Query(q): Query<AuditQuery>) -> Page {
    render(&c, &ctx, &q, None).await
}

pub async fn verify(
    State(c): State<Console>,
    ctx: Ctx,
    headers: HeaderMap,
    Posted(f): Posted<TokenForm>,
) -> Page {
    ctx.check_post(&f.csrf)?;
    let p = ctx.principal.clone();
    let v = c.run(move |s| Ok(s.verify_audit(&p)?)).await?;
    if is_htmx(&headers) {
        return Ok(Html(verification(&v).into_string()).into_response());
    }
    let q = AuditQuery {
        after: None,
        action: String::new(),
    };
    render(&c, &ctx, &q, Some(v)).await
}
