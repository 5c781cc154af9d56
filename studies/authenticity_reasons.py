"""The authenticity score's reasons beyond behaviour counts: impossible signals, the footprints of a browser driven
through its debugging protocol, machine-made pointer paths, and what a participant answered (agreement with the
study's LLM judges, reading time against text length, timing across pages). Pure functions of what
`studies/authenticity.py` stores; each returns `(weight, text)` reasons for `score_compute`, the one place that
sums them. No reason here flags anyone alone unless it can only come from a program (docs/participants.md).
"""

from __future__ import annotations

import math
import statistics

# --- impossible signals ------------------------------------------------------------------------------------

# How much longer than the server saw may a page say it was on screen: clocks drift, a sleeping laptop.
SLACK_MS = 2000
SLACK_SHARE = 0.1
MAX_MOVES_PER_S = 500  # browsers send pointer moves once a frame (60-240 a second)
MAX_KEYS_PER_S = 40


def page_impossible(page: dict) -> str | None:
    """What makes a page's own signals impossible for a browser running signals.js, or None: counts that
    contradict its own timings, events the page never offered. `rx` is when the server received it and `sv`
    the longest the server allows it to have been on screen (both in ms; `sv` absent on the first page)."""
    t = page.get("t")
    if t is None:
        return "no time on screen"
    if "sv" in page and t > page["sv"] * (1 + SLACK_SHARE) + SLACK_MS:
        return f"{t} ms on screen, but the server served it at most {page['sv']} ms before"
    if page.get("fi", 0) > t or page.get("tm", 0) > t or page.get("hm", 0) > t + SLACK_MS:
        return "a time inside the page longer than the page itself"
    if page.get("tp", 0) > page.get("pd", 0):
        return "more touches than pointer downs"
    seconds = max(t, 1) / 1000
    if page.get("pm", 0) > MAX_MOVES_PER_S * seconds + 20 or page.get("k", 0) > MAX_KEYS_PER_S * seconds + 5:
        return "more pointer moves or key presses than a browser sends in that time"
    return None


def impossible_reason(pages: list[dict], client: dict) -> tuple[int, str] | None:
    """Signals no browser running the page's script sends (a forged `sig`): on two pages or every page."""
    found = [why for page in pages if (why := page_impossible(page))]
    if not found or (len(found) < 2 and len(found) < len(pages)):
        return None
    no_touch = client.get("mt") == 0 and any(page.get("tp", 0) for page in pages)
    extra = "; touches from a screen without touch points" if no_touch else ""
    return 60, f"impossible signals on {len(found)} of {len(pages)} pages: {found[0]}{extra}"


# --- a browser driven through its debugging protocol -------------------------------------------------------

# signals.js's hints beyond the automation flags, each a weighted reason (never the only flag: a few people's
# browsers show one of them for good reasons, see docs/participants.md).
FOOTPRINTS = {
    "getter": (40, "a browser property's getter is replaced by a script (a hidden webdriver flag)"),
    "headless": (30, "a headless browser's window (no toolbar, no taskbar, the screen the page's size)"),
    "swgl": (10, "software rendering (no graphics card) in a browser with another footprint"),
}


def footprint_reasons(client: dict) -> list[tuple[int, str]]:
    """Each footprint signals.js found, weighted; software rendering only beside another (virtual machines and
    computers whose graphics card the browser does not trust render in software too)."""
    found = set(client.get("fp", [])) & set(FOOTPRINTS)
    if found == {"swgl"}:
        return []
    return [FOOTPRINTS[hint] for hint in sorted(found)]


def text_read_reason(pages: list[dict]) -> tuple[int, str] | None:
    """The whole page's text read by a script (`rt`: document.body's innerText or textContent), which the page's
    own code never does; some reading add-ons do, so it weighs 30."""
    read = sum(1 for page in pages if page.get("rt", 0))
    if read >= 2:
        return 30, f"page text read by a script on {read} of {len(pages)} pages"
    return None


# Pointer paths: signals.js counts, per page, the moves that continue the two before them in a way a hand does
# not: the same step again (`lv`: constant velocity along a line) or a third difference of nearly zero (`sm`:
# a perfectly smooth curve), and the moves at sub-pixel positions (`sp`).
PATH_MIN_MOVES = 30
PATH_MACHINE_SHARE = 0.6


