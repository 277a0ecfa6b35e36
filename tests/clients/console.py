"""Drives the web console in Debian's chromium through Playwright (tests/integration/ui.rs).

Reads a JSON object on stdin (the server's base URL, keys, ids the Rust test seeded, where
chromium, axe-core and the screenshots are) and prints one JSON object: what each step saw,
the axe-core violations of every page at both sizes, and the screenshots written. It asserts
nothing about the registry's state itself beyond what a step needs to go on; the Rust test
checks the outcome over the HTTP API.
"""

import json
import os
import sys
from urllib.parse import quote

from playwright.sync_api import sync_playwright

cfg = json.load(sys.stdin)
BASE = cfg["base"]
SHOTS = cfg["screenshots"]
AXE = open(cfg["axe"], encoding="utf-8").read()
SIZES = {"desktop": (1280, 800), "phone": (390, 844)}
os.makedirs(SHOTS, exist_ok=True)

out = {"axe": {}, "screenshots": [], "steps": {}, "headings": {}}


def step(name, value):
    out["steps"][name] = value


def check(page, name):
    """axe-core and a full-page screenshot at each size; the page's h1."""
    out["headings"][name] = page.locator("h1").first.inner_text()
    for size, (w, h) in SIZES.items():
        page.set_viewport_size({"width": w, "height": h})
        page.evaluate(AXE)
        violations = page.evaluate(
            """async () => {
                const r = await axe.run(document, {resultTypes: ['violations']});
                return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                    nodes: v.nodes.length,
                    targets: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
            }"""
        )
        out["axe"][f"{name}@{size}"] = violations
        path = os.path.join(SHOTS, f"{name}-{size}.png")
        page.screenshot(path=path, full_page=True)
        out["screenshots"].append(path)
    page.set_viewport_size({"width": 1280, "height": 800})


def visit(page, name, path):
    page.goto(BASE + path)
    check(page, name)


def sign_in(browser, key):
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    page.goto(BASE + "/ui/")
    assert page.url.endswith("/ui/sign-in"), page.url
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(BASE + "/ui/")
    return ctx, page


def forged_post(ctx, path, form, headers=None):
    r = ctx.request.post(BASE + path, form=form, headers=headers or {}, max_redirects=0)
    return r.status


