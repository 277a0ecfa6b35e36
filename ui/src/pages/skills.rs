//! Skills: each skill's versions with their lifecycle states and the allowed next actions as
//! buttons (review, promote, deprecate, yank, unyank, rollback), and a version's manifest,
//! files and digest.

use axum::extract::{Path, Query, State};
use maud::{Markup, html};
use registry_core::principal::Role;
use registry_skills::{
    Decision, DeprecateRequest, LifecycleState, ReviewRequest, RollbackRequest, VersionView,
    YankRequest,
};
use serde::Deserialize;

use crate::layout::{csrf_field, field, json, page, post_button, scroll, status, to_json};
use crate::pages::Posted;
use crate::{Console, Ctx, Page, UiError, see_other};

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    q: String,
}

pub async fn list(State(c): State<Console>, ctx: Ctx, Query(q): Query<ListQuery>) -> Page {
    let p = ctx.principal.clone();
    let needle = q.q.trim().to_lowercase();
    let skills = c
        .run(move |s| {
            let mut out = vec![];
            for name in s.skill_names(&p)? {
                if !needle.is_empty() && !name.contains(&needle) {
                    continue;
                }
                let versions = s.skills.visible_versions(&p, &name)?;
                let current = s.skills.current_release(&versions)?.map(|r| r.version);
                let states: Vec<(String, LifecycleState)> = versions
                    .iter()
                    .map(|l| (l.body.version.clone(), l.body.state))
                    .collect();
                out.push((name, current, states));
            }
            Ok(out)
        })
        .await?;
    let body = html! {
        form method="get" action="/ui/skills" class="filter" role="search" {
            label for="q" { "Filter by name" }
            input id="q" name="q" type="search" value=(q.q);
            button type="submit" { "Filter" }
        }
        @if skills.is_empty() { p { "No skill is visible to this key." } }
        (scroll("Skills", html! {
            table data-testid="skills" {
                thead { tr { th scope="col" { "Skill" } th scope="col" { "Current release" } th scope="col" { "Versions" } } }
                tbody {
                    @for (name, current, states) in &skills {
                        tr {
                            th scope="row" { a href=(format!("/ui/skills/{name}")) { (name) } }
                            td { (current.clone().unwrap_or_else(|| "none".into())) }
                            td { @for (v, st) in states { span class="chip" { (v) " " (status(st.as_str())) } " " } }
                        }
                    }
                }
            }
        }))
    };
    Ok(page(&ctx, "/ui/skills", "Skills", body))
}

#[derive(Debug, Deserialize)]
pub struct SkillQuery {
    version: Option<String>,
}

