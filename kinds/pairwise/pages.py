"""The pairwise kind's participant page (named by kinds/pairwise/kind.py, see ratings/flow.py): one prompt with
two replies, "A is more empathetic", "B is", "about the same", and a separate "both are inadequate" box.

Exactly-once: `pair_answer_submit` locks the participant row (`studies.participants.participant_lock`, like every
answer of every kind), checks that the pair is the participant's current one, writes the answer onto its row
with a conditional UPDATE of an unanswered row, counts a failed known-answer pair as a failed attention
check, and completes the participant after the last pair, all in one transaction: the answer protocol every kind
goes through (studies/answers.py), with the pair's conditional UPDATE as the kind's answer. A re-posted page (back button, double click, second tab) stores nothing.

With JavaScript the form is posted in the background like every step form (static/ratings/participant.js,
`data-step-form`), and `ratings.views.study_step` answers with the next page in the same reply: one request per
answer, through this page's `post`. Keys 1, 2 and 3 press the three answers (`data-shortcut`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django import forms
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from kinds.pairwise.models import PairItem
from studies import authenticity
from studies.answers import STALE, AnswerRejected, InvalidValue, Page, answer_take
from studies.authenticity_picture import picture_context, sound_response
from studies.models import Participant
from studies.pages import StepPage
from studies.participants import participant_complete, participant_lock, participant_state_copy

from .kind import PAIRS, PAIRWISE
from .traps import ANSWERS, PICTURE_OPTIONS, trap_scored


@dataclass(frozen=True)
class CurrentPair:
    """A pair as the page shows it; a known-answer pair looks exactly like any other."""

    position: int
    number: int
    total: int
    emotion: str
    situation: str
    utterance: str
    reply_a: str
    reply_b: str
    is_picture: bool = False  # the picture check: a picture in place of the conversation

    @property
    def answered(self) -> int:
        return self.number - 1


class PairAnswerForm(forms.Form):
    position = forms.IntegerField(min_value=0, max_value=32767)
    choice = forms.ChoiceField(choices=PairItem.Choice.choices, required=False)
    both_inadequate = forms.BooleanField(required=False)
    # The picture check's "I can neither see the picture nor hear the sound" (name `picture`, value `skip`).
    picture = forms.ChoiceField(choices=[(PairItem.PICTURE_SKIP, "skip")], required=False)

    def clean(self) -> dict:
        """One answer: a choice, or the picture check's way out (the choice `PairItem.PICTURE_SKIP`)."""
        cleaned = super().clean()
        if cleaned.get("picture") == PairItem.PICTURE_SKIP:
            cleaned["choice"] = PairItem.PICTURE_SKIP
        elif not cleaned.get("choice") and "choice" not in self.errors:
            self.add_error("choice", "Choose an answer.")
        return cleaned


# --- reads and services ---------------------------------------------------------------------------------


def _pages_of(participant: Participant):
    return PairItem.objects.filter(participant_id=participant.pk).order_by("position")


def pair_current(*, participant: Participant) -> tuple[PairItem, CurrentPair] | None:
    """The participant's first unanswered pair with what its page shows (None: every pair answered). One query
    for the positions, one for the pair's texts."""
    pages = list(_pages_of(participant).values_list("pk", "answered_at"))
    unanswered = [index for index, (_pk, answered) in enumerate(pages) if answered is None]
    if not unanswered:
        return None
    index = unanswered[0]
    item = PairItem.objects.select_related("prompt__emotion", "left", "right", "known_answer").get(
        pk=pages[index][0]
    )
    if item.trap == PairItem.Trap.PICTURE:
        return item, CurrentPair(item.position, index + 1, len(pages), "", "", "", "", "", is_picture=True)
    if item.known_answer is not None:
        check = item.known_answer
        good, poor = check.good_reply, check.poor_reply
        a, b = (good, poor) if item.good_on_left else (poor, good)
        texts = (check.emotion_label, check.situation, check.speaker_utterance, a, b)
    else:
        prompt = item.prompt
        texts = (
            prompt.emotion.name,
            prompt.situation,
            prompt.speaker_utterance,
            item.left.text,
            item.right.text,
        )
    return item, CurrentPair(item.position, index + 1, len(pages), *texts)


def pair_show(*, participant: Participant, now: datetime | None = None) -> CurrentPair | None:
    """The participant's current pair, marked as shown (its first showing starts the answer's response time)."""
    found = pair_current(participant=participant)
    if found is None:
        return None
    item, shown = found
    if item.shown_at is None:
        PairItem.objects.filter(pk=item.pk, shown_at__isnull=True).update(shown_at=now or timezone.now())
    return shown


