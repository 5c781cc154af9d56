"""The participant flow: thin doors into `studies.participants` and the kinds' step pages.

URLs (see ratings/urls.py):

* `/s/<slug>/` — the entry. Reads the recruiting platform's parameters, enrolls or resumes the participant,
  puts them in the Django session and redirects to the step page. Nothing in any later URL names a
  participant: the server-side session does, so refresh, back button and a second tab all land on the
  participant's current step, and nobody can reach another participant's items by editing a URL or form.
* `/s/<slug>/step/` — always the participant's current step (see `ratings.flow` for how steps dispatch).
  Every POST redirects back here (POST-redirect-GET); a POST from a page that is no longer current
  stores nothing and redirects to the current step. A POST asking for JSON (`Accept: application/json`:
  participant.js posts the step forms and the answers in the background) gets no redirect but one JSON
  reply instead, so each answer is one request: what the step's page answers (`StepPage.answer`: the
  rating kind's next item), the page of the participant's new step rendered into the reply (`_in_place`), or
  `{"next": url}` where the browser goes instead. Same checks, same services, same exactly-once rules: only the reply differs.
* `/s/<slug>/start/` — studies whose platform enrolls without an id (the direct link) only: a POST that enrolls a generated id.
* `/s/<slug>/return/` — stop and return: a confirmation page, then the slot and items are given back.

Study states: newcomers are only taken while the study is live. A participant who already started may
finish while the study is paused or closed — they were promised the task and the payment, and the
researcher can still exclude them; only new arrivals are turned away.
"""

from __future__ import annotations

import secrets
from urllib.parse import quote

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from config.ratelimit import honeypot, honeypot_add, rate_limit
from studies.authenticity import stylesheet_fetched
from studies.kinds import kind_of
from studies.models import Participant, Study
from studies.pages import StepPage
from studies.participants import (
    AlreadyInFamily,
    InvalidExternalId,
    ParticipantCannotRestart,
    StudyFull,
    StudyNotOpen,
    participant_advance,
    participant_enroll,
    participant_return,
    participant_touch,
)
from studies.platforms import platform_of

from . import entry_guard, flow, tickets
from .forms import ConsentForm, EntryForm
from .selectors import (
    participant_get_for_request,
    session_key,
    study_get_by_slug,
)
from .shared_pages import consent_page, instructions_page


def home(request):
    return render(request, "ratings/home.html")


# --- helpers ------------------------------------------------------------------------------------------


def _page(
    request, study: Study, template: str, *, participant=None, status: int = 200, **context
) -> HttpResponse:
    platform = platform_of(participant if participant is not None else study)
    context.update(
        {"study": study, "participant": participant, "platform": platform, "welcome": _welcome(study)}
    )
    return render(request, f"ratings/{template}", context, status=status)


def _welcome(study: Study) -> str:
    """What the study asks of a participant, in one sentence of its kind's (the welcome and platform preview
    pages)."""
    return kind_of(study).setup_texts.welcome.format(n=study.items_per_participant)


def _to_step(study: Study) -> HttpResponse:
    return redirect("ratings:step", slug=study.slug)


def _wants_json(request: HttpRequest) -> bool:
    """A background POST from the item page's script (it asks for JSON; a plain form post never does)."""
    return request.method == "POST" and "application/json" in request.headers.get("Accept", "")


def _go(url: str) -> JsonResponse:
    """The JSON reply sending the in-place page elsewhere (a normal navigation)."""
    return JsonResponse({"next": url})


def _step_url(slug: str) -> str:
    return reverse("ratings:step", kwargs={"slug": slug})


def _remember(request: HttpRequest, study: Study, participant: Participant) -> None:
    """This browser is `participant` now: their ticket (ratings/tickets.py) names them. The session goes on
    naming them only where it named someone here (a browser that enrolled before tickets)."""
    tickets.remember(request, slug=study.slug, participant_id=participant.pk)
    session, key = request.session, session_key(study.slug)
    named = session.get(key)
    if named is not None:
        if named != participant.pk and session.session_key is not None:
            session.cycle_key()  # a new key at enrollment: a planted one is worth nothing
        session[key] = participant.pk


def _enrollment_failed(request, study: Study, error: Exception) -> HttpResponse:
    if isinstance(error, ParticipantCannotRestart):
        _remember(request, study, error.participant)
        return _outcome_page(request, error.participant)
    if isinstance(error, AlreadyInFamily):
        return _page(request, study, "already_in_family.html", status=200)
    if isinstance(error, StudyFull):
        return _page(request, study, "study_full.html", status=200)
    if isinstance(error, StudyNotOpen):
        return _page(request, study, "study_not_open.html", status=200)
    return _page(request, study, "bad_link.html", status=400)


def _redirect_url(study: Study, code: str) -> str:
    """The study's completion redirect with {code} filled in, only when it is an http(s) address."""
    url = study.completion_redirect_url.strip()
    if not url.lower().startswith(("https://", "http://")):
        return ""
    return url.replace("{code}", quote(code, safe=""))


