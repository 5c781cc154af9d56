"""Participants walked through a running site in headless Chromium, as people would: one walk per study, viewport
and JavaScript setting, each counting its page loads and POSTs, the statuses, and axe-core's violations on every
page it saw.

    .venv/bin/python scripts/walk.py [--base-url http://127.0.0.1:8000] [--slugs demo,feelings-demo]
        [--rounds N] [--screenshots DIR]   (e.g. --slugs demo,feelings-demo,pairs-demo)

Start the site first (`make run`). Prints ONE JSON object: for each walk, the requests a participant made, the
violations found (every impact), the requests answered 4xx/5xx, and the completion code it ended on. Every walk
is a new participant id from the same address; `--rounds 2` walks each study eight times (the demo takes them
all: `make run` sets no per-address cap). With
`--screenshots`, a PNG of the first item and of the completion page of each walk.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import sys
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import Error as PlaywrightError  # noqa: E402

from tests.a11y import axe_violations  # noqa: E402

VIEWPORTS = {"phone": {"width": 390, "height": 844}, "desktop": {"width": 1280, "height": 800}}
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ALL_IMPACTS = ("minor", "moderate", "serious", "critical")
MAX_PAGES = 60


def _answer(page) -> str:
    """Answers whatever the current page asks, as a person would; returns what it did."""
    if page.locator("[data-completion-code]").count():
        return "done"
    form = page.locator("form[method=post]:visible").first
    agree = form.locator("button[name=decision][value=agree]")
    if agree.count():
        agree.click()
        return "consent"
    replies = form.locator("[data-reply-a], [data-reply-b]")
    if replies.count() == 2:  # a pair: the fuller reply, which the known-answer pairs ask for too
        a, b = (len(reply.inner_text()) for reply in replies.all())
        form.locator(f"button[name=choice][value={'left' if a >= b else 'right'}]").click()
        return "pair"
    scale = form.locator("button.scale-button")
    if scale.count():
        scale.nth(
            scale.count() // 2
        ).click()  # the middle of the scale, which the attention checks ask for too
        return "item"
    answered = set()
    for radio in form.locator("input[type=radio]").all():
        name = radio.get_attribute("name")
        if name in answered:
            continue
        answered.add(name)
        row = radio.locator("xpath=ancestor::fieldset[1]")
        asked = re.search(r"choose “([^”]+)”", row.inner_text()) if row.count() else None
        if asked:  # an instructed-response row: a reader chooses what it says
            row.get_by_label(asked[1], exact=True).check()
        else:
            radio.check()
    for field in form.locator("select").all():
        options = field.locator("option").all()
        field.select_option(index=min(1, len(options) - 1))
    for field in form.locator("input[type=number]").all():
        field.fill("30")
    for field in form.locator("input[type=text]:visible, textarea:visible").all():
        if field.evaluate("e => !!e.closest('[aria-hidden=true]')"):
            continue  # the honeypot, which people never see
        if not field.input_value():
            field.fill("prefer not to say")
    form.locator("button[type=submit]").last.click()
    return "form"


def walk(browser, base_url: str, slug: str, viewport: str, javascript: bool, shots: Path | None) -> dict:
    context = browser.new_context(viewport=VIEWPORTS[viewport])
    if not javascript:  # the site's own scripts blocked, as in a browser without them; axe still runs
        context.route("**/static/**/*.js", lambda route: route.abort())
    page = context.new_page()
    host = urlsplit(base_url).netloc
    requests, failures = {"page loads": 0, "posts": 0}, []

    def seen(request):
        if urlsplit(request.url).netloc != host or "/static/" in request.url:
            return
        if request.method == "POST":
            requests["posts"] += 1
        elif request.resource_type == "document":
            requests["page loads"] += 1

    def answered(response):
        if (
            urlsplit(response.url).netloc == host
            and response.status >= 400
            and "/static/" not in response.url
        ):
            failures.append(f"{response.request.method} {response.url} {response.status}")

    page.on("request", seen)
    page.on("response", answered)
    pid = f"walk-{secrets.token_hex(4)}"
    page.goto(f"{base_url}/s/{slug}/?PROLIFIC_PID={pid}&STUDY_ID={slug}&SESSION_ID={pid}")
    violations, steps, shot_item = [], [], False
    name = f"{slug}-{viewport}-{'js' if javascript else 'nojs'}"
    error = None
    for _ in range(MAX_PAGES):
        # The page and what it loads (styles, images, fonts). Not "networkidle", which waits for half a second
        # of silence after every page load; an item shown in place is awaited below, by its heading.
        page.wait_for_load_state("load")
        violations += axe_violations(page, impacts=ALL_IMPACTS)
        if (
            shots
            and not shot_item
            and page.locator("button.scale-button, form.questionnaire input[type=radio]").count()
        ):
            page.screenshot(path=shots / f"{name}-first.png", full_page=True)
            shot_item = True
        heading = page.locator("h1").first.inner_text() if page.locator("h1").count() else ""
        try:
            did = _answer(page)
            steps.append(did)
            if did == "done":
                break
            # In place (a reply swaps the page) or a navigation: wait until the heading changes.
            page.wait_for_function(
                "h => !document.querySelector('h1') || document.querySelector('h1').innerText !== h",
                arg=heading,
            )
        except PlaywrightError as failure:
            error = f"{page.url} '{heading}': {str(failure).splitlines()[0]}"
            if shots:
                page.screenshot(path=shots / f"{name}-error.png", full_page=True)
            break
    code = page.locator("[data-completion-code]").inner_text() if steps and steps[-1] == "done" else None
    if shots:
        page.screenshot(path=shots / f"{name}-done.png", full_page=True)
    context.close()
    return {
        "study": slug,
        "viewport": viewport,
        "javascript": javascript,
        **requests,
        "requests": requests["page loads"] + requests["posts"],
        "steps": len(steps) - 1,
        "axe_violations": sorted(set(violations)),
        "failed_requests": failures,
        "completion_code": code,
        "error": error,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000")
    parser.add_argument("--slugs", default="demo,feelings-demo,pairs-demo")
    parser.add_argument(
        "--rounds", type=int, default=1, help="walk every study, viewport and setting N times"
    )
    parser.add_argument("--screenshots", type=Path)
    args = parser.parse_args(argv)
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    walks = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        for _ in range(args.rounds):
            for slug in filter(None, args.slugs.split(",")):
                for viewport in VIEWPORTS:
                    for javascript in (True, False):
                        walks.append(
                            walk(browser, args.base_url, slug, viewport, javascript, args.screenshots)
                        )
        browser.close()
    print(json.dumps({"walks": walks}, indent=2))


if __name__ == "__main__":
    main()
