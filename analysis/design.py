"""The frozen design every analysis output cites (studies/design.py writes it; read through studies' selector):
the design's SHA-256 and its amendments in the report, beside the written files (design.json) and on every
export (HTTP headers; a FILE.design.json beside an exported file)."""

from __future__ import annotations

import json
from pathlib import Path

from generation.selectors import placeholder_conditions
from studies.models import Study
from studies.selectors import study_design_summary

HEADER_SHA = "X-Study-Design-SHA256"
HEADER_AMENDMENTS = "X-Study-Design-Amendments"
NOT_FROZEN = "not frozen (draft)"


def design_of(study: Study) -> dict | None:
    return study_design_summary(study=study)


def dry_run_of(study: Study | None) -> list[str]:
    """The conditions whose replies are the test model's placeholders: the analysis pages and the report say that
    their figures test the pipeline, not a model."""
    return placeholder_conditions(study=study) if study is not None else []


def design_of_slug(slug: str) -> dict | None:
    study = Study.objects.filter(slug=slug).first()
    return design_of(study) if study is not None else None


def amendment_line(a: dict) -> str:
    old, new = json.dumps(a["old"], ensure_ascii=False), json.dumps(a["new"], ensure_ascii=False)
    return f"{a['at']} {a['author']}: {a['field']} {old} -> {new} ({a['reason']})"


def design_lines(design: dict | None) -> list[str]:
    """What a command prints about the design it analysed or exported."""
    if design is None:
        return [f"design: {NOT_FROZEN}"]
    return [
        f"design sha256 {design['sha256']} ({len(design['amendments'])} amendment(s))",
        *(f"  amendment: {amendment_line(a)}" for a in design["amendments"]),
    ]


def design_json_write(design: dict | None, path: Path) -> Path:
    path.write_text(
        json.dumps(design or {"sha256": None, "state": NOT_FROZEN}, indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    return path


def design_headers(response, study: Study):
    """Stamps an export's HTTP response with the design's hash and its amendments (JSON, ASCII)."""
    design = design_of(study)
    response[HEADER_SHA] = design["sha256"] if design else NOT_FROZEN
    response[HEADER_AMENDMENTS] = json.dumps(
        [amendment_line(a) for a in design["amendments"]] if design else [], ensure_ascii=True
    )
    return response
