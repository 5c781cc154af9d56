"""The analysts' page of a chat study (the kind's `analysis_page`) and its report: thin views over the kind's
analysis entry (kinds/chat/analysis.py). The page says the result in a sentence, warns when a source × label cell
holds too few conversations, names the pre-registered primary test, and shows the figure, the cell means and the
tests, with the conversation and transcript exports."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from analysis.contents import with_contents
from analysis.permissions import analyst_required
from analysis.services import AnalysisError, analysis_entry
from studies.models import Study

from .analysis import ChatAnalysisEntry, report_context, safety_counts


def _study(slug: str) -> Study:
    study = Study.objects.filter(slug=slug).first()
    if study is None or not isinstance(analysis_entry(study=study), ChatAnalysisEntry):
        raise Http404("No chat analysis for this study.")
    return study


def _context(study: Study) -> dict:
    """The page's and the report's context; {"problem": why} when there is nothing to analyse yet. What the
    safety path and the spending limits did (`safety`) is there either way."""
    try:
        context = report_context(study, analysis_entry(study=study).result(study))
    except AnalysisError as exc:
        context = {"study": study, "problem": str(exc)}
    return {**context, "safety": safety_counts(study)}


@require_GET
@analyst_required
def chat_page(request: HttpRequest, slug: str) -> HttpResponse:
    return with_contents(render(request, "analysis/chat.html", _context(_study(slug))))


@require_GET
@analyst_required
def chat_report(request: HttpRequest, slug: str) -> HttpResponse:
    context = _context(_study(slug))
    if "problem" in context:
        raise Http404(context["problem"])
    return render(request, "analysis/chat_report.html", context)
