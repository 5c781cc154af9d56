"""The judge report: calibration, PPI and screening on a study in the database, its pages, exports and CLI."""

import json
import threading

import numpy as np
import pandas as pd
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from analysis import judge_ahead, judge_report, judge_screening
from analysis.stats import Scale
from tests.analysis.builders import two_emotions_rated
from tests.concurrency import race

from .builders import build_rating_study, participants_from_counts
from .judge_builders import judge_create, judge_ratings_create

SCALE = Scale(values=(1, 2, 3), labels=("Bad", "Okay", "Good"))


@pytest.fixture
def judged_study(db):
    """human and gpt4 rated by people (100 ratings each, two emotions); newmodel's 100 responses rated by the
    judge only; the judge agrees with people 80 % of the time; 3 pending and 2 failed judge rows."""
    people = two_emotions_rated()
    study = build_rating_study(
        slug="judged",
        conditions=["human", "gpt4", "newmodel", "other"],
        participants=people,
        baseline="human",
    ).study
    judge = judge_create(study)
    judge_ratings_create(
        judge, agree=0.8, screen={"newmodel": {1: 0.05, 2: 0.15, 3: 0.8}}, pending=3, failed=2, seed=1
    )
    return study, judge


def test_report_calibrates_on_rated_responses_and_screens_the_rest(judged_study):
    study, judge = judged_study
    report = judge_report.judge_report_of(study=study, judge=judge, b=200)
    c = report.calibration
    assert c is not None and c.responses == 200  # every human-rated response, none of newmodel's
    assert int(c.confusion.to_numpy().sum()) == 200
    assert 0.3 < c.judge_human.alpha.value < 0.9
    assert report.run["done"] == 300 and report.run["pending"] == 3 and report.run["failed"] == 2
    assert report.run["cost_usd"] == pytest.approx(0.03)
    # PPI: human-rated conditions have n labelled, newmodel has only judge ratings (no human-only estimate)
    shares = report.shares.set_index(["condition", "value"])
    assert shares.loc[("human", "Good"), "n_human"] == 100
    assert shares.loc[("newmodel", "Good"), "n_human"] == 0
    assert np.isnan(shares.loc[("newmodel", "Good"), "human_estimate"])
    # Screening: newmodel only (the judge did not rate `other`), with a corrected Good share below the judge's own
    screening = report.screening
    assert list(screening["condition"]) == ["newmodel"]
    line = screening.iloc[0]
    assert line["responses_judged"] == 100 and line["human_ratings"] == 0
    assert line["corrected_Good_ci_low"] <= line["corrected_Good"] <= line["corrected_Good_ci_high"]
    assert line["human_ratings_needed"] > 0 and line["ppi_ratings_needed"] <= line["human_ratings_needed"]
    tables = report.tables()
    assert set(tables) >= {"judge_agreement", "judge_confusion", "judge_ppi_shares", "judge_screening"}
    json.dumps(report.summary(), allow_nan=False)


def test_judge_that_never_met_people_is_not_calibrated(db):
    people = participants_from_counts("human", {1: 10, 2: 10, 3: 10})
    study = build_rating_study(slug="nocal", conditions=["human", "new"], participants=people).study
    judge = judge_create(study)
    report = judge_report.judge_report_of(study=study, judge=judge, b=50)
    assert report.calibration is None and report.verdict.startswith("NOT CALIBRATED")
    judge_ratings_create(judge, agree=1.0, screen={"new": {3: 1.0}})
    judge.ratings.filter(response__condition__name="human").delete()
    report = judge_report.judge_report_of(study=study, judge=judge, b=50)
    assert report.calibration is None and "none of the responses people rated" in report.verdict
    assert report.screening.iloc[0]["judge_Good"] == 1.0
    assert np.isnan(report.screening.iloc[0]["ppi_ratings_needed"])


def test_lower_median_of_samples():
    judge = pd.DataFrame({"response_id": [1, 1, 1, 2, 2, 3], "value": [3, 1, 3, 1, 2, 2]})
    out = judge_screening.judge_per_response(judge).set_index("response_id")["value"]
    assert out.to_dict() == {1: 3, 2: 1, 3: 2}


def test_corrected_shares_invert_a_known_confusion():
    # The judge says Good for every truly Good response and for half of the truly Okay ones.
    confusion = np.array([[50, 0, 0], [0, 50, 50], [0, 0, 100]])  # human × judge
    est, low, high = judge_screening.corrected_shares(np.array([0, 10, 90]), confusion, b=500, seed=0)
    # q = p · M: Okay → judge Okay/Good half and half, so q_Okay = p_Okay / 2 and q_Good = p_Good + p_Okay / 2
    assert est == pytest.approx([0, 0.2, 0.8])
    assert (low <= est + 1e-12).all() and (est <= high + 1e-12).all()
    assert est.sum() == pytest.approx(1.0)


def test_a_human_value_never_seen_in_calibration_is_taken_as_rated_correctly():
    confusion = np.array([[10, 0, 0], [0, 10, 0], [0, 0, 0]])
    est, _, _ = judge_screening.corrected_shares(np.array([0, 0, 5]), confusion, b=50, seed=0)
    assert est == pytest.approx([0, 0, 1])


