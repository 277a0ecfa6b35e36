//! Review: the memory review queue (held candidates and `conflict_pending` records beside the
//! record each conflicts with, with the gate's reasons; Confirm and Reject), and skill versions
//! awaiting review with their test results (Approve and Reject).

use axum::extract::{Path, Query, State};
use maud::{Markup, html};
use registry_core::principal::Role;
use registry_memory::record::MemoryView;
use registry_skills::{LifecycleState, VersionView};
use serde::Deserialize;

use crate::layout::{self, post_button, scalar, status, to_json, when};
use crate::pages::{Posted, TokenForm};
use crate::{Console, Ctx, Page, UiError, see_other};

#[derive(Debug, Deserialize)]
pub struct ReviewQuery {
    /// Words the record's content, subject or attribute must contain.
    #[serde(default)]
    q: String,
    limit: Option<usize>,
}

fn memory_card(m: &MemoryView) -> Markup {
    html! {
        div class="memory" {
            p class="content" { (m.content) }
            dl class="facts" {
                dt { "Status" } dd { (status(&m.status)) }
                dt { "Class" } dd { (scalar(&to_json(&m.class))) }
                dt { "Subject / attribute" } dd { (m.subject.clone().unwrap_or_default()) " / " (m.attribute.clone().unwrap_or_default()) }
                dt { "Source, trust" } dd { (scalar(&to_json(&m.source))) ", " (scalar(&to_json(&m.trust))) }
                dt { "Written" } dd { (when(&m.created_at)) }
                dt { "Record" } dd { a href=(format!("/ui/memory/{}", m.id)) { (m.id) " v" (m.version) } }
            }
        }
    }
}

pub async fn page(State(c): State<Console>, ctx: Ctx, Query(q): Query<ReviewQuery>) -> Page {
    let p = ctx.principal.clone();
    let limit = q.limit.unwrap_or(50).clamp(1, 500);
    let needle = q.q.trim().to_lowercase();
    let (queue, skills, flagged) = c
        .run(move |s| {
            let mut queue = vec![];
            if p.has_role(Role::Reviewer) {
                for m in s.memory.review_queue(&p, limit)? {
                    let text = format!(
                        "{} {} {}",
                        m.content,
                        m.subject.as_deref().unwrap_or(""),
                        m.attribute.as_deref().unwrap_or("")
                    )
                    .to_lowercase();
                    if !needle.is_empty() && !text.contains(&needle) {
                        continue;
                    }
                    // What it conflicts with, as this key may see it.
                    let other = match &m.conflicts_with {
                        Some(id) => s.memory.get(&p, id).ok().map(|d| d.memory),
                        None => None,
                    };
                    queue.push((m, other));
                }
            }
            let mut skills = vec![];
            let mut flagged = vec![];
            for name in s.skill_names(&p)? {
                if !needle.is_empty() && !name.contains(&needle) {
                    continue;
                }
                for l in s.skills.visible_versions(&p, &name)? {
                    if l.body.state == LifecycleState::Tested {
                        skills.push(VersionView::of(&l));
                    } else if l.body.observe_flag.is_some() && l.body.state.is_released() {
                        flagged.push(VersionView::of(&l));
                    }
                }
            }
            Ok((queue, skills, flagged))
        })
        .await?;
    let reviewer = ctx.has_role(Role::Reviewer);
    let body = html! {
        form method="get" action="/ui/review" class="filter" role="search" {
            label for="q" { "Filter" }
            input id="q" name="q" type="search" value=(q.q);
            button type="submit" { "Filter" }
        }
        section aria-labelledby="h-mem" {
            h2 id="h-mem" { "Memories held for review (" (queue.len()) ")" }
            @if !reviewer {
                p { "The memory review queue is shown to keys with the reviewer role." }
            } @else if queue.is_empty() {
                p { "Nothing is waiting." }
            }
            @for (m, other) in &queue {
                article class="card review-item" data-testid="review-memory" data-id=(m.id) aria-label=(format!("Memory {}", m.id)) {
                    div class="side-by-side" {
                        div {
                            h3 { "Held: " (m.status) }
                            (memory_card(m))
                        }
                        @if let Some(id) = &m.conflicts_with {
                            div {
                                h3 { "Conflicts with" }
                                @if let Some(o) = other { (memory_card(o)) } @else { p { "Record " (id) " (not visible to this key)." } }
                            }
                        }
                    }
                    h4 { "The gate's reasons" }
                    ul class="reasons" {
                        @for r in &m.gate {
                            li { code { (scalar(&to_json(&r.code))) } " (rule " (r.rule) "): " (r.detail) }
                        }
                    }
                    @if reviewer {
                        div class="actions" {
                            (post_button(&ctx, &format!("/ui/review/memories/{}/confirm", m.id), "Confirm", &[]))
                            (post_button(&ctx, &format!("/ui/review/memories/{}/reject", m.id), "Reject", &[]))
                        }
                    }
                }
            }
        }
        section aria-labelledby="h-skills" {
            h2 id="h-skills" { "Skill versions awaiting review (" (skills.len()) ")" }
            @if skills.is_empty() { p { "Nothing is waiting." } }
            @for v in &skills {
                article class="card" data-testid="review-skill" aria-label=(format!("Skill {} {}", v.name, v.version)) {
                    h3 { a href=(format!("/ui/skills/{}?version={}", v.name, v.version)) { (v.name) " " (v.version) } }
                    p { "Author " (v.author) ", digest " code { (v.digest) } }
                    @if let Some(t) = &v.tests {
                        table {
                            caption { "Test results (" (if t.passed { "passed" } else { "failed" }) ", recorded by " (t.recorded_by) ")" }
                            thead { tr { th scope="col" { "Test" } th scope="col" { "Result" } th scope="col" { "Duration" } } }
                            tbody {
                                @for r in &t.results {
                                    tr { th scope="row" { (r.name) } td { (if r.passed { "passed" } else { "failed" }) } td { (r.duration_ms) " ms" } }
                                }
                            }
                        }
                    }
                    @if let Some(t) = &v.self_reported {
                        p class="muted" { "Self-reported by the author " (t.recorded_by) " (" (if t.passed { "passed" } else { "failed" }) "): not evidence for Test." }
                    }
                    @if let Some(w) = &v.test_waiver {
                        p { "Test waived by " (w.by) ": " (w.reason) }
                    }
                    (scan_section(v))
                    @if reviewer && v.author != ctx.principal.user {
                        div class="actions" {
                            (post_button(&ctx, &format!("/ui/skills/{}/versions/{}/approve", v.name, v.version), "Approve", &[("back", "/ui/review")]))
                            (post_button(&ctx, &format!("/ui/skills/{}/versions/{}/reject", v.name, v.version), "Reject", &[("back", "/ui/review")]))
                        }
                    } @else if reviewer {
                        p class="muted" { "The author may not review their own version." }
                    }
                }
            }
        }
        section aria-labelledby="h-observed" {
            h2 id="h-observed" { "Releases flagged by their observed runs (" (flagged.len()) ")" }
            @if flagged.is_empty() { p { "Nothing is flagged." } }
            @for v in &flagged {
                @if let Some(f) = &v.observe_flag {
                    article class="card" data-testid="review-observed" aria-label=(format!("Skill {} {}", v.name, v.version)) {
                        h3 { a href=(format!("/ui/skills/{}?version={}", v.name, v.version)) { (v.name) " " (v.version) } }
                        p {
                            "Reason " code { (f.reason) } ": failure rate " (format!("{:.3}", f.failure_rate))
                            " over " (f.runs) " runs"
                            @if let Some(p) = &f.predecessor { ", credibly worse than " (p) }
                            " (flagged " (when(&f.at)) ")."
                        }
                    }
                }
            }
        }
    };
    Ok(layout::page(&ctx, "/ui/review", "Review", body))
}