def pair_answer_submit(
    *,
    participant: Participant,
    position: int,
    choice: str,
    both_inadequate: bool = False,
    now: datetime | None = None,
) -> bool:
    """Stores the participant's answer to their pair at `position`, exactly once. True when stored now; False
    when that pair was already answered (a double click, a second tab: the stored answer stands).

    Refused, with nothing stored: a position the participant has no pair at (NotYourItem), a pair that is not
    the current one (NotCurrentItem), a participant not active on the pairs (ParticipantNotActive), a choice
    that is not left, right or tie (InvalidValue; on the picture check `PairItem.PICTURE_SKIP` too). A known-answer
    pair is failed by any choice but its good reply; the last answer completes the participant. The response time
    runs from the pair's first showing. A consistency pair's second showing and the picture check are scored for
    authenticity after the answer's statements (`authenticity.pair_record`, `picture_record`).

    Locking: the participant's row, for the whole check-then-write; the UPDATE names the unanswered row."""
    if choice not in (*PairItem.Choice.values, PairItem.PICTURE_SKIP):
        raise InvalidValue(f"{choice!r} is not one of {PairItem.Choice.values}.")
    now = now or timezone.now()
    scored: dict = {}
    with transaction.atomic():
        locked = participant_lock(participant)
        rows = list(
            _pages_of(locked).values_list(
                "pk", "position", "answered_at", "shown_at", "known_answer", "good_on_left", "trap"
            )
        )
        pages = [
            Page(position, PAIRS, answered is not None, check is not None)
            for _pk, position, answered, _s, check, _g, _t in rows
        ]

        def store(page: Page) -> bool:
            pk, _position, _answered, shown_at, check_id, good_on_left, trap = next(
                r for r in rows if r[1] == page.position
            )
            if choice == PairItem.PICTURE_SKIP and trap != PairItem.Trap.PICTURE:
                raise InvalidValue("Only the picture check can be answered without a choice.")
            elapsed = int((now - shown_at).total_seconds() * 1000) if shown_at is not None else None
            PairItem.objects.filter(pk=pk, answered_at__isnull=True).update(
                choice=choice,
                both_inadequate=both_inadequate,
                response_time_ms=max(0, elapsed) if elapsed is not None else None,
                answered_at=now,
                shown_at=Coalesce(F("shown_at"), now),
            )
            if trap:
                scored.update(trap_scored(locked, pk, trap, choice))
            good = PairItem.Choice.LEFT if good_on_left else PairItem.Choice.RIGHT
            return check_id is not None and choice != good

        taken = answer_take(locked, pages=pages, position=position, now=now, store=store)
    if taken.created:
        participant_state_copy(participant, locked)
    if "far" in scored:  # after the answer's statements, in the signals' transaction if any
        authenticity.pair_record(participant=participant, position=position, far=scored["far"])
    if "picture" in scored:
        authenticity.picture_record(participant=participant, outcome=scored["picture"])
    return taken.created


# --- the page ---------------------------------------------------------------------------------------------


def _to_step(participant: Participant) -> HttpResponse:
    return redirect("ratings:step", slug=participant.study.slug)


def pair_get(request: HttpRequest, participant: Participant, *, status: int = 200) -> HttpResponse:
    shown = pair_show(participant=participant)
    if shown is None:  # every pair answered but not completed: cannot normally happen; finish them
        participant_complete(participant=participant)
        return _to_step(participant)
    if shown.is_picture and request.GET.get("sound") == "wav":
        return sound_response(participant, PICTURE_OPTIONS)
    study = participant.study
    context = {
        # The picture check, or with "I can't see the picture" its sound (studies/authenticity_picture.py).
        **(picture_context(request, participant, PICTURE_OPTIONS) if shown.is_picture else {}),
        "study": study,
        "participant": participant,
        "step": participant.step,
        "pair": shown,
        "question": PAIRWISE.settings(study).question,
        "answers": ANSWERS,
    }
    return render(request, "ratings/pair.html", context, status=status)


def pair_post(request: HttpRequest, participant: Participant) -> HttpResponse:
    form = PairAnswerForm(request.POST)
    if not form.is_valid():
        return render(
            request,
            "ratings/bad_request.html",
            {"study": participant.study, "participant": participant},
            status=400,
        )
    try:
        pair_answer_submit(
            participant=participant,
            position=form.cleaned_data["position"],
            choice=form.cleaned_data["choice"],
            both_inadequate=form.cleaned_data["both_inadequate"],
        )
    except STALE:
        pass  # a stale page: nothing stored, show the current step
    except AnswerRejected as error:
        return render(
            request,
            "ratings/bad_request.html",
            {"study": participant.study, "participant": participant},
            status=error.status,
        )
    return _to_step(participant)


PAIRS_PAGE = StepPage(get=pair_get, post=pair_post)
