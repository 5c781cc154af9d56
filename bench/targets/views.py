"""Benchmark targets, routed only while BENCH_FLOOR_ENABLED=1 installs this app (the floor takes
unauthenticated writes; production never installs it, so both URLs are 404 there).

* `/bench/floor/` — the floor: a view that writes one row and answers, through the full middleware stack.
  `bench/participants.py` hammers it at the same concurrency as the participant flow, so the flow's
  throughput can be given as a fraction of what this server can do at all.
* `/bench/page/` — the ceiling of a participant page: everything a rating page does that is not ours to
  remove (the session read, the rate limiter, the honeypot, a CSRF token, the item template rendered),
  with a fixed item instead of any database query. No participant page can be cheaper; its throughput
  over the floor's is the best ratio the participant flow could reach on this stack.
"""

from types import SimpleNamespace

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from config.ratelimit import honeypot, rate_limit
from ratings.selectors import session_key

from .models import FloorWrite

_SCALE = [{"value": 1, "label": "Good"}, {"value": 2, "label": "Okay"}, {"value": 3, "label": "Bad"}]
_STUDY = SimpleNamespace(
    slug="bench",
    title="Benchmark page",
    trap_hidden_instruction=False,  # the item page's authenticity trap, off as in a study that leaves it off
)
_ITEM = SimpleNamespace(
    number=3,
    total=10,
    answered=2,
    emotion="lonely",
    situation="My family moved away last month and I have nobody to talk to in the evenings.",
    utterance="The house is so quiet now. I don't know what to do with myself.",
    response="That sounds really hard. I'm glad you told me; how are you holding up?",
)
_PAGE = SimpleNamespace(position=2)


@csrf_exempt  # a benchmark target with no form; it exists only while BENCH_FLOOR_ENABLED=1
@require_POST
def floor_write(request):
    row = FloorWrite.objects.create()
    return HttpResponse(str(row.pk), content_type="text/plain")


@never_cache
@require_GET
@rate_limit("participant")
@honeypot
def page_ceiling(request):
    # A participant page reads the session (from Redis) on every request: so does this one, after its
    # first visit has stored it.
    if request.session.get(session_key(_STUDY.slug)) is None:
        request.session[session_key(_STUDY.slug)] = 0
    return render(
        request,
        "ratings/item.html",
        {
            "study": _STUDY,
            "question": "How empathetic is the reply?",
            "participant": None,
            "step": "items",
            "item": _ITEM,
            "page": _PAGE,
            "scale": list(enumerate(_SCALE, start=1)),
        },
    )
