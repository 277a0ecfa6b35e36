//! Overview: counts per asset kind and status, the jobs with their last runs, and activity per
//! day drawn as SVG.

use axum::extract::State;
use maud::html;
use registry_core::principal::Role;
use registry_services::JOBS;

use crate::layout::{self, scroll, status, when};
use crate::{Console, Ctx, Page, svg};

/// Days the plots cover.
const DAYS: u32 = 14;

pub async fn page(State(c): State<Console>, ctx: Ctx) -> Page {
    let p = ctx.principal.clone();
    let admin = ctx.has_role(Role::Admin);
    // A job runs over the whole registry, every tenant at once: its counts and errors are the
    // platform's to read, so a tenant's admin is shown none of them.
    let operator = admin && ctx.principal.platform;
    let (counts, activity, runs) = c
        .run(move |s| {
            let counts = s.asset_counts(&p)?;
            let activity = s.activity(&p, DAYS, chrono::Utc::now())?;
            let mut runs = vec![];
            if operator {
                for name in JOBS {
                    let last = s.backends.store.recent_runs(Some(*name), 1)?;
                    runs.push((*name, last.into_iter().next()));
                }
            }
            Ok((counts, activity, runs))
        })
        .await?;
    let statuses: std::collections::BTreeSet<&String> =
        counts.counts.values().flat_map(|m| m.keys()).collect();
    let body = html! {
        section aria-labelledby="h-counts" {
            h2 id="h-counts" { "Assets by kind and status" }
            @if counts.counts.is_empty() {
                p { "No asset is visible to this key yet." }
            } @else {
                (scroll("Asset counts", html! {
                    table data-testid="asset-counts" {
                        thead { tr { th scope="col" { "Kind" } @for st in &statuses { th scope="col" { (status(st)) } } th scope="col" { "Total" } } }
                        tbody {
                            @for (kind, m) in &counts.counts {
                                tr {
                                    th scope="row" { (kind) }
                                    @for st in &statuses { td { (m.get(*st).copied().unwrap_or(0)) } }
                                    td { (m.values().sum::<u64>()) }
                                }
                            }
                        }
                    }
                }))
                @if counts.truncated { p class="muted" { "Counted the first 100,000 assets only." } }
            }
        }
        section aria-labelledby="h-jobs" {
            h2 id="h-jobs" { "Jobs" }
            @if !operator {
                p { "Jobs run over every tenant at once; their runs are shown to platform admins." }
            } @else {
                (scroll("Jobs", html! {
                    table data-testid="jobs" {
                        thead { tr { th scope="col" { "Job" } th scope="col" { "Last run" } th scope="col" { "Outcome" } th scope="col" { "Counts" } } }
                        tbody {
                            @for (name, run) in &runs {
                                tr {
                                    th scope="row" { (name) }
                                    @if let Some(r) = run {
                                        td { (when(&r.started_at)) }
                                        td { (status(&r.outcome)) @if let Some(e) = &r.error { " " (e) } }
                                        td { code { (r.counts.to_string()) } }
                                    } @else {
                                        td colspan="3" { "never run" }
                                    }
                                }
                            }
                        }
                    }
                }))
            }
        }
        section aria-labelledby="h-activity" {
            h2 id="h-activity" { "Activity, last " (DAYS) " days" }
            @if !admin {
                p { "Memory writes and deletions come from the audit log, which the admin role reads." }
            } @else {
                (svg::bars("Memory writes by gate decision", &activity.memory_writes))
                (svg::bars("Deletions", &activity.deletions))
            }
            (svg::bars("Context packs compiled (searches of memory, knowledge and skills)", &activity.context_packs))
            @if activity.truncated { p class="muted" { "The audit window was cut at 200,000 events." } }
        }
    };
    Ok(layout::page(&ctx, "/ui/", "Overview", body))
}