pub async fn decide_memory(
    State(c): State<Console>,
    ctx: Ctx,
    Path((id, decision)): Path<(String, String)>,
    Posted(f): Posted<TokenForm>,
) -> Page {
    ctx.check_post(&f.csrf)?;
    let p = ctx.principal.clone();
    c.run(move |s| match decision.as_str() {
        "confirm" => Ok(s.memory.confirm(&p, &id).map(|_| ())?),
        "reject" => Ok(s.memory.reject(&p, &id).map(|_| ())?),
        other => Err(UiError::not_found(format!("no decision {other:?}"))),
    })
    .await?;
    Ok(see_other("/ui/review"))
}

/// The version's supply-chain scan: its verdict, an override if any, and each finding (rule,
/// severity, file and line, excerpt, message). A failing scan blocks approval until a platform
/// override; a warning is shown for the reviewer to judge.
pub(crate) fn scan_section(v: &VersionView) -> Markup {
    html! {
        section class="scan" data-testid="scan" {
            @match &v.scan {
                None => { p class="muted" { "Scan: not recorded (published before the scan existed)." } }
                Some(r) => {
                    p {
                        "Scan: " strong data-testid="scan-verdict" { (r.verdict.as_str()) }
                        " (" (r.findings.len()) " finding(s))"
                        @if let Some(o) = &v.scan_override {
                            " — overridden by " (o.by) ": " (o.reason)
                        } @else if r.failed() {
                            " — approval and promotion are blocked until a platform override"
                        }
                    }
                    @if !r.findings.is_empty() {
                        table {
                            caption { "Scan findings" }
                            thead { tr { th scope="col" { "Rule" } th scope="col" { "Severity" } th scope="col" { "Where" } th scope="col" { "Finding" } } }
                            tbody {
                                @for f in &r.findings {
                                    tr data-testid="scan-finding" {
                                        th scope="row" { code { (f.rule) } }
                                        td { (f.severity.as_str()) }
                                        td { (f.file) ":" (f.line) }
                                        td { (f.message) br; code { (f.excerpt) } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
