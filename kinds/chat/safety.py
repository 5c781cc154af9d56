"""The safety check every participant message and every reply passes before it is shown or sent on.

Two checks:

* **the crisis-term list** (data/crisis_terms.txt: suicide, self-harm, danger), always, here, in microseconds;
* **the provider's moderation endpoint** (OpenAI's /v1/moderations through the SDK, generation/moderation.py)
  when the study names a moderation provider (`ChatSettings.moderation_provider`). It is a network call: run the
  check outside any transaction (inside one, moderation is recorded as not run rather than holding locks while
  it waits). A moderation failure is recorded and does not stop the message: the crisis list still ran.

`safety_check(text, *, study, role)` returns the typed SafetyResult; `message_check` returns it as the JSON stored
in `Turn.safety`: {"ok": bool, "crisis": bool, "terms": [...], "moderation": {...} | null, "checks": [...]}.
`crisis` (a crisis term, or moderation flagging self-harm) is what shows the participant the support resources
(templates/ratings/chat_crisis.html); `ok` is false when anything was flagged. `crisis_terms_in(text)` is the
list alone, cheap enough to run on a streamed reply's text so far.

A participant's message: stored, then checked, then decided (`participant_message_settle`). The message and its
reply's pending row are committed first (kinds/chat/turns.py `participant_turn_store`: nothing lost if the process
dies); the check runs after, outside any transaction, so moderation really runs; its verdict is stored once (an
UPDATE on the still unchecked row) and a crisis opens the support resources on the conversation
(`Conversation.crisis_open`, counted and first stamped). Every request that would ask a model for the reply
settles the message first, so a message is never sent on unchecked, whichever request (or a later one, after a
process died mid-check) produces the reply; and while the resources are open no model is asked: the participant
chooses to go back to the conversation (`crisis_resume`) or to end it (kinds/chat/answers.py `conversation_end`
with `crisis=True`, which still leads on to the rating and the completion code).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from .models import Conversation, Turn

TERMS_FILE = Path(__file__).parent / "data" / "crisis_terms.txt"
#: Moderation categories that mean the same as a crisis term (OpenAI's names).
CRISIS_CATEGORIES = frozenset({"self-harm", "self-harm/intent", "self-harm/instructions"})
CHECK_TERMS, CHECK_MODERATION = "crisis_terms", "moderation"
# From a message: its conversation, and the study's chat settings with the moderation provider they name.
MESSAGE_WITH_SETTINGS = "conversation__participant__study__chat_settings__moderation_provider"


@dataclass(frozen=True)
class SafetyResult:
    """The verdict on one message: `terms` the crisis terms found, `moderation` the endpoint's verdict (None: not
    configured) or its error, `checks` the checks that ran."""

    crisis: bool
    flagged: bool
    terms: tuple[str, ...] = ()
    moderation: dict | None = None
    checks: tuple[str, ...] = field(default=(CHECK_TERMS,))

    @property
    def ok(self) -> bool:
        return not (self.crisis or self.flagged)

    def as_json(self) -> dict:
        return {
            "ok": self.ok,
            "crisis": self.crisis,
            "terms": list(self.terms),
            "moderation": self.moderation,
            "checks": list(self.checks),
        }


def _normal(text: str) -> str:
    return " ".join(text.lower().replace("\u2019", "'").replace("\u2018", "'").split())


@lru_cache(maxsize=1)
def _terms() -> tuple[tuple[str, re.Pattern], ...]:
    compiled = []
    for line in TERMS_FILE.read_text(encoding="utf-8").splitlines():
        term = line.strip()
        if not term or term.startswith("#"):
            continue
        stem = term.rstrip("*")
        words = [re.escape(w) for w in _normal(stem).split()]
        pattern = r"[\s\-]*".join(words) if "-" in stem else r"\s+".join(words)
        ending = r"[\w\-]*" if term.endswith("*") else r"(?!\w)"
        pattern = r"(?<![\w'])" + pattern + ending
        compiled.append((term, re.compile(pattern)))
    return tuple(compiled)


def crisis_terms_in(text: str) -> list[str]:
    """The crisis terms (as written in the list) that `text` contains."""
    normal = _normal(text)
    return [term for term, pattern in _terms() if pattern.search(normal)]


WITHHELD_TEXT = "I'm sorry, that reply could not be shown."
# A term's word, between its words (hyphenated terms' separators) and the end of a word: what `_open` compares.
_SEPARATORS = re.compile(r"[\s\-]+")


def _word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


@lru_cache(maxsize=1)
def _term_forms() -> dict[str, tuple[tuple[str, bool, re.Pattern], ...]]:
    """Each term as (its words without separators, a stem ending in `*`, its pattern), by its first letter: what a
    reply's tail is compared with while it streams."""
    forms: dict[str, list] = {}
    for term, pattern in _terms():
        words = _SEPARATORS.sub("", _normal(term.rstrip("*")))
        forms.setdefault(words[:1], []).append((words, term.endswith("*"), pattern))
    return {first: tuple(group) for first, group in forms.items()}