def _outcome_page(request, participant: Participant) -> HttpResponse:
    """The page of a participant who is no longer active."""
    study = participant.study
    status = participant.status
    if status in (Participant.Status.COMPLETED, Participant.Status.EXCLUDED):
        code = participant.completion_code
        completion = platform_of(participant).completion(participant, code, _redirect_url(study, code))
        return _page(request, study, "done.html", participant=participant, code=code, completion=completion)
    if status == Participant.Status.SCREENED_OUT:
        code = participant.completion_code
        return _page(
            request,
            study,
            "screened_out.html",
            participant=participant,
            code=code,
            redirect_url=_redirect_url(study, code) if code else "",
        )
    if status == Participant.Status.RETURNED:
        return _page(request, study, "returned.html", participant=participant)
    return _page(request, study, "timed_out.html", participant=participant)


# --- entry --------------------------------------------------------------------------------------------


@never_cache
@require_GET
@rate_limit("entry")
@honeypot
def study_entry(request: HttpRequest, slug: str) -> HttpResponse:
    """Enrolls or resumes the participant the link names, and shows their current step."""
    study = study_get_by_slug(slug)
    if study is None:
        raise Http404("No such study.")
    form = EntryForm(request.GET)
    if not form.is_valid():
        return _page(request, study, "bad_link.html", status=400)

    if form.wants_staff_preview and request.user.is_authenticated and request.user.is_staff:
        external_id = f"preview:{request.user.pk}:{secrets.token_hex(6)}"
        try:
            participant = participant_enroll(study=study, external_id=external_id, is_preview=True)
        except StudyFull as error:
            return _enrollment_failed(request, study, error)
        _remember(request, study, participant)
        return _to_step(study)

    previewing = form.platform_preview
    if previewing is not None:
        # The platform shows the task before a person accepts it (MTurk): describe it, write nothing.
        return _page(request, study, "platform_preview.html", preview_notice=previewing.preview_notice)

    fields = form.enrollment_fields()
    current = participant_get_for_request(request, study.slug)
    if fields is None:
        if current is not None:
            return _to_step(study)
        if platform_of(study).enrolls_without_id:
            template = "start.html" if study.state == Study.State.LIVE else "study_not_open.html"
            return _page(request, study, template)
        return _page(request, study, "missing_id.html")
    if current is not None and current.external_id == fields["external_id"]:
        return _to_step(study)
    refusal = entry_guard.entry_refusal(request, study, fields)
    if refusal is not None:
        return refusal
    try:
        participant = participant_enroll(study=study, **fields)
    except (AlreadyInFamily, StudyFull, StudyNotOpen, ParticipantCannotRestart, InvalidExternalId) as error:
        return _enrollment_failed(request, study, error)
    _remember(request, study, participant)
    # Their current step right away (consent, for a newcomer), not a redirect to it: one request fewer.
    return _current_page(request, participant_touch(participant=participant))


@never_cache
@require_POST
@rate_limit("entry")
@honeypot
def study_start(request: HttpRequest, slug: str) -> HttpResponse:
    """Direct-link studies only: enrolls a generated id (a POST, so link previews and crawlers enroll
    nobody)."""
    study = get_object_or_404(Study, slug=slug)
    if not platform_of(study).enrolls_without_id:
        return _page(request, study, "missing_id.html", status=400)
    if participant_get_for_request(request, study.slug) is not None:
        return _to_step(study)
    refusal = entry_guard.limited_enrollment(request, study)
    if refusal is not None:
        return refusal
    try:
        participant = participant_enroll(study=study, external_id=f"direct-{secrets.token_hex(10)}")
    except (StudyFull, StudyNotOpen) as error:
        return _enrollment_failed(request, study, error)
    _remember(request, study, participant)
    return _to_step(study)


# --- the current step -------------------------------------------------------------------------------


@never_cache
@require_http_methods(["GET", "POST"])
@rate_limit("participant")
@honeypot
def study_step(request: HttpRequest, slug: str) -> HttpResponse:
    """Shows (GET) or answers (POST) the participant's current step. A form posted in the background
    (`Accept: application/json`, static/ratings/participant.js) is stored exactly as the plain post is; only the
    reply differs (`step_in_place`)."""
    in_place = _wants_json(request)
    participant = participant_get_for_request(request, slug)
    if participant is None:
        study = get_object_or_404(Study, slug=slug)
        if in_place:
            return _go(reverse("ratings:entry", kwargs={"slug": study.slug}))
        return redirect("ratings:entry", slug=study.slug)
    study = participant.study
    participant = participant_touch(participant=participant)
    if in_place:
        return step_in_place(request, participant)
    if request.method == "POST":
        flow.steps_on_the_way(request, participant)
        if participant.status != Participant.Status.ACTIVE or request.POST.get("step") != participant.step:
            return _to_step(study)  # a page from an earlier step (back button, second tab): nothing stored
        with flow.signals_kept(request, participant):
            return flow.page_of(participant).post(request, participant)
    return _current_page(request, participant)


