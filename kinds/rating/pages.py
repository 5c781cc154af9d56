"""The rating kind's participant pages (named by kinds/rating/kind.py): the TEQ, and the items, one at a time.

With JavaScript an item's answer is posted in the background (static/ratings/participant.js) and answered with
the next item in the same reply (`item_answer`); a participant arriving at the items gets the item page's shell
and the item (`item_in_place`), the shell the same for everyone at that item number (studies.pages.shared_page);
the consent page carries the first item ahead (`first_item_ahead`), so a participant with JavaScript makes one
request before their first answer.
"""

from __future__ import annotations

from types import SimpleNamespace

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.crypto import salted_hmac

from config.ratelimit import honeypot_add
from studies.answers import STALE
from studies.authenticity_picture import picture_context, sound_response
from studies.models import Participant, Study
from studies.pages import StepPage, shared_page
from studies.participants import participant_complete

from . import services, teq
from .forms import ItemAnswerForm, TeqForm
from .kind import ITEMS, RATING
from .selectors import (
    CurrentItem,
    assignment_current_for_participant,
    item_disguise_attention_check,
    item_payload,
    scale_buttons,
)


def _page(request, study: Study, template: str, *, participant, status: int = 200, **context) -> HttpResponse:
    context.update({"study": study, "participant": participant})
    return render(request, f"ratings/{template}", context, status=status)


def _to_step(participant: Participant) -> HttpResponse:
    return redirect("ratings:step", slug=participant.study.slug)


def _step_url(study: Study) -> str:
    return reverse("ratings:step", kwargs={"slug": study.slug})


def teq_get(
    request, participant: Participant, *, form: TeqForm | None = None, status: int = 200
) -> HttpResponse:
    return _page(
        request,
        participant.study,
        "teq.html",
        participant=participant,
        step=participant.step,
        form=form or TeqForm(),
        options=teq.OPTIONS,
        status=status,
    )


def teq_post(request, participant: Participant) -> HttpResponse:
    form = TeqForm(request.POST)
    if not form.is_valid():
        return teq_get(request, participant, form=form, status=400)
    try:
        services.teq_submit(participant=participant, answers=form.answers())
    except services.InvalidAnswers:
        return teq_get(request, participant, form=form, status=400)
    return _to_step(participant)


def item_get(request, participant: Participant) -> HttpResponse:
    current = services.item_show(participant=participant)
    if current is None:  # every item answered but not completed: cannot normally happen; finish them
        participant_complete(participant=participant)
        return _to_step(participant)
    study = participant.study
    if current.is_picture and request.GET.get("sound") == "wav":
        return sound_response(participant, study.scale)
    return _page(
        request,
        study,
        "item.html",
        participant=participant,
        step=participant.step,
        item=current,
        page=current.assignment,
        question=RATING.settings(study).scale_question,
        scale=scale_buttons(study),
        # The picture check, or with "I can't see the picture" its sound (studies/authenticity_picture.py).
        **(picture_context(request, participant, study.scale) if current.is_picture else {}),
    )


def item_post(request, participant: Participant) -> HttpResponse:
    form = ItemAnswerForm(request.POST)
    if not form.is_valid():
        return _page(request, participant.study, "bad_request.html", participant=participant, status=400)
    try:
        services.rating_submit(
            participant=participant, position=form.cleaned_data["position"], value=form.cleaned_data["value"]
        )
    except STALE:
        pass  # a stale page: nothing stored, show the current step
    except services.AnswerRejected as error:
        return _page(
            request, participant.study, "bad_request.html", participant=participant, status=error.status
        )
    return _to_step(participant)


def item_answer(request, participant: Participant) -> JsonResponse | None:
    """The item form posted in the background: the answer stored exactly as `item_post` stores it, and
    the reply is what the page needs next instead of a redirect:

    * `{"saved": true|false, "item": {...}}` — the participant's current item after this answer, to show
      in place (`saved`: this answer is stored, now or by an earlier attempt; false for a stale page —
      another tab answered first — where the stored answer stands and nothing was written);
    * None — the participant left the items (completed, or no longer active): the front replies with the
      page the step URL shows now (their completion code), shown in place;
    * `{"error": code}` with the answer's 4xx status: nothing stored (the script then posts the form the
      plain way, so the participant sees the same page as without JavaScript).

    A retried answer (same position: the connection was lost after the server stored it) is not stored
    twice; it gets the next item like the first attempt would have."""
    form = ItemAnswerForm(request.POST)
    if not form.is_valid():
        return JsonResponse({"error": "bad_request"}, status=400)
    submitted = error = None
    try:
        submitted = services.rating_submit(
            participant=participant,
            position=form.cleaned_data["position"],
            value=form.cleaned_data["value"],
            show_next=True,
        )
    except services.AnswerRejected as rejected:
        error = rejected
    return _item_reply(request, participant, submitted, error)