@pytest.mark.parametrize("truth_good", [0.80, 0.493, 0.30])
def test_the_corrected_share_recovers_the_truth_under_expected_counts(truth_good):
    # A judge identical in every condition, 80 % correct, otherwise one of the other two values at random;
    # calibrated on the published human shares, applied to a condition with another share of Good.
    M = np.full((3, 3), 0.1) + np.eye(3) * 0.7  # P(judge = u | human = v)
    calibration_shares = np.array([0.171, 0.336, 0.493])
    confusion = 6000 * calibration_shares[:, None] * M  # expected counts
    truth = np.array([(1 - truth_good) / 3, 2 * (1 - truth_good) / 3, truth_good])
    judge_counts = 2000 * truth @ M
    est, low, high = judge_screening.corrected_shares(judge_counts, confusion, b=400, seed=1)
    assert est == pytest.approx(truth, abs=1e-9)
    assert low[-1] <= truth_good <= high[-1]


@pytest.fixture
def dispatched(monkeypatch):
    """The computes handed to the workers (the broker is the edge: what reaches it is recorded instead)."""
    calls = []
    monkeypatch.setattr(judge_ahead, "_dispatch", lambda *args: calls.append(args))
    return calls


def test_the_page_shows_the_report_computed_ahead(judged_study, analyst_client, dispatched):
    study, judge = judged_study
    url = reverse("analysis:judge_report", args=[study.slug, judge.name])
    assert Client().get(url).status_code == 302  # anonymous: to the login page
    first = analyst_client.get(url).content.decode()
    assert "Computing the report…" in first and "Screening" not in first
    analyst_client.get(url)
    assert dispatched == [(study.pk, judge.pk)]  # asked once
    status = analyst_client.get(reverse("analysis:judge_status", args=[study.slug, judge.name])).json()
    assert status == {"current": False, "computing": True, "computed_at": None}
    assert judge_ahead.judge_report_compute(study_id=study.pk, judge_id=judge.pk) is not None
    text = analyst_client.get(url).content.decode()
    assert "Up to date: computed at" in text and 'data-computing="false"' in text
    assert "newmodel" in text and "Judge–human" in text and "Human–human" in text
    # A new judge rating: the page shows the stored report as not current and asks again
    other = study.conditions.get(name="other").responses.exclude(judge_ratings__judge=judge).first()
    judge.ratings.create(response=other, status="done", value=3, rated_at=timezone.now())
    text = analyst_client.get(url).content.decode()
    assert "Computing the report on the latest data" in text and "newmodel" in text
    assert len(dispatched) == 2
    dashboard = analyst_client.get(reverse("analysis:dashboard", args=[study.slug]))
    assert url in dashboard.content.decode()


def test_downloads_are_current_and_refuse_unknown_names(judged_study, analyst_client):
    study, judge = judged_study
    csv = analyst_client.get(
        reverse("analysis:judge_table", args=[study.slug, judge.name, "judge_screening"])
    )
    assert csv.status_code == 200 and b"newmodel" in b"".join(csv.streaming_content)
    data = analyst_client.get(reverse("analysis:judge_json", args=[study.slug, judge.name])).json()
    assert data["judge"] == judge.name and data["tables"]["judge_screening"][0]["condition"] == "newmodel"
    assert data["run"]["done"] == 300
    assert (
        analyst_client.get(reverse("analysis:judge_report", args=[study.slug, "nobody"])).status_code == 404
    )
    assert (
        analyst_client.get(reverse("analysis:judge_table", args=[study.slug, judge.name, "nope"])).status_code
        == 404
    )


def test_api_endpoint(judged_study, analyst_client):
    study, judge = judged_study
    response = analyst_client.get(f"/api/studies/{study.slug}/judges/{judge.name}/report/")
    assert response.status_code == 200
    assert response.json()["run"]["done"] == 300


def test_command_writes_csv_and_json(judged_study, tmp_path, capsys):
    study, judge = judged_study
    call_command("judge_report", study.slug, judge.name, "--json")
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"].startswith("MAY")
    call_command("judge_report", study.slug, judge.name, "--out", str(tmp_path))
    assert (tmp_path / "judge_screening.csv").read_text().count("newmodel") == 1
    assert json.loads((tmp_path / "judge_report.json").read_text())["judge"] == judge.name
    text = capsys.readouterr().out
    assert "newmodel" in text


def test_command_refuses_an_unknown_judge(judged_study):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no judge"):
        call_command("judge_report", judged_study[0].slug, "nobody")


@pytest.mark.django_db(transaction=True)
def test_simultaneous_views_ask_for_one_compute(monkeypatch):
    """Six requests of a stale report at once (separate threads and database connections, the real cache): one
    compute is asked for; the others see it claimed."""
    people = participants_from_counts("human", {1: 10, 2: 20, 3: 30}) + participants_from_counts(
        "gpt4", {1: 10, 2: 20, 3: 30}
    )
    study = build_rating_study(slug="raced", conditions=["human", "gpt4"], participants=people).study
    judge = judge_create(study)
    judge_ratings_create(judge, agree=0.8)
    calls, lock = [], threading.Lock()

    def record(*args):
        with lock:
            calls.append(args)

    monkeypatch.setattr(judge_ahead, "_dispatch", record)
    results, errors = race(lambda i: judge_ahead.judge_report_state(study=study, judge=judge), 6)
    assert not errors, errors
    states = list(results.values())
    assert len(states) == 6 and all(s.computing and not s.current for s in states)
    assert calls == [(study.pk, judge.pk)]


def test_beat_asks_for_stale_reports_only(judged_study, dispatched):
    study, judge = judged_study
    assert judge_ahead.judge_reports_refresh() == 1 and dispatched == [(study.pk, judge.pk)]
    judge_ahead.judge_report_compute(study_id=study.pk, judge_id=judge.pk)  # the worker; releases the claim
    assert judge_ahead.judge_reports_refresh() == 0 and len(dispatched) == 1