def step_in_place(request: HttpRequest, participant: Participant) -> JsonResponse:
    """A step's form posted in the background by the session's participant (already touched): stored by the
    step's page exactly as the plain post stores it, the reply in place (`_in_place`); from a page that is no
    longer current, nothing stored and `{"next": the step page}`."""
    flow.steps_on_the_way(request, participant)
    handler = flow.page_of(participant) if participant.status == Participant.Status.ACTIVE else None
    if handler is None or request.POST.get("step") != participant.step:
        return _go(_step_url(participant.study.slug))  # nothing stored: the step page says where they are
    with flow.signals_kept(request, participant):
        if handler.answer is not None:
            reply = handler.answer(request, participant)
            return reply if reply is not None else page_in_place(request, participant)
        return _in_place(request, participant, handler.post(request, participant))


def _current_page(request: HttpRequest, participant: Participant) -> HttpResponse:
    """The page of the participant's current step (their outcome once they are no longer active)."""
    if participant.status != Participant.Status.ACTIVE:
        return _outcome_page(request, participant)
    return flow.page_of(participant).get(request, participant)


def page_in_place(request: HttpRequest, participant: Participant) -> JsonResponse:
    """The in-place reply of a participant whose step has just changed: the page of their new step (their
    outcome page once they left, e.g. completed), as `_in_place` sends it."""
    return _in_place(request, participant, _to_step(participant.study))


def _in_place(request: HttpRequest, participant: Participant, response: HttpResponse) -> JsonResponse:
    """A step's form posted in the background (participant.js): where the plain post redirects to the step
    page, the reply carries that page, rendered for the participant's new step, to be shown in place:
    `{"page": html, "url": the step page}` with the page's status (a form with errors is a 400 page). A
    redirect elsewhere becomes `{"next": url}`. The services ran as for the plain post and updated
    `participant`."""
    step_url = _step_url(participant.study.slug)
    for _ in range(3):  # a page's GET may itself redirect to the step page (all items answered: completed)
        if not 300 <= response.status_code < 400:
            break
        if response["Location"] != step_url:
            return _go(response["Location"])
        if participant.status == Participant.Status.ACTIVE:
            lighter = flow.page_of(participant).in_place  # e.g. the rating kind's item page's shell and item
            reply = lighter(request, participant) if lighter is not None else None
            if reply is not None:
                return reply
        response = _current_page(request, participant)
    else:
        return _go(step_url)
    honeypot_add(response)
    return JsonResponse({"page": response.content.decode(), "url": step_url}, status=response.status_code)


@never_cache
@require_http_methods(["GET", "POST"])
@rate_limit("participant")
@honeypot
def study_stylesheet(request: HttpRequest, slug: str) -> HttpResponse:
    """The consent page's second stylesheet (empty): fetching it tells the authenticity score that a browser
    showed the page (studies/authenticity.py `stylesheet_fetched`; with JavaScript off too). Never cached, so a
    second participant in the same browser fetches it again."""
    participant = participant_get_for_request(request, slug)
    if participant is not None:
        stylesheet_fetched(participant=participant)
    response = HttpResponse(b"", content_type="text/css")
    response["Cache-Control"] = "no-store"
    return response


def study_return(request: HttpRequest, slug: str) -> HttpResponse:
    """Stop and return: asks for confirmation, then gives the slot and the unanswered items back."""
    study = get_object_or_404(Study, slug=slug)
    participant = participant_get_for_request(request, study.slug)
    if participant is None:
        return redirect("ratings:entry", slug=study.slug)
    if request.method == "POST":
        participant_return(participant=participant)
        return _to_step(study)
    if participant.status != Participant.Status.ACTIVE:
        return _to_step(study)
    return _page(request, study, "return_confirm.html", participant=participant)


# --- consent and instructions (every kind) -------------------------------------------------


def consent_post(request, participant: Participant) -> HttpResponse:
    form = ConsentForm(request.POST)
    if not form.is_valid():
        return _page(request, participant.study, "bad_request.html", participant=participant, status=400)
    if form.cleaned_data["decision"] == "agree":
        flow.consent_accept(participant=participant)
    else:
        flow.consent_decline(participant=participant)
    return _to_step(participant.study)


def instructions_post(request, participant: Participant) -> HttpResponse:
    participant_advance(participant=participant, from_step=Participant.Step.INSTRUCTIONS)
    return _to_step(participant.study)


# The spine's pages (studies/kinds/base.py SPINE_STEPS, registered by ratings/apps.py): every kind's consent and
# instructions.
CONSENT_PAGE = StepPage(get=consent_page, post=consent_post)
INSTRUCTIONS_PAGE = StepPage(get=instructions_page, post=instructions_post)
