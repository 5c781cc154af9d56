"""Authenticity signals and the per-participant authenticity score: the one implementation of its rules.

Every step page's form carries a compact JSON field (`sig`, written by static/ratings/signals.js when the form is
submitted, whatever the study kind): how long the page was on screen, when the person first interacted with
it, how often the page was hidden or lost the focus, how many pointer, touch and key events it saw (counts,
never content or positions), clicks the browser itself generated versus clicks made by a script, pastes and
typing in text fields (counts and times only, never the text). The first form a page sends also carries the
browser's automation hints and its screen size (`c`). The server parses and clamps all of it (anything bad is
dropped, never an error to the participant), keeps it with the participant (`ParticipantAuthenticity`), and
recomputes the score from everything stored: a few milliseconds on the answer's request, no extra request.

The score starts at 100; each reason below takes its weight off; a participant is flagged below
`FLAG_BELOW`. No single behaviour a person may have for a good reason flags them on its own: a phone (no
hover, touch only), a keyboard alone, a screen reader (clicks the browser generates, with no pointer or key
events), JavaScript off (no signals at all: the score is None, "no signals", never a flag). The flag is for a
researcher's review and for the exclusion rule a study may declare before launch (`authenticity`); it never
rejects a submission or withholds a payment.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from . import authenticity_reasons, rows
from .authenticity_models import ParticipantAuthenticity
from .kinds.base import CONSENT
from .models import Participant, Study

SIGNALS_FIELD = "sig"  # the form field signals.js writes
TRAP_FIELD = "confirm_word"  # the hidden instruction's field (templates/ratings/_trap_instruction.html)
MAX_FIELD_CHARS = 2000  # a longer field is not ours: ignored whole
MAX_PAGES = 200  # pages kept per participant (a study has a few dozen at most)
FLAG_BELOW = 50
NO_SIGNALS = (
    "no signals: the browser sent none (JavaScript off, an old browser, or forms posted without the page)"
)
NOT_LOADED = (
    40,
    "the pages' stylesheet was never fetched: no browser showed the pages (a program posting the forms, or a "
    "text-only browser)",
)

# Each page field: (JSON key, the largest value kept). Times are milliseconds; a value above its cap is
# clamped to the cap, a negative or non-integer one dropped.
HOUR_MS = 60 * 60 * 1000
PAGE_FIELDS = {
    "t": 6 * HOUR_MS,  # on screen since the page (or the in-place item) was shown
    "fi": 6 * HOUR_MS,  # to the first pointer, touch or key event
    "pm": 100_000,  # pointer moves (mouse or pen)
    "pd": 10_000,  # pointer downs (mouse, pen or touch)
    "tp": 10_000,  # of those, touches
    "k": 100_000,  # key presses
    "cl": 10_000,  # clicks the browser generated (a pointer, a key, a screen reader's activation)
    "sc": 10_000,  # clicks dispatched by a script (element.click(), dispatchEvent)
    "bl": 10_000,  # times the window lost the focus
    "vh": 10_000,  # times the page was hidden (another tab or app)
    "hm": 6 * HOUR_MS,  # time hidden
    "ps": 10_000,  # paste events in text fields
    "pc": 1_000_000,  # characters pasted
    "tc": 1_000_000,  # characters typed
    "tm": 6 * HOUR_MS,  # from the first to the last keystroke in text fields
    "pp": 1_000_000,  # points of the pointer's path (moves and the ones coalesced into them)
    "lv": 100_000,  # pointer moves continuing a straight line at the same speed
    "sm": 100_000,  # pointer moves continuing a perfectly smooth curve
    "sp": 100_000,  # pointer moves at sub-pixel positions
    "rt": 10_000,  # times a script read the whole page's text
}
CLIENT_FIELDS = {"sw": 100_000, "sh": 100_000, "mt": 100}  # screen width, height; max touch points
AUTOMATION_HINTS = frozenset({"webdriver", "phantom", "nightmare", "selenium", "domautomation", "cdc"})
FOOTPRINT_HINTS = frozenset(authenticity_reasons.FOOTPRINTS)


def _clamped(raw: dict, fields: dict[str, int]) -> dict[str, int]:
    out = {}
    for key, cap in fields.items():
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
            continue
        out[key] = int(min(value, cap))
    return out


def signals_parse(raw: str | None) -> tuple[dict[str, int] | None, dict[str, Any] | None]:
    """(page signals, client signals) from the `sig` field; None for what is absent or malformed. Never
    raises: a participant never sees an error for what their browser reported."""
    if not raw or len(raw) > MAX_FIELD_CHARS:
        return None, None
    try:
        data = json.loads(raw)
    except ValueError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    page = _clamped(data, PAGE_FIELDS) or None
    client = data.get("c")
    if not isinstance(client, dict):
        return page, None
    hints = client.get("au")
    parsed: dict[str, Any] = _clamped(client, CLIENT_FIELDS)
    parsed["au"] = (
        sorted({h for h in hints if isinstance(h, str) and h in AUTOMATION_HINTS})
        if isinstance(hints, list)
        else []
    )
    footprints = client.get("fp")
    if isinstance(footprints, list):
        parsed["fp"] = sorted({h for h in footprints if isinstance(h, str) and h in FOOTPRINT_HINTS})
    return page, parsed


def user_agent_class(user_agent: str) -> str:
    """A coarse class of the User-Agent header (never the header itself): headless, bot, mobile, tablet,
    desktop or unknown."""
    ua = user_agent.lower()
    if "headless" in ua or "phantomjs" in ua:
        return "headless"
    if any(word in ua for word in ("bot", "crawler", "spider", "python-requests", "curl/", "httpx")):
        return "bot"
    if "ipad" in ua or "tablet" in ua:
        return "tablet"
    if "mobi" in ua or "android" in ua or "iphone" in ua:
        return "mobile"
    if "mozilla" in ua:
        return "desktop"
    return "unknown"


def trap_word(study: Study) -> str:
    """The word the study's hidden instruction asks for: the same for every page of the study, not guessable
    from another study's."""
    words = ("lantern", "harbour", "violet", "compass", "meadow", "copper", "falcon", "juniper")
    digest = hashlib.sha256(f"authenticity-trap:{study.pk}:{study.slug}".encode()).digest()
    return f"{words[digest[0] % len(words)]}{digest[1] % 90 + 10}"