class ReplyScreen:
    """A model's reply checked against the crisis-term list while it streams, so that no flagged text is ever
    sent: `add(text)` takes the next tokens and returns what may be shown now. It holds back only the tail that
    could still complete a term: from the first word start whose text so far is a term's beginning (a term's
    words, whatever spaces or hyphens come between them), or a whole term whose end is not decided yet ("kill"
    before the next character says whether it is "killing"). Anything else is shown at once: a reply whose words
    begin no term is not delayed by a token. A word start is where a term may start (not after a letter, a digit
    or an apostrophe, as the list's patterns say); once the text from it can no longer become a term, it never
    can, so the screen only looks from the first start still open. Once the text holds a term the reply is
    `flagged` and nothing more is released (the turn is withheld when stored: `reply_verdict_apply`).

    With a moderation provider (`sentences=True`) text is also held until the sentence it belongs to is checked:
    `sentence_due()` says up to where the reply is to be sent to moderation (the reply so far up to its last
    sentence end), `sentence_checked(end, verdict)` records the answer; a flagged sentence withholds the reply."""

    def __init__(self, *, sentences: bool = False) -> None:
        self.text = ""
        self.released = 0  # characters of `text` released
        self.open_from = 0  # characters before it hold no start of a term
        self.sentences = sentences
        self.checked = 0  # characters of `text` moderation passed (sentences=True)
        self.verdict: dict | None = None  # the check that flagged the reply, once one did

    @property
    def flagged(self) -> bool:
        return self.verdict is not None

    def add(self, text: str) -> str:
        """The next tokens; the text that may be shown now (empty while held, and once flagged)."""
        self.text += text
        if self.flagged:
            return ""
        hold = self._hold_from()
        if self.flagged:
            return ""
        if self.sentences:
            hold = min(hold, self.checked)
        return self._release(hold)

    def rest(self) -> str:
        """The text not shown yet, once the whole reply has passed its checks."""
        return self._release(len(self.text))

    def _release(self, upto: int) -> str:
        shown = self.text[self.released : max(upto, self.released)]
        self.released = max(upto, self.released)
        return shown

    def _hold_from(self) -> int:
        text = self.text
        for start in range(self.open_from, len(text)):
            if not _word_char(text[start]) or (
                start and (_word_char(text[start - 1]) or text[start - 1] in "'\u2019")
            ):
                continue
            state = _tail_state(text[start:])
            if state == "term":
                self.verdict = SafetyResult(
                    crisis=True, flagged=False, terms=tuple(crisis_terms_in(text))
                ).as_json()
                return start
            if state == "open":
                self.open_from = start
                return start
        self.open_from = len(text)
        return len(text)

    def sentence_due(self) -> int | None:
        """Where the reply is to be checked up to now (its last sentence end not yet checked), or None."""
        if not self.sentences or self.flagged:
            return None
        ends = [m.end() for m in _SENTENCE_END.finditer(self.text, self.checked)]
        return ends[-1] if ends else None

    def sentence_checked(self, end: int, verdict: dict) -> str:
        """Moderation's verdict on the reply up to `end`; the text that may be shown now."""
        if not verdict["ok"]:
            self.verdict = verdict
            return ""
        self.checked = max(self.checked, end)
        return self.add("")


_SENTENCE_END = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*(?=\s)|\n")


def _tail_state(tail: str) -> str:
    """The text from a word start to the reply's end so far: "term" (it begins with a whole term), "open" (it
    could still become one, or its term's end is not decided yet) or "done" (it never can). Only the terms whose
    words agree with it so far are tried (a term's pattern matches only text whose letters begin with its words)."""
    normal = _normal(tail)
    bare = _SEPARATORS.sub("", normal)
    decided_end = tail != tail.rstrip()  # a space after it: the term's last word has ended
    state = "done"
    for words, stem, pattern in _term_forms().get(bare[:1], ()):
        known = min(len(words), len(bare))
        if words[:known] != bare[:known]:
            continue
        if len(bare) < len(words):
            state = "open"  # its beginning so far
            continue
        found = pattern.match(normal)
        if found:
            if stem or decided_end or found.end() < len(normal):
                return "term"
            state = "open"
    return state


def _moderation_provider(study):
    settings = getattr(study, "chat_settings", None)
    return getattr(settings, "moderation_provider", None) if settings is not None else None


