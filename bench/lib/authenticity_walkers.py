"""The authenticity bench's simulated participants (bench/authenticity.py): people and agents.

People run in a browser with a person's surface: navigator.webdriver off natively (a launch flag, no script of
ours in the page), a desktop's screen larger than the page, a person's user agent. Agents run in a browser
driven the way today's agents drive it: trusted input through the DevTools protocol, webdriver hidden by an
init script, a person's user agent. No-JS posters use plain HTTP.

| kind | style | reads | answers | time per page |
| --- | --- | --- | --- | --- |
| people | mouse | the page | a hand's path (minimum-jerk, tremor, overshoot, whole pixels), click | words / reading speed + a decision |
| people | keyboard | the page | Tab and Enter, or the answer keys | the same |
| people | touch | the page (a phone) | taps | the same |
| people | screenreader | the accessibility tree, listening (about 200 words a minute) | Tab and Enter only; the picture check by its sound | the same |
| people | fast | the page, skimming (about 2.2 times the speed) | a mouse or a keyboard | the same, quicker decisions |
| agents | cdp_obey / cdp_ignore | `document.body.innerText` | `locator.click()` (trusted), types the hidden word when obeying | 1-4 s (a model's latency) |
| agents | a11y | the accessibility snapshot | clicks by role (trusted); "I can't see the picture", then guesses or gives up | 2-6 s |
| agents | pointer | `inner_text` of the page | a smooth Bezier path with eased speed (sub-pixel), then a click | human-like pauses, not tied to the text |
| posters | plain / forged | the HTML | plain form posts (no JavaScript); `forged` adds a `sig` copied from a person | 2-6 s |

People answer from their own view of each reply, agents like the study's LLM judge (bench/lib/answers_model.py).
"""

from __future__ import annotations

import asyncio
import html
import json
import math
import random
import re

from .answers_model import Answerer, Latent

DESKTOP_UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36"
PHONE_UA = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Mobile Safari/537.36"
NOT_DRIVEN = "Object.defineProperty(Navigator.prototype, 'webdriver', {get: () => false});"
DONE = "Thank you, you have finished"
TRAP_PATTERN = r"type the word (\S+) into the confirmation field"
WPM_MEDIAN, WPM_SIGMA = 238, 0.25
DECIDE_MEDIAN_S, DECIDE_SIGMA = 2.5, 0.5
CANT_SEE = "I can\u2019t see the picture"
NEITHER = "I can neither see the picture nor hear the sound"

KINDS = {
    "people": ["mouse", "keyboard", "touch", "screenreader", "fast"],
    "agents": ["cdp_obey", "cdp_ignore", "a11y", "pointer"],
    "posters": ["plain", "forged"],
}


def human_path(x0: float, y0: float, x1: float, y1: float, rng: random.Random) -> list[tuple[int, int]]:
    """A hand's way to a target: a minimum-jerk sweep to a point a little off it (the overshoot or undershoot),
    a short correction, tremor all along, whole pixels."""
    points = []
    ox, oy = x1 + rng.uniform(-14, 14), y1 + rng.uniform(-9, 9)
    n = rng.randint(18, 34)
    for i in range(1, n + 1):
        t = i / n
        s = 10 * t**3 - 15 * t**4 + 6 * t**5
        points.append(
            (round(x0 + (ox - x0) * s + rng.gauss(0, 0.9)), round(y0 + (oy - y0) * s + rng.gauss(0, 0.9)))
        )
    for i in range(1, rng.randint(3, 6) + 1):
        points.append(
            (
                round(ox + (x1 - ox) * i / 5 + rng.gauss(0, 0.6)),
                round(oy + (y1 - oy) * i / 5 + rng.gauss(0, 0.6)),
            )
        )
    points.append((round(x1), round(y1)))
    return points


def bezier_path(x0: float, y0: float, x1: float, y1: float, rng: random.Random) -> list[tuple[float, float]]:
    """An agent's "human-like" path: a cubic Bezier curve with eased speed, exactly on the curve (no tremor, no
    overshoot), at sub-pixel positions."""
    c1 = (x0 + (x1 - x0) * 0.3 + rng.uniform(-80, 80), y0 + (y1 - y0) * 0.1 + rng.uniform(-80, 80))
    c2 = (x0 + (x1 - x0) * 0.8 + rng.uniform(-60, 60), y0 + (y1 - y0) * 0.9 + rng.uniform(-60, 60))
    n = rng.randint(20, 36)
    points = []
    for i in range(1, n + 1):
        u = i / n
        t = u * u * (3 - 2 * u)
        points.append(
            (
                (1 - t) ** 3 * x0 + 3 * (1 - t) ** 2 * t * c1[0] + 3 * (1 - t) * t * t * c2[0] + t**3 * x1,
                (1 - t) ** 3 * y0 + 3 * (1 - t) ** 2 * t * c1[1] + 3 * (1 - t) * t * t * c2[1] + t**3 * y1,
            )
        )
    return points


