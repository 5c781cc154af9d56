"""The toy kind's one page: wave with the left or the right hand."""

from django.http import HttpResponse
from django.shortcuts import redirect

from studies.answers import STALE
from studies.pages import StepPage

from .answers import wave_submit
from .kind import TOY_STEP


def toy_get(request, participant):
    return HttpResponse(
        f'<h1>Wave at the toy</h1><form method="post"><input type="hidden" name="step" value="{TOY_STEP}">'
        '<button name="wave" value="left">Left hand</button><button name="wave" value="right">Right</button></form>'
    )


def toy_post(request, participant):
    if request.POST.get("wave") not in ("left", "right"):
        return HttpResponse("Please wave.", status=400)
    try:
        wave_submit(participant=participant, hand=request.POST["wave"])
    except STALE:
        pass  # a stale page: nothing stored, the current step is shown
    return redirect("ratings:step", slug=participant.study.slug)


TOY_PAGE = StepPage(get=toy_get, post=toy_post)