with sync_playwright() as pw:
    browser = pw.chromium.launch(executable_path=cfg["chromium"], headless=True)

    # The sign-in page, before any session.
    anon = browser.new_context(viewport={"width": 1280, "height": 800})
    p0 = anon.new_page()
    p0.goto(BASE + "/ui/")
    step("unsigned_lands_on", p0.url)
    check(p0, "sign-in")
    anon.close()

    ctx, page = sign_in(browser, cfg["admin_key"])
    cookies = [c for c in ctx.cookies() if c["name"] == "hr_console"]
    step("cookie", {k: cookies[0][k] for k in ("httpOnly", "sameSite", "expires", "path")})
    step("key_in_url", cfg["admin_key"] in page.url)
    step("key_in_page", cfg["admin_key"] in page.content())
    step("principal", page.get_by_test_id("principal").inner_text())
    step("overview_counts", page.get_by_test_id("asset-counts").inner_text())
    step("overview_plots", page.locator("figure.plot svg[role=img]").count())
    step("overview_jobs", page.get_by_test_id("jobs").count())
    check(page, "overview")

    # Review: the conflict_pending record beside what it conflicts with; Confirm it.
    visit(page, "review", "/ui/review")
    item = page.locator(f"article[data-testid=review-memory][data-id='{cfg['conflict_id']}']")
    step("review_item_text", item.inner_text())
    item.get_by_role("button", name="Confirm").click()
    page.wait_for_load_state()
    step("after_confirm_url", page.url)
    step("review_item_left", page.locator(
        f"article[data-testid=review-memory][data-id='{cfg['conflict_id']}']").count())
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")

    # The skill version awaiting review: Approve (from Review), then Promote (from Skills).
    name, version = cfg["skill"], cfg["skill_version"]
    card = page.locator("article[data-testid=review-skill]", has_text=f"{name} {version}")
    step("review_skill_text", card.inner_text())
    card.get_by_role("button", name="Approve").click()
    page.wait_for_load_state()
    visit(page, "skills", "/ui/skills")
    page.goto(f"{BASE}/ui/skills/{name}")
    row = page.locator(f"tr[data-version='{version}']")
    step("state_after_approve", row.get_by_test_id("state").inner_text())
    row.get_by_role("button", name="Promote").click()
    page.wait_for_load_state()
    page.goto(f"{BASE}/ui/skills/{name}")
    row = page.locator(f"tr[data-version='{version}']")
    step("state_after_promote", row.get_by_test_id("state").inner_text())
    step("current_release", page.get_by_test_id("current-release").inner_text())
    check(page, "skill")

    # Memory: the list, a search with its score breakdown, a record.
    visit(page, "memory", "/ui/memory")
    page.goto(BASE + "/ui/memory?q=" + quote(cfg["memory_query"]))
    step("memory_hits", page.get_by_test_id("memory-hit").count())
    step("memory_breakdown", page.locator("table.breakdown").first.inner_text())
    check(page, "memory-search")
    visit(page, "memory-record", f"/ui/memory/{cfg['conflict_id']}")

    # Knowledge: documents, evidence, INSUFFICIENT_EVIDENCE, a document.
    page.goto(BASE + "/ui/knowledge?q=" + quote(cfg["knowledge_query"]))
    step("evidence_status", page.get_by_test_id("evidence-status").inner_text())
    step("evidence_count", page.get_by_test_id("evidence").count())
    check(page, "knowledge")
    page.goto(BASE + "/ui/knowledge?q=" + quote(cfg["knowledge_miss"]))
    step("miss_status", page.get_by_test_id("evidence-status").inner_text())
    visit(page, "knowledge-document", f"/ui/knowledge/{cfg['document_id']}")

    # Derivation around the document: its chunks below it.
    visit(page, "derivation", f"/ui/derivation?id={cfg['document_id']}")
    step("derivation_edges", page.get_by_test_id("edges").locator("tbody tr").count())
    step("derivation_svg", page.locator("svg.graph[role=group]").count())

    # Deletions: open the receipt from the list.
    visit(page, "deletions", "/ui/deletions")
    page.get_by_role("link", name=cfg["receipt_id"]).click()
    page.wait_for_load_state()
    step("receipt_level", page.get_by_test_id("level-reached").inner_text())
    step("receipt_stores", page.get_by_test_id("stores").locator("tbody tr").count())
    check(page, "receipt")

    # Audit: Verify names the outcome (htmx swaps the result in).
    visit(page, "audit", "/ui/audit")
    page.get_by_role("button", name="Verify the audit chain").click()
    page.get_by_test_id("verify-result").wait_for()
    step("verify", page.get_by_test_id("verify-result").inner_text())
    check(page, "audit-verified")

    # Context: the stored manifests, one, and a comparison of two.
    visit(page, "context", "/ui/context")
    page.goto(f"{BASE}/ui/context/{cfg['manifests'][0]}")
    check(page, "context-manifest")
    page.goto(f"{BASE}/ui/context/compare?a={cfg['manifests'][0]}&b={cfg['manifests'][1]}")
    step("compare_heading", page.locator("h1").inner_text())
    check(page, "context-compare")

    # Tasks: the list, one task (events, artifacts, continuation preview), an artifact's lines.
    visit(page, "tasks", "/ui/tasks")
    visit(page, "task", f"/ui/tasks/{cfg['task_id']}")
    step("task_events", page.get_by_test_id("events").locator("tbody tr").count())
    step("task_artifacts", page.get_by_test_id("artifacts").locator("tbody tr").count())
    step("continuation", page.get_by_test_id("continuation").inner_text())
    visit(page, "task-artifact", f"/ui/tasks/{cfg['task_id']}/artifacts/{cfg['artifact_id']}")
    step("artifact_lines", page.get_by_test_id("artifact-lines").inner_text())

    # Keyboard: Tab from the top reaches the skip link, then the navigation.
    page.goto(BASE + "/ui/")
    page.keyboard.press("Tab")
    first = page.evaluate("document.activeElement.textContent")
    page.keyboard.press("Tab")
    second = page.evaluate("document.activeElement.textContent")
    step("keyboard", [first, second])

    # Forged POSTs with a live session: no token, a wrong token, a right token from elsewhere.
    target = f"/ui/review/memories/{cfg['pending_id']}/reject"
    step("forged_no_token", forged_post(ctx, target, {}))
    step("forged_bad_token", forged_post(ctx, target, {"csrf": "0" * 64}))
    step("forged_cross_site", forged_post(
        ctx, target, {"csrf": csrf}, {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}))

    # Sign out; the old cookie is refused afterwards.
    old = ctx.cookies()
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(BASE + "/ui/sign-in")
    step("signed_out_at", page.url)
    replay = browser.new_context()
    replay.add_cookies(old)
    rp = replay.new_page()
    rp.goto(BASE + "/ui/review")
    step("old_cookie_get_lands_on", rp.url)
    step("old_cookie_post", forged_post(replay, target, {"csrf": csrf}))
    replay.close()
    ctx.close()

    # A reader: no Confirm / Approve / Promote buttons; a forged action with its own valid
    # token is refused by the service's rule.
    rctx, rpage = sign_in(browser, cfg["reader_key"])
    rpage.goto(BASE + "/ui/review")
    step("reader_confirm_buttons", rpage.get_by_role("button", name="Confirm").count())
    step("reader_approve_buttons", rpage.get_by_role("button", name="Approve").count())
    check(rpage, "review-reader")
    rpage.goto(f"{BASE}/ui/skills/{name}")
    step("reader_promote_buttons", rpage.get_by_role("button", name="Promote").count())
    step("reader_action_buttons", rpage.locator("tr[data-version] button").count())
    rcsrf = rpage.locator("input[name=csrf]").first.get_attribute("value")
    step("reader_forged_confirm", forged_post(
        rctx, f"/ui/review/memories/{cfg['pending_id']}/confirm", {"csrf": rcsrf}))
    step("reader_forged_yank", forged_post(
        rctx, f"/ui/skills/{name}/versions/{version}/yank", {"csrf": rcsrf}))
    rctx.close()
    browser.close()

print(json.dumps(out))
