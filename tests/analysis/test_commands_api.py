"""The analyze command's files, the API's aggregates and its schema."""

import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from analysis import stats
from analysis.tokens import analyst_token_issue

pytestmark = pytest.mark.django_db


def test_analyze_writes_tables_figures_and_a_self_contained_report(rated_study, tmp_path, capsys):
    call_command("analyze", rated_study.slug, "--out", str(tmp_path), "--bootstrap", "300")
    names = {p.name for p in tmp_path.iterdir()}
    for name in (
        "main_tests.csv", "tests.csv", "distribution.csv", "distribution_by_emotion.csv", "exclusions.csv",
        "bootstrap_change.csv", "ordinal_model.csv", "report.html",
        "ratings_by_condition.png", "ratings_by_condition.svg", "top_share_by_emotion.png",
        "top_share_by_emotion.svg", "change_vs_baseline.png", "change_vs_baseline.svg",
    ):  # fmt: skip
        assert name in names, name
    assert (tmp_path / "ratings_by_condition.png").read_bytes().startswith(b"\x89PNG")
    html = (tmp_path / "report.html").read_text()
    assert html.count("<svg") >= 3  # figures embedded
    assert 'src="http' not in html and "<link" not in html  # nothing fetched from elsewhere
    assert "omnibus χ²" in html and "2×2 top vs rest (Yates)" in html and "gpt4 vs human" in html
    main = (tmp_path / "main_tests.csv").read_text().splitlines()
    scopes = {line.split(",")[0] for line in main[1:]}
    assert scopes == {"overall", "valence", "emotion"}
    # Which test is primary, and why: one line in the report, its Markdown and the command's output, and the
    # primary test's lines first in the main table.
    out = capsys.readouterr().out
    assert "report.html" in out and stats.PRIMARY_LINE in out
    assert html.count(stats.PRIMARY_LINE.replace("'", "&#x27;")) == 1
    assert stats.PRIMARY_LINE in (tmp_path / "report.md").read_text()
    assert main[1].split(",")[2] == stats.TEST_CLUSTERED


def test_analyze_refuses_an_unknown_study_or_baseline(rated_study, tmp_path):
    with pytest.raises(CommandError, match="no study"):
        call_command("analyze", "nope", "--out", str(tmp_path))
    with pytest.raises(CommandError, match="not a condition"):
        call_command("analyze", rated_study.slug, "--out", str(tmp_path), "--baseline", "gpt9")


def test_the_api_aggregates_are_the_analysis_summary(client, analyst, rated_study):
    token = analyst_token_issue(user=analyst)
    response = client.get(
        reverse("api:study-aggregates", args=[rated_study.slug]), HTTP_AUTHORIZATION=f"Token {token}"
    )
    assert response.status_code == 200
    data = response.json()
    assert data["baseline"] == "human"
    gpt4 = next(r for r in data["distribution"] if r["condition"] == "gpt4")
    assert gpt4["n_Good"] == 40 and gpt4["participants"] == 10
    change = next(r for r in data["change_vs_baseline"] if r["condition"] == "gpt4")
    assert change["change"] == pytest.approx(1.0)
    tests = {(t["scope"], t["test"], t["comparison"]) for t in data["tests"]}
    assert ("overall", stats.TEST_2X2, "gpt4 vs human") in tests
    json.dumps(data, allow_nan=False)  # strict JSON: no NaN leaks


def test_the_api_lists_and_describes_studies(client, analyst, rated_study):
    client.force_login(analyst)
    listed = client.get(reverse("api:study-list")).json()
    assert [s["slug"] for s in listed["results"]] == [rated_study.slug]
    detail = client.get(reverse("api:study-detail", args=[rated_study.slug])).json()
    assert [c["name"] for c in detail["conditions"]] == ["human", "gpt4"]
    assert detail["participants"] == 20


def test_the_openapi_schema_validates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    schema = (tmp_path / "schema.yaml").read_text()
    assert "/api/studies/{slug}/aggregates/" in schema
    assert "text/csv" in schema


def test_analyst_token_command_makes_a_read_only_analyst(client, rated_study, capsys):
    call_command("analyst_token", "reader", "--create")
    key = capsys.readouterr().out.strip()
    url = reverse("api:study-aggregates", args=[rated_study.slug])
    assert client.get(url, HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    assert client.post(url, {}, HTTP_AUTHORIZATION=f"Token {key}").status_code == 405
    with pytest.raises(CommandError, match="no user"):
        call_command("analyst_token", "ghost")


def test_the_api_serves_the_aggregate_tables_as_csv(client, analyst, rated_study):
    import csv
    import io

    client.force_login(analyst)
    response = client.get(
        reverse("api:study-table", args=[rated_study.slug, "distribution"]), HTTP_ACCEPT="text/csv"
    )
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["condition"], r["n_Good"]) for r in rows] == [("human", "20"), ("gpt4", "40")]
    assert client.get(reverse("api:study-table", args=[rated_study.slug, "nope"])).status_code == 404