class Walker:
    """One simulated participant."""

    def __init__(self, kind: str, style: str, index: int, args, rng: random.Random, latent: Latent, hooks):
        self.kind, self.style, self.index, self.args, self.rng = kind, style, index, args, rng
        self.pid = f"{kind}-{style}-{index:03d}"
        fast = style == "fast"
        self.wpm = (WPM_MEDIAN * (2.2 if fast else 1) if style != "screenreader" else 200) * math.exp(
            rng.gauss(0, WPM_SIGMA)
        )
        self.decide = DECIDE_MEDIAN_S * (0.4 if fast else 1)
        self.answerer = Answerer(latent, random.Random(rng.random()), agent=kind != "people")
        self.hooks = (
            hooks  # picture_label(pid), beeps(pid): what a person sees and hears, asked of the server
        )
        self.hand = (
            "keyboard" if style == "screenreader" else (rng.choice(["mouse", "keyboard"]) if fast else style)
        )
        self.mouse = (rng.uniform(100, 1100), rng.uniform(100, 700))
        self.completed = False
        self.started = True  # False: the run's time limit passed before its turn (bench/authenticity.py)
        self.picture: str | None = None

    def address(self) -> str:
        group = sum(len(v) for v in KINDS.values())
        number = [s for v in KINDS.values() for s in v].index(self.style) + 1
        return f"10.{number % group + 1}.{self.index // 250}.{self.index % 250 + 1}"

    async def pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds * self.args.compression)

    def reading_seconds(self, words: int) -> float:
        return words / self.wpm * 60 + self.decide * math.exp(self.rng.gauss(0, DECIDE_SIGMA))

    def agent_seconds(self) -> float:
        if self.style == "a11y":
            return self.rng.uniform(2, 6)
        if self.style == "pointer":
            return 6 * math.exp(self.rng.gauss(0, 0.5))
        return self.rng.uniform(1, 4)

    # --- the browser -------------------------------------------------------------------------------------
    async def walk(self, browsers: dict, base_url: str) -> None:
        if self.kind == "posters":
            await self.post_walk(base_url)
            return
        phone = self.style == "touch"
        options = dict(
            viewport={"width": 390, "height": 844} if phone else {"width": 1280, "height": 800},
            is_mobile=phone,
            has_touch=phone,
            user_agent=PHONE_UA if phone else DESKTOP_UA,
            extra_http_headers={"X-Forwarded-For": self.address()},
        )
        if self.kind == "people" and not phone:
            options["screen"] = {"width": 1920, "height": 1080}
        context = await browsers[self.kind].new_context(**options)
        if self.kind == "agents":
            await context.add_init_script(NOT_DRIVEN)
        page = await context.new_page()
        page.set_default_timeout(30_000)
        try:
            await page.goto(
                f"{base_url}/s/{self.args.slug}/?PROLIFIC_PID={self.pid}&STUDY_ID=S&SESSION_ID={self.pid}"
            )
            await self.look(page, seconds=self.rng.uniform(8, 40))
            await self.obey(page)
            await self.press(page, "I agree, start the study")
            await self.wait_heading(page, lambda h: h.startswith("Instructions"))
            await self.look(page, seconds=self.rng.uniform(10, 60))
            await self.press(page, "I have read the instructions, continue")
            shown = ""
            for _ in range(60):
                shown = await self.wait_heading(
                    page, lambda h, before=shown: h != before and (" of " in h or h.startswith(DONE))
                )
                if shown.startswith(DONE):
                    self.completed = True
                    return
                if await page.locator("svg.picture").count():
                    await self.picture_check(page, base_url)
                else:
                    await self.item(page, context)
        finally:
            await context.close()

    async def wait_heading(self, page, test) -> str:
        for attempt in range(3):  # the picture page comes and goes by a navigation
            try:
                for _ in range(600):
                    text = await page.evaluate(
                        "() => { const h = document.querySelector('main h1'); return h ? h.textContent.trim() : ''; }"
                    )
                    if text and test(text):
                        return text
                    await asyncio.sleep(0.05)
                raise TimeoutError(f"{self.pid}: the heading stayed {text!r}")
            except Exception as exc:
                if "context was destroyed" not in str(exc) and "navigation" not in str(exc) or attempt == 2:
                    raise
                await page.wait_for_load_state()
        raise AssertionError("unreachable")

    async def look(self, page, *, seconds: float) -> None:
        """A page without an answer to give (consent, instructions): read it, or think it over."""
        if self.kind == "agents":
            await self.read_as_agent(page)
            seconds = self.agent_seconds()
        await self.idle(page, seconds)

    async def read_as_agent(self, page) -> str:
        if self.style.startswith("cdp"):
            return await page.evaluate("document.body.innerText")
        if self.style == "a11y":
            return await page.locator("body").aria_snapshot()
        return await page.locator("main").inner_text()

    async def idle(self, page, seconds: float) -> None:
        """A pause; a mouse user's (and the pointer agent's) hand moves a little meanwhile."""
        if self.hand in ("mouse", "pointer"):
            for _ in range(2):
                await self.move_to(page, self.rng.uniform(100, 1100), self.rng.uniform(100, 700))
                await self.pause(seconds / 2)
            return
        await self.pause(seconds)

    async def move_to(self, page, x: float, y: float) -> None:
        path = (bezier_path if self.hand == "pointer" else human_path)(*self.mouse, x, y, self.rng)
        for px, py in path:
            await page.mouse.move(px, py)
            await asyncio.sleep(0.008)
        self.mouse = (x, y)

    async def obey(self, page) -> None:
        """The agent that obeys text planted in the page types the word the hidden instruction asks for."""
        if self.style != "cdp_obey":
            return
        found = re.search(TRAP_PATTERN, await page.evaluate("document.body.innerText"))
        if found:
            await page.locator("input[name='confirm_word']").first.fill(found.group(1), force=True)

    async def tab_to(self, page, name: str) -> None:
        for _ in range(60):
            await page.keyboard.press("Tab")
            await asyncio.sleep(0.01)
            focused = await page.evaluate("document.activeElement ? document.activeElement.textContent : ''")
            if name in " ".join(focused.split()):
                return
        raise RuntimeError(f"{self.pid}: Tab never reached {name!r}")

    async def press(self, page, name: str, *, role: str = "button") -> None:
        """Presses the button (or link) named `name` the way this walker does."""
        target = page.get_by_role(role, name=name, exact=role == "button").first
        if self.kind == "agents" and self.style != "pointer":
            await target.click()  # Playwright's click: trusted input through the DevTools protocol
        elif self.hand == "keyboard":
            await self.tab_to(page, name)
            await page.keyboard.press(self.rng.choice(["Enter", " "]) if role == "button" else "Enter")
        else:
            await target.scroll_into_view_if_needed()  # a person scrolls to a button below the fold
            box = await target.bounding_box()
            x = box["x"] + box["width"] * self.rng.uniform(0.25, 0.75)
            y = box["y"] + box["height"] * self.rng.uniform(0.3, 0.7)
            if self.hand == "touch":
                await page.touchscreen.tap(x, y)
                return
            await self.move_to(page, x, y)
            await page.mouse.down()
            await asyncio.sleep(self.rng.uniform(0.04, 0.12))
            await page.mouse.up()

    async def item(self, page, context) -> None:
        pair = await page.locator("[data-reply-a]").count() > 0
        selectors = ("[data-reply-a]", "[data-reply-b]") if pair else ("[data-response]",)
        key = tuple([" ".join((await page.locator(s).first.inner_text()).split()) for s in selectors])
        if self.kind == "agents":
            await self.read_as_agent(page)
            seconds = self.agent_seconds()
        else:
            words = len((await page.locator("main form").first.inner_text()).split())
            seconds = self.reading_seconds(words)
        if self.kind == "people" and self.hand == "mouse" and self.rng.random() < 0.1:
            await self.pause(seconds / 2)
            await self.tab_switch(page, context)
            await self.pause(seconds / 2)
        else:
            await self.idle(page, seconds)
        await self.obey(page)
        answer = self.answerer.answer(key)
        labels = self.args.labels
        if self.hand == "keyboard" and self.style != "screenreader" and self.rng.random() < 0.6:
            await page.keyboard.press(str(labels.index(answer) + 1))  # the answer keys
        else:
            await self.press(page, answer)

    async def tab_switch(self, page, context) -> None:
        """Another tab for a moment (seen by the page as a window blur in headless Chromium)."""
        cdp = await context.new_cdp_session(page)
        await cdp.send("Emulation.setFocusEmulationEnabled", {"enabled": False})
        other = await context.new_page()
        await other.bring_to_front()
        await self.pause(self.rng.uniform(3, 20))
        await page.bring_to_front()
        await other.close()
        await cdp.send("Emulation.setFocusEmulationEnabled", {"enabled": True})
        await cdp.detach()

    async def picture_check(self, page, base_url: str) -> None:
        """People answer what they see, with a slip now and then; a screen reader's user takes the sound and
        counts its beeps; agents find no answer in the text: the accessibility-tree agent takes the way to the
        sound, then guesses or gives up; the others guess."""
        labels = self.args.labels
        if self.style == "screenreader" or self.style == "a11y":
            await self.press(page, CANT_SEE, role="link")
            await page.locator("audio.picture-sound").wait_for()
            src = await page.locator("audio.picture-sound").get_attribute("src")
            if self.kind == "people":
                await page.request.get(base_url + src)  # played
                await self.pause(6)
                answer = labels[await asyncio.to_thread(self.hooks.beeps, self.pid) - 1]
            else:
                await self.read_as_agent(page)
                await self.pause(self.agent_seconds())
                answer = self.rng.choice(labels) if self.rng.random() < 0.6 else NEITHER
        elif self.kind == "people":
            answer = await asyncio.to_thread(self.hooks.picture_label, self.pid)
            if self.rng.random() < self.args.people_slip:
                answer = self.rng.choice([label for label in labels if label != answer])
            await self.idle(page, self.reading_seconds(6))
        else:
            await self.read_as_agent(page)
            await self.idle(page, self.agent_seconds())
            answer = self.rng.choice(labels)
        await self.obey(page)
        self.picture = answer
        await self.press(page, answer)

    # --- plain HTTP ----------------------------------------------------------------------------------------
    async def post_walk(self, base_url: str) -> None:
        await asyncio.to_thread(self.post_walk_sync, base_url)

    def post_walk_sync(self, base_url: str) -> None:
        """A program that posts the forms without running the page's script; `forged` sends a person's `sig`
        with each (copied from a real session: times of a reader, counts of a mouse, a desktop's screen)."""
        import time

        import requests

        jar: dict[str, str] = {}
        headers = {"User-Agent": DESKTOP_UA, "X-Forwarded-For": self.address()}

        def fetch(url: str, data: dict | None = None):
            """One request and its redirects, cookies kept by hand: the bench's server is plain http on this
            machine and its cookies say Secure, which a real poster's https would carry."""
            for _ in range(10):
                sent = {**headers, "Cookie": "; ".join(f"{k}={v}" for k, v in jar.items())}
                if data:
                    sent.update({"Referer": url, "Origin": base_url})  # as a browser's form post
                reply = requests.request(
                    "POST" if data else "GET", url, data=data, headers=sent, timeout=30, allow_redirects=False
                )
                jar.update({c.name: c.value for c in reply.cookies})
                if reply.status_code not in (301, 302, 303):
                    return reply
                url, data = requests.compat.urljoin(url, reply.headers["Location"]), None
            raise RuntimeError(f"{self.pid}: too many redirects")

        page = fetch(
            f"{base_url}/s/{self.args.slug}/?PROLIFIC_PID={self.pid}&STUDY_ID=S&SESSION_ID={self.pid}"
        )
        for _ in range(80):
            text = page.text
            start = text.find("<form")
            form = text[start : text.find("</form>", start)] if start >= 0 else ""
            heading = _text(re.search(r"<h1[^>]*>(.*?)</h1>", text, re.S))
            if heading.startswith(DONE):
                self.completed = True
                return
            hidden = r'<input type="hidden" name="(step|position|csrfmiddlewaretoken)" value="([^"]*)"'
            data = dict(re.findall(hidden, form))
            step = data.get("step")
            if step is None:
                raise RuntimeError(f"{self.pid}: no form on {heading!r}")
            time.sleep(self.rng.uniform(2, 6) * self.args.compression)
            if step == "consent":
                data["decision"] = "agree"
            elif step in ("items", "pairs"):
                data.update(self.post_answer(form))
            if self.style == "forged":
                data["sig"] = self.forged_sig(first=step == "consent")
            page = fetch(f"{base_url}/s/{self.args.slug}/step/", data)
        raise RuntimeError(f"{self.pid}: never finished")

    def post_answer(self, text: str) -> dict:
        names = [html.unescape(n) for n in re.findall(r'<span class="scale-label">(.*?)</span>', text)]
        values = re.findall(r'name="(value|choice)" value="([^"]+)"', text)
        if not names or len(names) != len(values):
            raise RuntimeError(f"{self.pid}: no answers on the page")
        if "svg" in text and 'class="picture"' in text:
            label = self.rng.choice(names)
            self.picture = label
        else:
            key = tuple(
                _text(re.search(rf"{attr}>(.*?)</p>", text, re.S))
                for attr in (
                    ("data-reply-a", "data-reply-b") if "data-reply-a" in text else ("data-response",)
                )
            )
            label = self.answerer.answer(key)
        name, value = values[names.index(label)]
        return {name: value}

    def forged_sig(self, *, first: bool) -> str:
        sig = {
            "t": int(self.rng.uniform(9000, 20000)),
            "fi": int(self.rng.uniform(300, 900)),
            "pm": self.rng.randint(40, 120),
            "pp": self.rng.randint(40, 120),
            "pd": 1,
            "cl": 1,
        }
        if first:
            sig["c"] = {"au": [], "fp": [], "sw": 1920, "sh": 1080, "mt": 0}
        return json.dumps(sig)


def _text(match) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", match.group(1))).split()) if match else ""
