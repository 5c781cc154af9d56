"""The chat kind's analysis entry (`StudyKind.analysis`): the study's rated conversations
(kinds/chat/exports.py `chat_frame`, completed participants only, one conversation each) analysed by source ×
label (kinds/chat/stats.py), and its outputs: `cells.csv` (each cell's mean and interval per outcome),
`contrasts.csv` (source, label and interaction tests), `counts.csv`, `pets_by_cell.png`/`.svg`, `report.html` and
`design.json`. The same result serves `manage.py analyze <slug> --out DIR` (`report_write`) and the analysts' page
(kinds/chat/views.py, through `result`).

The reference source is the study's baseline condition (else its first), the reference label "none" when the
design shows no label to some, else its first label. The planned analysis (`CHAT_PLAN`, frozen at launch) names the
source × label interaction on the PETS total as primary.
"""

from __future__ import annotations

from pathlib import Path

from django.db.models import Count, Q, Sum
from django.template.loader import render_to_string

from analysis.design import design_json_write, design_lines, design_of
from analysis.services import AnalysisError, AnalysisOptions
from studies.models import Condition, Study
from studies.selectors import study_planned_analysis

from .assignment import study_labels
from .exports import chat_frame, scale_labels
from .figures import figure_alt, figure_svg, pets_by_cell
from .judge_analysis import judge_calibrations
from .models import Conversation
from .pets_analysis import reliability
from .stats import ChatStats, ChatStatsError, chat_stats


def sources_of(study: Study) -> list[str]:
    """The study's conditions (the sources), the baseline first."""
    return list(
        Condition.objects.filter(study=study)
        .order_by("-is_baseline", "position", "name")
        .values_list("name", flat=True)
    )


def labels_of(study: Study) -> list[str]:
    """The labels shown, the reference ("none" when shown to some) first."""
    labels = study_labels(study)
    return sorted(labels, key=lambda label: label != "none")


def chat_result(study: Study) -> ChatStats:
    """The source × label analysis of the study's rated conversations; AnalysisError when there are none, or a
    cell is too small to estimate."""
    frame = chat_frame(study)
    if frame.empty:
        raise AnalysisError(f"study {study.slug!r} has no rated conversation of a completed participant yet")
    scale = [label for _, label in sorted(scale_labels(study).items(), reverse=True)]
    try:
        result = chat_stats(frame, sources=sources_of(study), labels=labels_of(study), scale=scale)
    except ChatStatsError as exc:
        raise AnalysisError(f"too little data: {exc}") from None
    result.reliability = reliability(frame)
    return result


def safety_counts(study: Study) -> dict:
    """What the safety path and the spending limits did to the study's conversations (previews left out): how
    many showed the support resources, the messages that did, how many were ended from them, and how many the
    platform closed early because the budget was spent or a participant's token cap reached."""
    conversations = Conversation.objects.filter(participant__study=study, participant__is_preview=False)
    counts = conversations.aggregate(
        resources_shown=Count("pk", filter=Q(crisis_count__gt=0)),
        crisis_messages=Sum("crisis_count", default=0),
        ended_crisis=Count("pk", filter=Q(state=Conversation.State.ENDED_CRISIS)),
        closed_budget=Count("pk", filter=Q(closed_by=Conversation.ClosedBy.BUDGET)),
        closed_token_cap=Count("pk", filter=Q(closed_by=Conversation.ClosedBy.TOKEN_CAP)),
    )
    return counts


def report_context(study: Study, result: ChatStats) -> dict:
    planned = study_planned_analysis(study=study)
    contrasts = result.contrasts.copy()
    primary_key = planned["primary_test"]["key"] if planned.get("primary_test") else "interaction"
    return {
        "study": study,
        "result": result,
        "headline": result.headline,
        "primary_test": planned.get("primary_test"),
        "primary": contrasts[(contrasts["outcome"] == "pets") & (contrasts["test"] == primary_key)].to_dict(
            "records"
        ),
        "too_little": result.too_little,
        "cells": result.cells.round(2).to_dict("records"),
        "contrasts": contrasts.round(4).to_dict("records"),
        "counts": result.counts.reset_index().to_dict("records"),
        "labels": result.labels,
        "figure": figure_svg(result),
        "figure_alt": figure_alt(result),
        "reliability": result.reliability,
        "design": design_lines(design_of(study)),
        "judges": judge_calibrations(study),
    }


class ChatAnalysisEntry:
    """PETS and the study's scale by source × label."""

    def analyze(self, study: Study, options: AnalysisOptions):
        raise AnalysisError(
            f"study {study.slug!r} is a chat study: its analysis is at /analysis/{study.slug}/chat/"
        )

    def result(self, study: Study, options: AnalysisOptions | None = None) -> ChatStats:
        return chat_result(study)

    def report_write(self, study: Study, options: AnalysisOptions, out_dir: Path) -> list[str]:
        out_dir.mkdir(parents=True, exist_ok=True)
        result = chat_result(study)
        result.cells.to_csv(out_dir / "cells.csv", index=False)
        result.contrasts.to_csv(out_dir / "contrasts.csv", index=False)
        result.counts.to_csv(out_dir / "counts.csv")
        for fmt in ("png", "svg"):
            (out_dir / f"pets_by_cell.{fmt}").write_bytes(pets_by_cell(result, fmt))
        (out_dir / "report.html").write_text(
            render_to_string("analysis/chat_report.html", report_context(study, result)), encoding="utf-8"
        )
        design_json_write(design_of(study), out_dir / "design.json")
        lines = [result.headline, f"{result.conversations} rated conversations"]
        lines += [f"Too little data: {w}" for w in result.too_little]
        return lines


CHAT_ANALYSIS = ChatAnalysisEntry()