def safety_check(text: str, *, study, role: str) -> SafetyResult:
    """Both checks on `text` (a participant's message or a reply, `role` says which; the verdict is the same)."""
    terms = tuple(crisis_terms_in(text))
    provider = _moderation_provider(study)
    if provider is None:
        return SafetyResult(crisis=bool(terms), flagged=False, terms=terms)
    if connection.in_atomic_block:
        verdict = {"error": "not run: the check was called inside a transaction"}
        return SafetyResult(crisis=bool(terms), flagged=False, terms=terms, moderation=verdict)
    from generation.moderation import moderate
    from generation.providers.base import ProviderError

    try:
        verdict = moderate(provider=provider, text=text).as_json()
    except ProviderError as exc:
        verdict = {"error": str(exc)[:500]}
    categories = set(verdict.get("categories", ()))
    return SafetyResult(
        crisis=bool(terms) or bool(categories & CRISIS_CATEGORIES),
        flagged=bool(verdict.get("flagged")),
        terms=terms,
        moderation=verdict,
        checks=(CHECK_TERMS, CHECK_MODERATION),
    )


def message_check(text: str, *, study, role: str) -> dict:
    """The conversation's hook: safety_check as the JSON stored in Turn.safety."""
    return safety_check(text, study=study, role=role).as_json()


def participant_message_settle(reply: Turn) -> bool:
    """The participant's message that the pending `reply` answers, checked if it was not yet (outside any
    transaction: moderation is a network call) and decided: a crisis opens the support resources. True while the
    resources are open (no model may be asked for the reply). A message two requests check at once is stored and
    counted once: the verdict is written only on the row still unchecked.

    Before a reply's first token, so it reads what it needs in one query (the message, whether the resources are
    open, and the study's settings that say whether moderation runs) and writes the verdict in one UPDATE (a
    crisis also opens the resources, in the same transaction)."""
    message = (
        Turn.objects.filter(
            conversation_id=reply.conversation_id, index=reply.index - 1, role=Turn.Role.PARTICIPANT
        )
        .select_related(MESSAGE_WITH_SETTINGS)
        .first()
    )
    if message is None:
        return Conversation.objects.filter(pk=reply.conversation_id, crisis_open=True).exists()
    if message.safety:  # checked before: its verdict and the resources were committed together
        return message.conversation.crisis_open
    verdict = message_check(message.text, study=message.conversation.participant.study, role=message.role)
    if not verdict["crisis"]:
        if Turn.objects.filter(pk=message.pk, safety={}).update(safety=verdict):
            return message.conversation.crisis_open
    else:
        # One transaction: a request checking the same message at once waits on the row and then finds it
        # checked, and by then the resources are open (it may not ask a model in between).
        with transaction.atomic():
            if Turn.objects.filter(pk=message.pk, safety={}).update(safety=verdict):
                Conversation.objects.filter(pk=reply.conversation_id).update(**crisis_open_fields())
                return True
    # Another request stored its verdict first: the resources as it left them.
    return Conversation.objects.filter(pk=reply.conversation_id, crisis_open=True).exists()


def reply_verdict_apply(fields: dict, verdict: dict) -> bool:
    """A model reply's verdict applied to the fields its row is completed with: a flagged reply is withheld (the
    participant is shown WITHHELD_TEXT in its place, the model is sent that on the next turn too) and its own
    text kept in the verdict (`withheld`) for the researchers. True when it named a crisis: the support
    resources open on the conversation as for a participant's crisis message (`crisis_open_fields`)."""
    if verdict["ok"]:
        fields["safety"] = verdict
        return False
    fields["safety"] = {**verdict, "withheld": fields["text"]}
    fields["text"] = WITHHELD_TEXT
    return bool(verdict["crisis"])


def reply_withheld(turn: Turn) -> bool:
    return "withheld" in (turn.safety or {})


def crisis_open_fields() -> dict:
    """The conversation's fields when the support resources open: open, counted, the first time stamped."""
    return {
        "crisis_open": True,
        "crisis_count": F("crisis_count") + 1,
        "crisis_shown_at": Coalesce(F("crisis_shown_at"), timezone.now()),
    }


def crisis_resume(conversation: Conversation) -> None:
    """The participant, shown the support resources, goes back to the conversation: the reply is asked for now
    (its `sent_at`, from which a person's time limit runs: the minutes spent on the resources are not counted
    against the responder, nor do they send the reply to the fallback)."""
    with transaction.atomic():
        if Conversation.objects.filter(pk=conversation.pk, crisis_open=True).update(crisis_open=False):
            Turn.objects.filter(
                conversation_id=conversation.pk, role=Turn.Role.RESPONDER, status=Turn.Status.PENDING
            ).update(sent_at=timezone.now())
