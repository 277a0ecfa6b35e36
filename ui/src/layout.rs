//! The page shell (landmarks, navigation, sign-out), the form helpers that carry the CSRF
//! token, and a renderer for service views shown as they cross the wire.

use axum::response::{Html, IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use crate::Ctx;

/// The pages, in navigation order: (path, label).
pub const NAV: &[(&str, &str)] = &[
    ("/ui/", "Overview"),
    ("/ui/review", "Review"),
    ("/ui/memory", "Memory"),
    ("/ui/knowledge", "Knowledge"),
    ("/ui/skills", "Skills"),
    ("/ui/derivation", "Derivation"),
    ("/ui/deletions", "Deletions"),
    ("/ui/audit", "Audit"),
    ("/ui/context", "Context"),
    ("/ui/tasks", "Tasks"),
];

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · Harness Registry" }
            link rel="stylesheet" href="/ui/assets/console.css";
            script src="/ui/assets/htmx.min.js" defer {}
        }
    }
}

/// A signed-in page: header with the navigation (`current` marked), the principal, sign-out.
pub fn page(ctx: &Ctx, current: &str, title: &str, body: Markup) -> Response {
    let p = &ctx.principal;
    let roles: Vec<&str> = p.roles.iter().map(|r| r.as_str()).collect();
    let doc = html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body {
                a class="skip" href="#main" { "Skip to content" }
                header class="top" {
                    span class="brand" { "Harness Registry" }
                    nav aria-label="Console pages" {
                        ul {
                            @for (href, label) in NAV {
                                li {
                                    @if *href == current {
                                        a href=(href) aria-current="page" { (label) }
                                    } @else {
                                        a href=(href) { (label) }
                                    }
                                }
                            }
                        }
                    }
                    div class="who" {
                        span data-testid="principal" {
                            (p.user) " @ " (p.tenant) " (" (roles.join(", ")) ")"
                        }
                        form method="post" action="/ui/sign-out" class="inline" {
                            (csrf_field(ctx))
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main id="main" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    };
    Html(doc.into_string()).into_response()
}

/// A page without a session (sign-in, errors).
pub fn bare(title: &str, body: Markup) -> Html<String> {
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                (head(title))
                body {
                    header class="top" { span class="brand" { "Harness Registry" } }
                    main id="main" { h1 { (title) } (body) }
                }
            }
        }
        .into_string(),
    )
}

pub fn csrf_field(ctx: &Ctx) -> Markup {
    html! { input type="hidden" name="csrf" value=(ctx.csrf); }
}

/// A one-button form posting to `action` with the CSRF token and `fields`.
pub fn post_button(ctx: &Ctx, action: &str, label: &str, fields: &[(&str, &str)]) -> Markup {
    html! {
        form method="post" action=(action) class="inline" {
            (csrf_field(ctx))
            @for (k, v) in fields { input type="hidden" name=(k) value=(v); }
            button type="submit" { (label) }
        }
    }
}

/// Previous/next links for a list paged by an opaque cursor.
pub fn pager(base: &str, next: Option<String>, extra: &str) -> Markup {
    html! {
        nav class="pager" aria-label="Pages" {
            a href=(format!("{base}?{extra}")) { "First page" }
            @if let Some(n) = next {
                " · " a href=(format!("{base}?{extra}&after={n}")) rel="next" { "Next page" }
            }
        }
    }
}

/// A table wrapper that scrolls sideways on a narrow screen and can be reached by keyboard.
pub fn scroll(label: &str, inner: Markup) -> Markup {
    html! { div class="scroll" role="region" aria-label=(label) tabindex="0" { (inner) } }
}

pub fn status(s: &str) -> Markup {
    html! { span class=(format!("status s-{s}")) { (s) } }
}

pub fn when(t: &chrono::DateTime<chrono::Utc>) -> Markup {
    html! { time datetime=(t.to_rfc3339()) { (t.format("%Y-%m-%d %H:%M:%S UTC")) } }
}

/// A service view shown as it crosses the wire: objects as definition lists, arrays of
/// objects as lists, scalars as text.
pub fn json(v: &serde_json::Value) -> Markup {
    use serde_json::Value;
    match v {
        Value::Null => html! { span class="muted" { "none" } },
        Value::Bool(b) => html! { (b) },
        Value::Number(n) => html! { (n.to_string()) },
        Value::String(s) => html! { (s) },
        Value::Array(a) if a.is_empty() => html! { span class="muted" { "none" } },
        Value::Array(a) if a.iter().all(|x| !x.is_object() && !x.is_array()) => html! {
            (a.iter().map(scalar).collect::<Vec<_>>().join(", "))
        },
        Value::Array(a) => html! { ol class="json" { @for x in a { li { (json(x)) } } } },
        Value::Object(m) if m.is_empty() => html! { span class="muted" { "none" } },
        Value::Object(m) => html! {
            dl class="json" { @for (k, x) in m { dt { (k) } dd { (json(x)) } } }
        },
    }
}

pub fn scalar(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The field `k` of a JSON object as text.
pub fn field(v: &serde_json::Value, k: &str) -> String {
    v.get(k).map(scalar).unwrap_or_default()
}

pub fn to_json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or_default()
}
