"""A tiny URLconf for testing the abuse-protection decorators in isolation (the real participant views
use the same decorators; see test_participant_abuse.py)."""

from csp.decorators import csp_exempt, csp_update
from django.http import HttpResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt

from bench.targets.models import FloorWrite
from config.ratelimit import honeypot, rate_limit

STORED: list[str] = []


@rate_limit("entry")
def entry(request):
    return HttpResponse("welcome")


@rate_limit("participant")
def page(request):
    return HttpResponse("page")


@csrf_exempt
@honeypot
def form(request):
    if request.method == "POST":
        FloorWrite.objects.create()
        return HttpResponse("stored")
    return HttpResponse(
        '<html><body><form method="post" action=""><input name="answer"><button>Send</button></form></body></html>'
    )


@csp_update({"img-src": "https://images.example"})
def csp_more(request):
    return HttpResponse("more")


@csp_exempt()
def csp_none(request):
    return HttpResponse("none")


def boom(request):
    raise RuntimeError("a bug")


urlpatterns = [
    path("boom/", boom),
    path("entry/", entry),
    path("page/", page),
    path("form/", form),
    path("csp-more/", csp_more),
    path("csp-none/", csp_none),
    path("", include("config.urls")),
]
