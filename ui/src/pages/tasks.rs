//! Tasks: the working layer as the key sees it — its tasks, one task's event log (paged by
//! sequence number), its artifacts with a line-range preview, and a preview of its
//! Continuation Package at a chosen budget. Read-only; every read goes through
//! `registry_tasks::TaskService` with the session's principal, so another tenant's task or
//! artifact answers 404 here as over HTTP.

use axum::extract::{Path, Query, State};
use maud::html;
use registry_tasks::{ContinuationRequest, RangeRequest};
use serde::Deserialize;

use crate::layout::{json, page, scroll, status, to_json, when};
use crate::{Console, Ctx, Page, UiError};

/// Lines an artifact preview shows.
const PREVIEW_LINES: u64 = 50;
/// Events one page of the log shows.
const EVENT_PAGE: usize = 100;

pub async fn list(State(c): State<Console>, ctx: Ctx) -> Page {
    let p = ctx.principal.clone();
    let tasks = c.run(move |s| Ok(s.tasks.list(&p, 100)?)).await?;
    let body = html! {
        @if tasks.tasks.is_empty() { p { "No task is visible to this key yet." } }
        (scroll("Tasks", html! {
            table data-testid="tasks" {
                thead { tr { th scope="col" { "Goal" } th scope="col" { "Status" } th scope="col" { "Events" } th scope="col" { "Owner" } th scope="col" { "Updated" } } }
                tbody {
                    @for t in &tasks.tasks {
                        tr {
                            td { a href=(format!("/ui/tasks/{}", t.id)) { (t.goal) } }
                            td { (status(t.status.as_str())) }
                            td { (t.last_seq) }
                            td { (t.owner) }
                            td { (when(&t.updated_at)) }
                        }
                    }
                }
            }
        }))
    };
    Ok(page(&ctx, "/ui/tasks", "Tasks", body))
}

#[derive(Debug, Deserialize)]
pub struct TaskQuery {
    /// Events after this sequence number.
    #[serde(default)]
    after: u64,
    /// The continuation preview's budget (default 2,000 tokens).
    budget: Option<usize>,
}

pub async fn task(
    State(c): State<Console>,
    ctx: Ctx,
    Path(id): Path<String>,
    Query(q): Query<TaskQuery>,
) -> Page {
    let p = ctx.principal.clone();
    let budget = q.budget.unwrap_or(2000);
    let after = q.after;
    let (view, events, artifacts, marks, cont) = c
        .run(move |s| {
            let view = s.tasks.get(&p, &id)?;
            let events = s.tasks.events(&p, &id, after, Some(EVENT_PAGE))?;
            let artifacts = s.tasks.artifacts(&p, &id)?;
            let marks = s.tasks.marks(&p, &id)?;
            // Shown in the page when it fails, as the console's error page shows an error: its
            // code and message, never a backend's text (an internal error is logged).
            let cont = s
                .tasks
                .continuation(
                    &p,
                    &id,
                    &ContinuationRequest {
                        budget,
                        checkpoint: None,
                    },
                )
                .map_err(crate::UiError::from);
            Ok((view, events, artifacts, marks, cont))
        })
        .await?;
    let base = format!("/ui/tasks/{}", view.id);
    let body = html! {
        section aria-labelledby="h-task" {
            h2 id="h-task" { "Task" }
            dl class="facts" data-testid="task" {
                dt { "Goal" } dd { (view.goal) }
                dt { "Acceptance" } dd { (view.acceptance.as_deref().unwrap_or("—")) }
                dt { "Status" } dd { (status(view.status.as_str())) }
                dt { "Next step" } dd { (view.next_step.as_deref().unwrap_or("—")) }
                dt { "Version" } dd { (view.version) }
                dt { "Owner, scope" } dd { (view.owner) ", " (view.scope) }
                dt { "Events" } dd { (view.last_seq) }
            }
            p { a href=(format!("/ui/derivation?id={}", view.id)) { "Derivation graph" } }
        }
        section aria-labelledby="h-events" {
            h2 id="h-events" { "Events" }
            (scroll("Events", html! {
                table data-testid="events" {
                    thead { tr { th scope="col" { "#" } th scope="col" { "Type" } th scope="col" { "Actor" } th scope="col" { "At" } th scope="col" { "Content" } th scope="col" { "Artifact" } } }
                    tbody {
                        @for e in &events.events {
                            tr {
                                th scope="row" { (e.seq) }
                                td { (e.kind.as_str()) @if !e.flags.is_empty() { " " span class="muted" { "(" (e.flags.join(", ")) ")" } } }
                                td { (e.actor) }
                                td { (when(&e.at)) }
                                td class="content" { (e.content) }
                                td { @if let Some(a) = &e.artifact { a href=(format!("{base}/artifacts/{a}")) { (a) } } }
                            }
                        }
                    }
                }
            }))
            nav class="pager" aria-label="Event pages" {
                a href=(base) { "First events" }
                @if let Some(n) = events.next {
                    " · " a href=(format!("{base}?after={n}")) rel="next" { "Later events" }
                }
            }
        }
        section aria-labelledby="h-artifacts" {
            h2 id="h-artifacts" { "Artifacts" }
            @if artifacts.artifacts.is_empty() { p { "No artifact." } }
            (scroll("Artifacts", html! {
                table data-testid="artifacts" {
                    thead { tr { th scope="col" { "Name" } th scope="col" { "Size" } th scope="col" { "Lines" } th scope="col" { "Media type" } th scope="col" { "Digest" } } }
                    tbody {
                        @for a in &artifacts.artifacts {
                            tr {
                                td { a href=(format!("{base}/artifacts/{}", a.id)) { (a.name) } }
                                td { (a.size) }
                                td { (a.lines) }
                                td { (a.media_type) }
                                td { code { (a.digest) } }
                            }
                        }
                    }
                }
            }))
        }
        section aria-labelledby="h-marks" {
            h2 id="h-marks" { "Summaries and checkpoints" }
            (json(&to_json(&marks.marks)))
        }
        section aria-labelledby="h-cont" {
            h2 id="h-cont" { "Continuation preview" }
            form method="get" action=(base) class="filter" {
                label for="budget" { "Budget (tokens)" }
                input id="budget" name="budget" type="number" min="1" max="200000" value=(budget);
                button type="submit" { "Assemble" }
            }
            @match &cont {
                Ok(c) => {
                    p data-testid="continuation-tokens" { (c.used_tokens) " of " (c.budget) " tokens" }
                    pre class="content" data-testid="continuation" tabindex="0" { (c.text) }
                    details { summary { "Manifest" } (json(&to_json(&c.manifest))) }
                }
                Err(e) => { p role="alert" { strong { (e.code) } ": " (e.message) } }
            }
        }
    };
    Ok(page(&ctx, "/ui/tasks", &format!("Task {}", view.id), body))
}

