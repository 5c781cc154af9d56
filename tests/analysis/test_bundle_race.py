"""A bundle made while participants keep answering (PostgreSQL): its data files, results and documents come from
one state of the study (analysis/bundle.py reads them in one REPEATABLE READ snapshot)."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection

from analysis.bundle import bundle_write
from kinds.rating.models import Rating
from studies.demo.seed import demo_seed
from studies.models import Participant, Study

from .bundle_builders import ratings_fill

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_bundle_made_while_participants_answer_holds_one_state(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    demo_seed(base_url="http://testserver")
    study = Study.objects.get(slug="demo")
    ratings_fill(study, participants=2)
    stop, failures = threading.Event(), []

    def answer() -> None:  # new raters, one rating committed at a time, until the bundles are made
        try:
            while not stop.is_set():
                ratings_fill(Study.objects.get(pk=study.pk), participants=1)
        except Exception as exc:  # noqa: BLE001 — reported by the test
            failures.append(exc)
        finally:
            connection.close()

    writer = threading.Thread(target=answer)
    writer.start()
    try:
        for i in range(3):
            root = tmp_path / f"bundle-{i}"
            bundle_write(study, root)
            answers = next((root / "data").glob("*answers*")).read_text().splitlines()
            results = json.loads((root / "results/headline.json").read_text())
            assert results["ratings"] == len(answers) - 1
            assert sum(row["ratings"] for row in results["distribution"]) == results["ratings_analysed"]
    finally:
        stop.set()
        writer.join()
    assert failures == []
    raters = Participant.objects.filter(study=study).count()
    assert raters > 3 and Rating.objects.filter(assignment__participant__study=study).count() > 33