fn actions(ctx: &Ctx, v: &VersionView) -> Markup {
    let base = format!("/ui/skills/{}/versions/{}", v.name, v.version);
    let writer = ctx.principal.can_write();
    // Released versions are moved by their author or an admin (the service decides; the
    // buttons only follow it).
    let governor = writer && (v.author == ctx.principal.user || ctx.principal.is_admin());
    let reviewer = ctx.has_role(Role::Reviewer) && v.author != ctx.principal.user;
    html! {
        div class="actions" {
            @for a in &v.allowed_transitions {
                @match a.as_str() {
                    "review" if reviewer => {
                        (post_button(ctx, &format!("{base}/approve"), "Approve", &[]))
                        (post_button(ctx, &format!("{base}/reject"), "Reject", &[]))
                    }
                    "promote" if governor => {
                        (post_button(ctx, &format!("{base}/{a}"), &capitalise(a), &[]))
                    }
                    "yank" | "unyank" if governor => {
                        (post_button(ctx, &format!("{base}/{a}"), &capitalise(a), &[]))
                    }
                    "deprecate" if governor => {
                        form method="post" action=(format!("{base}/deprecate")) class="inline" {
                            (csrf_field(ctx))
                            label for=(format!("dep-{}", v.version)) { "Deprecation message" }
                            input id=(format!("dep-{}", v.version)) name="message" required;
                            button type="submit" { "Deprecate" }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

fn rate(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "–".into())
}

/// A version's observed figures and its comparison with the release it replaced.
fn observed(r: &registry_skills::RunSummary) -> Markup {
    let st = &r.stats;
    html! {
        dl class="facts" data-testid="observed-runs" {
            dt { "Runs" } dd { (st.runs) " (" (st.successes) " success, " (st.failures) " failure, " (st.errors) " error, " (st.aborted) " aborted)" }
            dt { "Success rate (Wilson 95%)" } dd { (rate(st.success_rate)) " [" (rate(st.success_low)) ", " (rate(st.success_high)) "]" }
            dt { "Duration p50 / p95" } dd { (st.duration_p50_ms.map(|d| format!("{d} ms")).unwrap_or_default()) " / " (st.duration_p95_ms.map(|d| format!("{d} ms")).unwrap_or_default()) }
            dt { "Last use" } dd { @if let Some(t) = &st.last_used_at { (crate::layout::when(t)) } }
            @if let Some(c) = &r.compared_with {
                dt { "Against " (c.predecessor) } dd { (c.verdict) " (its success rate " (rate(c.predecessor_stats.success_rate)) " over " (c.predecessor_stats.runs) " runs)" }
            }
            @if let Some(f) = &r.observe_flag {
                dt { "Flagged for review" } dd { code { (f.reason) } }
            }
        }
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

pub async fn skill(
    State(c): State<Console>,
    ctx: Ctx,
    Path(name): Path<String>,
    Query(q): Query<SkillQuery>,
) -> Page {
    let p = ctx.principal.clone();
    let n = name.clone();
    let (versions, current, selected, runs) = c
        .run(move |s| {
            let loaded = s.skills.visible_versions(&p, &n)?;
            if loaded.is_empty() {
                return Err(UiError::not_found(format!("no skill {n}")));
            }
            let current = s.skills.current_release(&loaded)?.map(|r| r.version);
            // The version shown is the one every other door serves under that name.
            let selected = match &q.version {
                Some(v) => Some(VersionView::of(&s.skills.resolve(&p, &n, v)?)),
                None => loaded.last().map(VersionView::of),
            };
            // Observed runs of the version shown (the runs this key may see).
            let runs = match &selected {
                Some(v) => Some(s.skills.run_summary(&p, &n, &v.version)?),
                None => None,
            };
            Ok((
                loaded.iter().map(VersionView::of).collect::<Vec<_>>(),
                current,
                selected,
                runs,
            ))
        })
        .await?;
    let selected = selected
        .as_ref()
        .ok_or_else(|| UiError::not_found("no version"))?;
    let published: Vec<&VersionView> = versions
        .iter()
        .filter(|v| v.state == LifecycleState::Published && current.as_deref() != Some(&v.version))
        .collect();
    let body = html! {
        p { "Current release: " strong data-testid="current-release" { (current.clone().unwrap_or_else(|| "none".into())) } }
        section aria-labelledby="h-versions" {
            h2 id="h-versions" { "Versions" }
            (scroll("Versions", html! {
                table data-testid="versions" {
                    thead { tr { th scope="col" { "Version" } th scope="col" { "State" } th scope="col" { "Digest" } th scope="col" { "Next actions" } } }
                    tbody {
                        @for v in &versions {
                            tr data-version=(v.version) {
                                th scope="row" { a href=(format!("/ui/skills/{}?version={}", v.name, v.version)) { (v.version) } }
                                td data-testid="state" { (status(v.state.as_str())) }
                                td { code class="digest" { (v.digest) } }
                                td { (actions(&ctx, v)) }
                            }
                        }
                    }
                }
            }))
            @if ctx.principal.can_write() && !published.is_empty() {
                form method="post" action=(format!("/ui/skills/{name}/rollback")) class="inline" {
                    (csrf_field(&ctx))
                    label for="rollback-to" { "Roll the release back to" }
                    select id="rollback-to" name="version" {
                        @for v in &published { option value=(v.version) { (v.version) } }
                    }
                    button type="submit" { "Rollback" }
                }
            }
        }
        section aria-labelledby="h-selected" {
            h2 id="h-selected" { "Version " (selected.version) }
            dl class="facts" {
                dt { "State" } dd { (status(selected.state.as_str())) }
                dt { "Digest" } dd { code { (selected.digest) } }
                dt { "Archive" } dd { code { (selected.archive_sha256) } ", " (selected.archive_size) " bytes" }
                dt { "Author, scope" } dd { (selected.author) ", " (selected.scope) }
                dt { "Allowed next" } dd { (selected.allowed_transitions.join(", ")) }
            }
            h3 { "Files" }
            (scroll("Files", html! {
                table {
                    thead { tr { th scope="col" { "Path" } th scope="col" { "Size" } th scope="col" { "Executable" } th scope="col" { "sha256" } } }
                    tbody {
                        @for f in selected.files.as_array().into_iter().flatten() {
                            tr { td { (field(f, "path")) } td { (field(f, "size")) } td { (field(f, "executable")) } td { code { (field(f, "sha256")) } } }
                        }
                    }
                }
            }))
            h3 { "Manifest" }
            (json(&selected.manifest))
            h3 { "Front matter" }
            (json(&selected.frontmatter))
            h3 { "Scan" }
            (crate::pages::review::scan_section(selected))
            h3 { "Tests" }
            (json(&to_json(&selected.tests)))
            @if let Some(t) = &selected.self_reported {
                h3 { "Self-reported by the author (not evidence for Test)" }
                (json(&to_json(t)))
            }
            @if let Some(w) = &selected.test_waiver {
                h3 { "Test waiver" }
                (json(&to_json(w)))
            }
            @if let Some(r) = &runs {
                h3 { "Observed runs" }
                (observed(r))
            }
            h3 { "Reviews" }
            (json(&to_json(&selected.reviews)))
        }
    };
    Ok(page(&ctx, "/ui/skills", &format!("Skill {name}"), body))
}

#[derive(Debug, Deserialize)]
pub struct ActForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    back: String,
}

pub async fn act(
    State(c): State<Console>,
    ctx: Ctx,
    Path((name, version, action)): Path<(String, String, String)>,
    Posted(f): Posted<ActForm>,
) -> Page {
    ctx.check_post(&f.csrf)?;
    let p = ctx.principal.clone();
    let (n, v) = (name.clone(), version.clone());
    let (message, reason, back) = (f.message, f.reason, f.back);
    c.run(move |s| {
        let sk = &s.skills;
        let review = |decision| ReviewRequest {
            decision,
            comment: String::new(),
        };
        match action.as_str() {
            "approve" => sk.review(&p, &n, &v, review(Decision::Approve)),
            "reject" => sk.review(&p, &n, &v, review(Decision::Reject)),
            "promote" => sk.promote(&p, &n, &v),
            "deprecate" => sk.deprecate(
                &p,
                &n,
                &v,
                DeprecateRequest {
                    message,
                    replacement: None,
                },
            ),
            "yank" => sk.yank(
                &p,
                &n,
                &v,
                YankRequest {
                    reason: Some(reason).filter(|r| !r.is_empty()),
                },
            ),
            "unyank" => sk.unyank(&p, &n, &v),
            other => return Err(UiError::not_found(format!("no action {other:?}"))),
        }?;
        Ok(())
    })
    .await?;
    let back = if back.starts_with("/ui/") && !back.starts_with("/ui//") {
        back
    } else {
        format!("/ui/skills/{name}?version={version}")
    };
    Ok(see_other(&back))
}

#[derive(Debug, Deserialize)]
pub struct RollbackForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    version: String,
}

pub async fn rollback(
    State(c): State<Console>,
    ctx: Ctx,
    Path(name): Path<String>,
    Posted(f): Posted<RollbackForm>,
) -> Page {
    ctx.check_post(&f.csrf)?;
    let p = ctx.principal.clone();
    let n = name.clone();
    c.run(move |s| {
        s.skills.rollback(
            &p,
            &n,
            RollbackRequest {
                version: Some(f.version),
                digest: None,
            },
        )?;
        Ok(())
    })
    .await?;
    Ok(see_other(&format!("/ui/skills/{name}")))
}