# The picture check's "I can't see the picture": stored as its answer's value, which no form value can be (the item
# form takes -1,000 to 1,000) and so no scale answer either.
PICTURE_SKIPPED = -32768


def picture_answer(*, study: Study, participant_id: int, options: list[dict]) -> dict:
    """The answer (one of `options`, each `{"value", "label"}`: the kind's answers as its page shows them) the
    participant's picture check asks for: drawn per participant from the server's secret, so neither the page's
    text nor another participant's picture tells it."""
    digest = salted_hmac("authenticity-picture", f"{study.pk}:{study.seed}:{participant_id}").digest()
    return options[digest[0] % len(options)]


def picture_outcome(
    *, study: Study, participant_id: int, options: list[dict], value, skipped: bool = False
) -> str:
    """The picture check's outcome for the answer `value` (given on the picture or on its sound): passed,
    failed, or neither (`skipped`: "I can neither see the picture nor hear the sound")."""
    if skipped:
        return ParticipantAuthenticity.Picture.NEITHER
    asked = picture_answer(study=study, participant_id=participant_id, options=options)["value"]
    return (
        ParticipantAuthenticity.Picture.PASSED
        if str(value) == str(asked)
        else ParticipantAuthenticity.Picture.FAILED
    )


def traps_place(pages: list, *, study: Study, shown: list, repeat, picture, rng) -> None:
    """Adds a participant's trap pages to their `pages` (in place, at enrolment; every kind the same way): the first
    `shown` items (in the participant's order) again after all the others, unannounced (`repeat(item)` makes the
    second showing; never more than half of them: at least half the items apart), and the picture check
    (`picture()`) where the participant's generator puts it, never first (the first page is where a person learns
    the task), drawn last so the other draws stay as they were."""
    pages += [repeat(item) for item in shown[: min(study.trap_repeat_items, len(shown) // 2)]]
    if study.trap_picture:
        pages.insert(rng.randint(1, len(pages)), picture())


# --- the score -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Score:
    score: int | None  # None: no signals at all
    reasons: list[str]
    flagged: bool


def _share(pages: list[dict], test) -> tuple[int, int]:
    return sum(1 for page in pages if test(page)), len(pages)


def score_compute(
    *,
    client: dict,
    pages: dict[str, dict],
    pairs: dict[str, int] | None = None,
    picture: str = "",
    answers: dict | None = None,
    fast_page_ms: int | None = None,
    loaded: bool = True,
) -> Score:
    """The authenticity score and its reasons from what was stored (a pure function: the one rule).

    The picture check answered otherwise than the picture asked weighs 40: the strongest reason that does not flag
    alone. People fail such a check now and then (a slip of the finger; 4.1 % of Prolific participants failed the
    cognitive traps of Affonso 2026), which alone would break the goal of flagging at most 5 % of people; but any
    other reason with it flags (fast, 30; leaving the page, 30 or more), and an agent that reads the page's text
    instead of looking fails it nearly always (97 % of agents in that study).

    What the traps and the answers show counts without signals too: a participant whose browser sent none (no
    JavaScript, or a program posting the forms) is scored on the traps' outcomes and on their answers, and only
    "no signals" alone leaves the score empty. Without signals, the consent page's stylesheet never fetched
    (`loaded` False) weighs 40: a browser with JavaScript off still fetches it, a program posting the forms over
    plain HTTP does not; a text-only browser does not either, so it never flags alone (docs/participants.md)."""
    fast_page_ms = settings.AUTHENTICITY_FAST_PAGE_MS if fast_page_ms is None else fast_page_ms
    sent = [p for p in pages.values() if set(p) - {"trap"}]
    pairs = pairs or {}
    far = sum(pairs.values())
    reasons: list[tuple[int, str]] = []
    # Consistency pairs: answers far apart on half of them (of two or more), or the only one.
    if far and far * 2 >= len(pairs):
        reasons.append((30, f"inconsistent: {far} of {len(pairs)} items shown twice answered far apart"))
    if picture == ParticipantAuthenticity.Picture.FAILED:
        reasons.append((40, "picture check answered otherwise than the picture (or its sound) asked"))
    elif picture == ParticipantAuthenticity.Picture.NEITHER:
        reasons.append((20, "picture check: could neither see the picture nor hear its sound"))
    followed = sum(1 for p in pages.values() if p.get("trap"))
    if followed:
        reasons.append(
            (60, f"hidden instruction followed on {followed} page(s): it is invisible and silent to people")
        )
    reasons += authenticity_reasons.answer_reasons(answers or {})
    if not client and not sent:
        if not loaded:
            reasons.append(NOT_LOADED)
        if not reasons:
            return Score(None, [NO_SIGNALS], False)
        score = max(0, 100 - sum(weight for weight, _ in reasons))
        texts = [NO_SIGNALS, *(f"{text} (-{weight})" for weight, text in reasons)]
        return Score(score, texts, score < FLAG_BELOW)
    reasons += _behaviour_reasons(client, pages, sent, fast_page_ms)
    score = max(0, 100 - sum(weight for weight, _ in reasons))
    return Score(score, [f"{text} (-{weight})" for weight, text in reasons], score < FLAG_BELOW)


def _behaviour_reasons(
    client: dict, pages: dict[str, dict], sent: list[dict], fast_page_ms: int
) -> list[tuple[int, str]]:
    """The reasons read off the signals the browser sent (score_compute's)."""
    reasons: list[tuple[int, str]] = []
    hints = list(client.get("au", []))
    if client.get("ua") in ("headless", "bot"):
        hints.append(f"user agent {client['ua']}")
    if hints:
        reasons.append((60, f"automation: the browser reports {', '.join(sorted(hints))}"))
    reasons += authenticity_reasons.footprint_reasons(client)
    for reason in (
        authenticity_reasons.impossible_reason(sent, client),
        authenticity_reasons.text_read_reason(sent),
        authenticity_reasons.path_reason(sent),
        authenticity_reasons.typing_reason(sent),
    ):
        if reason:
            reasons.append(reason)
    # A script's clicks with no click, pointer or key of the browser's own (a keyboard shortcut that a script
    # turns into a click still has its key press).
    scripted, n = _share(
        sent, lambda p: p.get("sc", 0) > 0 and not any(p.get(key, 0) for key in ("cl", "pd", "k"))
    )
    if scripted >= 2 or (n and scripted == n):
        reasons.append(
            (60, f"scripted clicks: {scripted} of {n} pages answered by clicks a script dispatched")
        )
    no_input, n = _share(
        sent, lambda p: not any(p.get(key, 0) for key in ("cl", "sc", "pd", "k", "tc", "ps"))
    )
    if no_input >= 2 or (n and no_input == n):
        reasons.append((60, f"no input: {no_input} of {n} pages sent without any click, tap or key press"))
    timed = [p["t"] for key, p in pages.items() if "t" in p and key != CONSENT]
    if len(timed) >= 3 and statistics.median(timed) < fast_page_ms:
        reasons.append(
            (30, f"fast: median {statistics.median(timed):.0f} ms on a page (below {fast_page_ms} ms)")
        )
    away, n = _share(sent, lambda p: p.get("vh", 0) > 0 or p.get("bl", 0) > 0)
    if n >= 4 and away / n >= 0.8:
        reasons.append((50, f"left the page on {away} of {n} pages (another tab or app)"))
    elif n >= 4 and away / n >= 0.5:
        reasons.append((30, f"left the page on {away} of {n} pages (another tab or app)"))
    typed = sum(p.get("tc", 0) for p in sent)
    pasted = sum(p.get("pc", 0) for p in sent)
    if pasted >= 20 and pasted / (typed + pasted) >= 0.5:
        reasons.append((40, f"pasted text: {pasted} of {typed + pasted} characters in text fields"))
    return reasons


def pair_far(first: int, second: int, scale_values: list[int]) -> bool:
    """Whether two answers to the same item (a consistency pair) lie far apart: more than half the scale's span
    and at least two points. Good against Bad on the three-point scale; on a five-point scale three points (1
    against 4): a person asked the same thing twice moves a step, now and then two (a little against quite a
    bit), rarely from one end to the other."""
    span = max(scale_values) - min(scale_values) if scale_values else 0
    return abs(second - first) >= 2 and abs(second - first) * 2 > span


# --- recording -------------------------------------------------------------------------------------------


def _locked_row(participant: Participant) -> ParticipantAuthenticity:
    """The participant's authenticity row, locked (SELECT … FOR UPDATE) for the rest of the caller's transaction,
    created first when missing (an INSERT that yields to a concurrent one). Hand-written (studies.rows)."""
    row = rows.select(ParticipantAuthenticity, ("participant",), [participant.pk], lock=True)
    if row is None:
        row = ParticipantAuthenticity(participant_id=participant.pk)
        if not rows.insert_if_absent(row):  # a concurrent insert came first: lock that one
            row = rows.select(ParticipantAuthenticity, ("participant",), [participant.pk], lock=True)
    return row


def _row_change(
    participant: Participant, change: Callable[[ParticipantAuthenticity], list[str]]
) -> ParticipantAuthenticity:
    """Applies `change` (which returns the fields it changed) to the participant's authenticity row, locked
    (SELECT … FOR UPDATE) for the rest of the caller's transaction, recomputes the score and writes the row. A
    missing row is inserted with the change already made, in one statement; when a concurrent insert came
    first, that row is locked and changed instead. Hand-written (studies.rows): it runs inside the answer's own
    transaction (ratings.flow.signals_kept), on every answer that reports signals."""
    row = rows.select(ParticipantAuthenticity, ("participant",), [participant.pk], lock=True)
    if row is None:
        fresh = ParticipantAuthenticity(participant_id=participant.pk)
        change(fresh)
        _rescore(fresh)
        if rows.insert_if_absent(fresh):
            return fresh
        row = rows.select(ParticipantAuthenticity, ("participant",), [participant.pk], lock=True)
    changed = change(row)
    _rescore(row)
    rows.update(row, (*changed, "score", "reasons", "flagged", "excluded", "updated_at"))
    return row


def page_key(step: str, position: int | None) -> str:
    """A page's key among the participant's: its step, and its position for a step of several pages."""
    return step if position is None else f"{step}:{position}"


def signals_record(
    *,
    participant: Participant,
    step: str,
    position: int | None,
    raw: str | None,
    user_agent: str = "",
    trap_value: str | None = None,
) -> ParticipantAuthenticity | None:
    """Stores what the page's form reported (`raw`, the `sig` field; `trap_value`, the hidden instruction's
    field) with the participant and recomputes their score. A page sent again (a retry, a form with errors)
    replaces its entry. A page that reports nothing costs nothing; a participant whose browser never sent
    signals gets no row, and reads as "no signals" (JavaScript off looks the same as a program posting the forms
    without running the page's script: neither is flagged for it).

    Locking: the participant's authenticity row (created if missing, then SELECT … FOR UPDATE), so two pages
    of one participant arriving together are both kept. Called inside the answer's transaction
    (ratings.flow.signals_kept), it adds no commit and no savepoint of its own: the signals are stored with the
    answer or not at all."""
    page, client = signals_parse(raw)
    trap_answer = (trap_value or "").strip().lower()
    trapped = bool(trap_answer) and trap_answer == trap_word(participant.study)
    if page is None and client is None and not trapped:
        return None  # nothing reported (no JavaScript, or not our form): no query at all
    entry: dict[str, int] = {**(page or {}), **({"trap": 1} if trapped else {})}
    key = page_key(step, position)

    def change(row: ParticipantAuthenticity) -> list[str]:
        if page is not None:
            _served_stamp(entry, participant, row.pages, key)
        fields = ["pages"]
        if client is not None and not row.client:
            row.client = {**client, "ua": user_agent_class(user_agent)}
            fields.append("client")
        elif client is not None and any(
            not set(client.get(hints, [])) <= set(row.client.get(hints, [])) for hints in ("au", "fp")
        ):
            row.client = {
                **row.client,
                **{
                    hints: sorted({*row.client.get(hints, []), *client.get(hints, [])})
                    for hints in ("au", "fp")
                },
            }
            fields.append("client")
        if key in row.pages or len(row.pages) < MAX_PAGES:
            row.pages = {**row.pages, key: entry}
        return fields

    with transaction.atomic(savepoint=False):
        return _row_change(participant, change)


def _served_stamp(entry: dict, participant: Participant, pages: dict[str, dict], key: str) -> None:
    """Adds to a page's entry when the server received it (`rx`, ms since the participant's entry) and the
    longest it can have been on screen (`sv`): the page was served after the server received the participant's
    previous page (another page's `rx`; the entry itself for the first), whatever the page's own clock says."""
    now = int((timezone.now() - participant.started_at).total_seconds() * 1000)
    before = [p["rx"] for k, p in pages.items() if k != key and "rx" in p and p["rx"] <= now]
    entry["rx"], entry["sv"] = now, now - max(before, default=0)


def _rescore(row: ParticipantAuthenticity) -> None:
    """Recomputes the row's score from what it holds."""
    result = score_compute(
        client=row.client,
        pages=row.pages,
        pairs=row.pairs,
        picture=row.picture,
        answers=row.answers,
        loaded=row.loaded,
    )
    row.score, row.reasons, row.flagged = result.score, result.reasons, result.flagged
    row.excluded = authenticity_excluded(flagged=row.flagged, review=row.review)


def pair_record(*, participant: Participant, position: int, far: bool) -> ParticipantAuthenticity:
    """Stores the outcome of a consistency pair (its second showing at `position`: far apart or not) with the
    participant and recomputes their score; the same answer again replaces it. Locks the participant's
    authenticity row as `signals_record` does."""

    def change(row: ParticipantAuthenticity) -> list[str]:
        row.pairs = {**row.pairs, str(position): int(far)}
        return ["pairs"]

    with transaction.atomic(savepoint=False):
        return _row_change(participant, change)


def answers_record(*, participant: Participant, summary: dict) -> ParticipantAuthenticity | None:
    """Stores what the participant's answers show (`authenticity_reasons.answers_summary`, computed by their
    kind when they finish) and recomputes their score; nothing when there is nothing to judge. Locks the row as
    `signals_record` does."""
    if not summary:
        return None

    def change(row: ParticipantAuthenticity) -> list[str]:
        row.answers = summary
        return ["answers"]

    with transaction.atomic(savepoint=False):
        return _row_change(participant, change)


def picture_record(*, participant: Participant, outcome: str) -> ParticipantAuthenticity:
    """Stores the outcome of the participant's picture check (passed, failed or skipped) and recomputes their
    score. Locks the participant's authenticity row as `signals_record` does."""

    def change(row: ParticipantAuthenticity) -> list[str]:
        row.picture = outcome
        return ["picture"]

    with transaction.atomic(savepoint=False):
        return _row_change(participant, change)


def stylesheet_fetched(*, participant: Participant) -> None:
    """Notes that the participant's browser fetched the consent page's stylesheet (ratings.views.study_stylesheet)
    and rescores them: a read, and one write the first time only. Locks the row as `signals_record` does."""
    if ParticipantAuthenticity.objects.filter(participant_id=participant.pk, loaded=True).exists():
        return
    with transaction.atomic():
        _row_change(participant, lambda row: setattr(row, "loaded", True) or ["loaded"])


def authenticity_review(
    *, participant: Participant, decision: str, user, now: datetime | None = None
) -> ParticipantAuthenticity:
    """A researcher's verdict on a participant's flag (confirmed or cleared), with who and when. It changes
    no status, answer or payment; the exclusion rule reads it (a cleared flag no longer excludes)."""
    if decision not in (ParticipantAuthenticity.Review.CONFIRMED, ParticipantAuthenticity.Review.CLEARED):
        raise ValueError(f"{decision!r} is not a review decision")
    with transaction.atomic():
        row = _locked_row(participant)
        row.review, row.reviewed_by, row.reviewed_at = decision, user, now or timezone.now()
        row.excluded = authenticity_excluded(flagged=row.flagged, review=row.review)
        row.save(update_fields=["review", "reviewed_by", "reviewed_at", "excluded"])
    return row


def authenticity_excluded(*, flagged: bool | None, review: str | None) -> bool:
    """Whether the declared `authenticity` exclusion rule drops a participant: flagged and not cleared in
    review, or confirmed in review."""
    if review == ParticipantAuthenticity.Review.CONFIRMED:
        return True
    return bool(flagged) and review != ParticipantAuthenticity.Review.CLEARED