def path_reason(pages: list[dict]) -> tuple[int, str] | None:
    moved = [page for page in pages if page.get("pp", page.get("pm", 0)) >= 3]
    points = sum(page.get("pp", page.get("pm", 0)) for page in moved)
    if len(moved) < 2 or points < PATH_MIN_MOVES:
        return None
    machine = sum(page.get("lv", 0) + page.get("sm", 0) for page in moved)
    if machine / points >= PATH_MACHINE_SHARE:
        return 40, f"synthetic pointer paths: {machine} of {points} moves perfectly straight or smooth"
    return None


def typing_reason(pages: list[dict]) -> tuple[int, str] | None:
    """Text inserted with no key press at all (a program setting a field; dictation does too, so 20)."""
    typed = sum(page.get("tc", 0) for page in pages if not page.get("k", 0))
    if typed >= 10:
        return 20, f"{typed} characters entered without a key press"
    return None


# --- what they answered ------------------------------------------------------------------------------------

MIN_ANSWERS = 6
JUDGE_KAPPA = 0.7  # people agree with each other, and with the judges, at about 0.2-0.4
LENGTH_RHO = 0.3  # people take longer on longer texts (rank correlation about 0.6-0.9 on ten pages)
LENGTH_SPREAD = 0.15  # ... when the texts' lengths differ enough to tell (coefficient of variation)
SAME_TIMING_CV = 0.05  # a person's times vary by 10-40 % even on texts of one length


def cohen_kappa(first: list[int], second: list[int]) -> float | None:
    """Cohen's kappa of two raters' answers to the same items; None when chance agreement is total."""
    n = len(first)
    if n == 0:
        return None
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    categories = set(first) | set(second)
    chance = sum((first.count(c) / n) * (second.count(c) / n) for c in categories)
    return None if chance >= 1 else (observed - chance) / (1 - chance)


def spearman(xs: list[float], ys: list[float]) -> float | None:
    def ranks(values: list[float]) -> list[float]:
        order = sorted(range(len(values)), key=values.__getitem__)
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return None if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)


def answers_summary(*, timed: list[tuple[int, int]], judged: list[tuple[int, int]]) -> dict:
    """What the answer reasons read, kept with the participant when they finish: `timed` is (words on the page,
    ms from when the server served it to when the answer arrived) per answered page, `judged` (the participant's
    answer, the study's judges' answer) per item a judge rated."""
    out: dict = {}
    if len(judged) >= MIN_ANSWERS:
        kappa = cohen_kappa([a for a, _ in judged], [b for _, b in judged])
        if kappa is not None:
            out["kappa"], out["judged"] = round(kappa, 3), len(judged)
    if len(timed) >= MIN_ANSWERS:
        words, ms = [w for w, _ in timed], [m for _, m in timed]
        out["timed"] = len(timed)
        out["time_cv"] = round(statistics.pstdev(ms) / max(statistics.fmean(ms), 1), 3)
        out["words_cv"] = round(statistics.pstdev(words) / max(statistics.fmean(words), 1), 3)
        rho = spearman([float(w) for w in words], [float(m) for m in ms])
        if rho is not None:
            out["rho"] = round(rho, 3)
    return out


def answer_reasons(summary: dict) -> list[tuple[int, str]]:
    reasons = []
    if summary.get("kappa", -1) >= JUDGE_KAPPA:
        reasons.append(
            (
                40,
                f"agrees with the study's LLM judges at kappa {summary['kappa']:.2f} on {summary['judged']} "
                "items (people: about 0.2-0.4)",
            )
        )
    if "rho" in summary and summary["words_cv"] >= LENGTH_SPREAD and summary["rho"] < LENGTH_RHO:
        reasons.append(
            (30, f"reading time ignores the text's length (rank correlation {summary['rho']:.2f})")
        )
    if summary.get("timed", 0) and summary["time_cv"] < SAME_TIMING_CV:
        reasons.append(
            (30, f"the same time on every page (variation {summary['time_cv']:.2f} over {summary['timed']})")
        )
    return reasons
