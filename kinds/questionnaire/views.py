"""The analysts' page of a questionnaire (EmotionBench) study: thin views over `kinds.questionnaire.analysis`."""

from __future__ import annotations

import io

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from analysis.permissions import analyst_required
from studies.kinds import NoQuestionnaire, questionnaire_with_instrument
from studies.models import Study

from .analysis import emotionbench_analyse
from .report import (
    emotionbench_report_write,
    emotionbench_side_by_side,
    emotionbench_situation_agreement,
)

TABLES = ("table", "groups", "situation_agreement")


def _study(slug: str) -> Study:
    study = Study.objects.filter(slug=slug).first()
    if study is None:
        raise Http404("No such study.")
    try:
        questionnaire_with_instrument(study)
    except NoQuestionnaire as exc:
        raise Http404(str(exc)) from None
    return study


def _alpha(request: HttpRequest) -> float | None:
    try:
        alpha = float(request.GET.get("alpha", ""))
    except ValueError:
        return None
    return alpha if 0 < alpha < 1 else None


@require_GET
@analyst_required
def emotionbench_dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    analysis = emotionbench_analyse(study=study, alpha=_alpha(request))
    context = {
        "study": study,
        "analysis": analysis,
        "table": emotionbench_side_by_side(analysis=analysis).to_html(
            index=False, classes="eb-table", border=0
        ),
        "agreement": emotionbench_situation_agreement(analysis=analysis).to_html(
            index=False, classes="eb-table", border=0, float_format=lambda v: f"{v:.2f}"
        ),
        "tables": TABLES,
        "alpha_query": f"?alpha={analysis.alpha}" if _alpha(request) else "",
    }
    return render(request, "analysis/emotionbench.html", context)


@require_GET
@analyst_required
def emotionbench_table_csv(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    if name not in TABLES:
        raise Http404("No such table.")
    analysis = emotionbench_analyse(study=_study(slug), alpha=_alpha(request))
    frame = {
        "table": lambda: emotionbench_side_by_side(analysis=analysis),
        "groups": analysis.frame,
        "situation_agreement": lambda: emotionbench_situation_agreement(analysis=analysis),
    }[name]()
    response = HttpResponse(frame.to_csv(index=False), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{slug}-emotionbench-{name}.csv"'
    return response


@require_GET
@analyst_required
def emotionbench_figure(request: HttpRequest, slug: str) -> HttpResponse:
    import tempfile
    from pathlib import Path

    analysis = emotionbench_analyse(study=_study(slug), alpha=_alpha(request))
    with tempfile.TemporaryDirectory() as folder:
        emotionbench_report_write(analysis=analysis, out_dir=folder)
        data = io.BytesIO((Path(folder) / "emotionbench_change.png").read_bytes())
    return HttpResponse(data.getvalue(), content_type="image/png")