def _item_reply(
    request, participant: Participant, submitted: services.RatingSubmitted | None, error: Exception | None
) -> JsonResponse | None:
    """`item_answer`'s reply to an answer stored (`submitted`) or refused (`error`)."""
    if error is not None and not isinstance(error, STALE):
        return JsonResponse({"error": type(error).__name__}, status=error.status)
    # NotCurrentItem, ParticipantNotActive: a stale page, nothing stored: the current item is shown.
    study = participant.study
    if participant.status != Participant.Status.ACTIVE or participant.step != ITEMS:
        return None  # finished: the front replies with the completion page, in place
    # A new answer brings its next item along (same query, same transaction); a retried or stale one reads it.
    if submitted is not None and submitted.next_item is not None:
        current = item_disguise_attention_check(item=submitted.next_item, participant=participant)
    else:
        current = services.item_show(participant=participant)
        if current is None:
            participant_complete(participant=participant)
            return None
    if current.is_picture:  # its picture comes with its own page only
        return JsonResponse({"next": _step_url(study)})
    return JsonResponse({"saved": submitted is not None, "item": item_payload(current, title=study.title)})


def item_in_place(request: HttpRequest, participant, item: CurrentItem) -> JsonResponse:
    """The reply in place that takes `participant` to their item `item` (already shown and disguised as
    their page shows it): `{"page": the item page's shell, "url": the step page, "item": the item}`, the
    item as an answer's reply carries it (`item_payload`). The shell is the item page with the texts left out
    (`shared_page`), the same for everyone at this item number; the script shows the page, then the item."""
    return JsonResponse(_item_in_place_data(request, participant, item))


def _item_in_place_data(request: HttpRequest, participant, item: CurrentItem) -> dict:
    study = participant.study
    # Plain values: the cache key is made of their repr (a model instance's shows its relations).
    blank = SimpleNamespace(number=item.number, total=item.total, answered=item.answered)
    blank.emotion = blank.situation = blank.utterance = blank.response = ""
    shell = shared_page(
        request,
        "item.html",
        participant,
        shows=(question := RATING.settings(study).scale_question, study.scale),
        question=question,
        item=blank,
        page=SimpleNamespace(position=item.assignment.position),
        scale=scale_buttons(study),
    )
    honeypot_add(shell)
    return {
        "page": shell.content.decode(),
        "url": _step_url(study),
        "item": item_payload(item, title=study.title),
    }


def first_item_ahead(request: HttpRequest, at_items: Participant) -> dict | None:
    """What the consent page carries for the items (`StepPage.ahead`), as the instructions' reply in place would
    carry it (`item_in_place`): the item page's shell and the participant's first item (`at_items`: the
    participant as they will be on the items), for participant.js to show when the instructions are done,
    without a request; the first answer then takes the consent and the instructions with it (`begun=1`,
    ratings.flow.steps_on_the_way). Read, not marked as shown: the page says when it showed it (`shown_ms`)."""
    current = assignment_current_for_participant(participant=at_items)
    if current is None:
        return None
    item = item_disguise_attention_check(item=current, participant=at_items)
    # Whose item this is, for the tab that shows it to know it again after a refresh (participant.js).
    key = salted_hmac("ratings.first-item", f"{at_items.pk}:{current.assignment.pk}").hexdigest()[:20]
    return {**_item_in_place_data(request, at_items, item), "key": key}


def items_in_place(request: HttpRequest, participant: Participant) -> JsonResponse | None:
    """The reply in place of a participant who has just arrived at the items (`StepPage.in_place`): the item
    page's shell and their current item, marked as shown; the picture check comes with its own page only
    (`{"next": the step page}`); None when every item is answered (the page itself completes them)."""
    item = services.item_show(participant=participant)
    if item is None:
        return None
    if item.is_picture:
        return JsonResponse({"next": _step_url(participant.study)})
    return item_in_place(request, participant, item)


TEQ_PAGE = StepPage(get=teq_get, post=teq_post)
# The items: the page, its answer in the background, its lighter reply in place, and the first item carried ahead
# on the consent page (what it carried marked as shown when the first answer comes).
ITEMS_PAGE = StepPage(
    item_get, item_post, item_answer, items_in_place, first_item_ahead, services.item_mark_shown
)