#[derive(Debug, Deserialize)]
pub struct PreviewQuery {
    /// First line shown (from 1).
    line: Option<u64>,
}

pub async fn artifact(
    State(c): State<Console>,
    ctx: Ctx,
    Path((task, id)): Path<(String, String)>,
    Query(q): Query<PreviewQuery>,
) -> Page {
    let p = ctx.principal.clone();
    let line = q.line.unwrap_or(1).max(1);
    let range = c
        .run(move |s| {
            let r = s.tasks.read_range(
                &p,
                &id,
                &RangeRequest {
                    line: Some(line),
                    lines: Some(PREVIEW_LINES),
                    ..Default::default()
                },
            )?;
            if r.artifact.task != task {
                return Err(UiError::not_found(format!("no artifact {id}")));
            }
            Ok(r)
        })
        .await?;
    let a = &range.artifact;
    let base = format!("/ui/tasks/{}/artifacts/{}", a.task, a.id);
    let text = String::from_utf8_lossy(&range.bytes);
    let body = html! {
        p { a href=(format!("/ui/tasks/{}", a.task)) { "Back to the task" } }
        dl class="facts" data-testid="artifact" {
            dt { "Digest" } dd { code { (a.digest) } }
            dt { "Size" } dd { (a.size) " bytes, " (a.lines) " lines" }
            dt { "Media type" } dd { (a.media_type) }
            dt { "Summary" } dd { (a.summary.as_deref().unwrap_or("—")) }
        }
        h2 { "Lines " (line) "–" (line + PREVIEW_LINES - 1) }
        pre class="content" data-testid="artifact-lines" tabindex="0" { (text) }
        nav class="pager" aria-label="Artifact lines" {
            @if line > 1 {
                a href=(format!("{base}?line={}", line.saturating_sub(PREVIEW_LINES).max(1))) rel="prev" { "Earlier lines" } " · "
            }
            @if line + PREVIEW_LINES <= a.lines {
                a href=(format!("{base}?line={}", line + PREVIEW_LINES)) rel="next" { "Later lines" }
            }
        }
    };
    Ok(page(
        &ctx,
        "/ui/tasks",
        &format!("Artifact {}", a.name),
        body,
    ))
}
