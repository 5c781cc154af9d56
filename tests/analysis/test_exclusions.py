"""Declared exclusion rules, differential exclusion and the sensitivity line: the published study keeps the paper's
figures under its declared rules; a rule that removes raters from one condition only is flagged, an even one not;
nothing is removed silently."""

import csv
import io
import re
from collections import Counter

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse
from scipy.stats import chi2_contingency, fisher_exact

from analysis import exclusions, snapshots
from analysis.exclusions import ExclusionRules, exclusion_rate_test
from analysis.services import AnalysisOptions, study_analyze
from studies.exclusion_rules import default_exclusion_rules, seed_study_exclusion_rules
from studies.models import Study
from tests.studies.helpers import DATASET

from .builders import Rated, build_rating_study, participants_from_counts

pytestmark = pytest.mark.django_db

CONDITIONS = ["human", "chatgpt", "chatgpt_empathy"]


def _published_good_shares() -> dict[str, float]:
    """Each condition's share of Good (3) in the published file, counted here without the application."""
    with open(DATASET, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return {c: sum(r[f"rating_{c}"] == "3" for r in rows) / len(rows) for c in CONDITIONS}


def _analyze(slug, out, *flags) -> str:
    stdout = io.StringIO()
    call_command("analyze", slug, "--out", str(out), "--bootstrap", "200", *flags, stdout=stdout)
    return stdout.getvalue()


def _read_csv(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def published(db):
    call_command("import_ratings", "published", DATASET, stdout=io.StringIO(), stderr=io.StringIO())
    return Study.objects.get(slug="published")


def test_the_published_study_keeps_the_papers_figures_under_its_declared_rules(published, tmp_path):
    assert published.exclusion_rules == seed_study_exclusion_rules()
    output = _analyze("published", tmp_path)

    shares = _published_good_shares()
    assert shares["human"] == pytest.approx(0.493, abs=5e-4)  # the paper: 49.3 % Good
    assert shares["chatgpt"] == pytest.approx(0.634, abs=5e-4)  # 63.4 %
    assert shares["chatgpt_empathy"] == pytest.approx(0.648, abs=6e-4)  # 64.8 % (0.6475)
    distribution = {r["condition"]: r for r in _read_csv(tmp_path / "distribution.csv")}
    for condition, share in shares.items():
        assert float(distribution[condition]["pct_Good"]) == pytest.approx(100 * share)
        assert distribution[condition]["participants"] == "200"

    # Exclusions per condition and their test, in the CSV, the terminal and both reports.
    table = {r["rule"]: r for r in _read_csv(tmp_path / "exclusions.csv")}
    assert [table["before exclusions"][f"participants_{c}"] for c in CONDITIONS] == ["200"] * 3
    assert table["attention_checks"]["definition"].startswith("participants flagged")
    assert table["straight_lining"]["note"] == table["too_fast"]["note"] == "rule off"
    assert table["incomplete"]["note"] == "rule off"  # the seed study did not declare it
    assert table["any rule"]["note"] == "no participant excluded"
    assert table["before exclusions"]["differs"] == "" and table["attention_checks"]["test"] == ""
    assert [table["after exclusions"][f"participants_{c}"] for c in CONDITIONS] == ["200"] * 3
    assert "Exclusion rules (declared by the study):" in output
    assert "any rule: 0 participants, 0 ratings (human 0, chatgpt 0, chatgpt_empathy 0)" in output

    # The sensitivity line: the headline with and without exclusions -- the same here, nothing was removed.
    sensitivity = {r["condition"]: r for r in _read_csv(tmp_path / "sensitivity.csv")}
    for condition, share in shares.items():
        assert float(sensitivity[condition]["pct_Good_without"]) == pytest.approx(100 * share)
        assert float(sensitivity[condition]["pct_Good_with"]) == pytest.approx(100 * share)
    change = float(sensitivity["chatgpt_empathy"]["change_with"])
    assert change == pytest.approx(shares["chatgpt_empathy"] / shares["human"] - 1)  # the paper's +31 %
    assert round(100 * change) == 31
    assert (
        "Without exclusions: human 49.3 % Good; chatgpt 63.4 % Good (+14.1 points, +28.6 % vs human)"
        in output
    )
    assert "With the exclusions: human 49.3 % Good;" in output
    assert "same conclusion with and without the exclusions" in output

    html = (tmp_path / "report.html").read_text()
    markdown = (tmp_path / "report.md").read_text()
    for text in (html, markdown):
        assert "Without exclusions: human 49.3 % Good" in text
        assert "Warning" not in text  # nobody was excluded, so no exclusion can be differential
    assert "<th>chatgpt_empathy</th>" in html and "| participants_chatgpt_empathy |" in markdown


def test_the_old_straight_lining_rule_is_flagged_as_differential_on_the_published_study(published, tmp_path):
    output = _analyze(
        "published", tmp_path, "--straight-lining-min-items", "10", "--straight-lining-identical-alone"
    )
    table = {r["rule"]: r for r in _read_csv(tmp_path / "exclusions.csv")}
    line = table["straight_lining"]
    assert [int(line[f"participants_{c}"]) for c in CONDITIONS] == [1, 19, 13]
    expected = chi2_contingency(np.array([[1, 199], [19, 181], [13, 187]]), correction=False)
    assert line["test"] == "chi-square"
    assert float(line["chi2"]) == pytest.approx(expected.statistic) == pytest.approx(16.2, abs=0.05)
    assert float(line["p"]) == pytest.approx(expected.pvalue)
    assert line["differs"] == "true"
    assert (
        "WARNING: Exclusion rates differ between conditions for straight_lining (human 1/200, chatgpt 19/200"
        in output
    )
    html = (tmp_path / "report.html").read_text()
    assert "Rules overridden for this analysis" in html
    assert "<strong>Warning:</strong> Exclusion rates differ between conditions for straight_lining" in html
    assert "> **Warning.** Exclusion rates differ" in (tmp_path / "report.md").read_text()
    # The sensitivity line shows what the rule does to the headline.
    sensitivity = {r["condition"]: r for r in _read_csv(tmp_path / "sensitivity.csv")}
    assert float(sensitivity["chatgpt"]["pct_Good_with"]) == pytest.approx(59.6, abs=0.05)
    assert float(sensitivity["chatgpt_empathy"]["pct_Good_with"]) == pytest.approx(62.3, abs=0.05)
    assert float(sensitivity["human"]["pct_Good_with"]) == pytest.approx(49.05, abs=0.01)
    # The default three-point rule needs corroboration (a wrong attention check or a fast median time); the
    # published data have neither, so it removes no one.
    _analyze("published", tmp_path / "b", "--straight-lining-min-items", "10")
    table = {r["rule"]: r for r in _read_csv(tmp_path / "b" / "exclusions.csv")}
    assert table["straight_lining"]["participants"] == "0"


def _flagged(condition: str, n: int, *, flagged_every: int) -> list[Rated]:
    people = participants_from_counts(condition, {1: 10 * n // 3, 2: 10 * n // 3, 3: 10 * n - 20 * n // 3})
    for i, person in enumerate(people):
        person.flagged = flagged_every > 0 and i % flagged_every == 0
    return people


def test_a_rule_that_removes_raters_from_one_condition_only_raises_the_warning(analyst_client):
    people = _flagged("human", 30, flagged_every=0) + _flagged("gpt4", 30, flagged_every=3)  # 0/30 vs 10/30
    study = build_rating_study(slug="uneven", conditions=["human", "gpt4"], participants=people).study
    result = study_analyze(study=study, options=AnalysisOptions(bootstrap_samples=50))
    line = result.exclusions.set_index("rule").loc["attention_checks"]
    assert (line["participants_human"], line["participants_gpt4"]) == (0, 10)
    assert line["test"] == "chi-square" and line["p"] < result.alpha and line["differs"]
    assert len(result.warnings) == 1  # the rule only: "any rule" is the same participants here
    assert "attention_checks (human 0/30, gpt4 10/30" in result.warnings[0]

    page = _dashboard(analyst_client, study)
    assert (
        'class="warning"' in page and "Exclusion rates differ between conditions for attention_checks" in page
    )
    assert "Headline with and without exclusions" in page
    csv_body = b"".join(
        analyst_client.get(reverse("analysis:table", args=[study.slug, "exclusions"])).streaming_content
    ).decode()
    row = {r["rule"]: r for r in csv.DictReader(io.StringIO(csv_body))}["attention_checks"]
    assert (row["participants_gpt4"], row["differs"]) == ("10", "true")


def test_a_rule_that_removes_raters_evenly_raises_no_warning(analyst_client):
    people = _flagged("human", 30, flagged_every=3) + _flagged("gpt4", 30, flagged_every=3)  # 10/30 each
    study = build_rating_study(slug="even", conditions=["human", "gpt4"], participants=people).study
    result = study_analyze(study=study, options=AnalysisOptions(bootstrap_samples=50))
    line = result.exclusions.set_index("rule").loc["attention_checks"]
    assert (line["participants_human"], line["participants_gpt4"]) == (10, 10)
    assert line["p"] == pytest.approx(1.0) and not line["differs"]
    assert result.warnings == []
    page = _dashboard(analyst_client, study)
    assert 'class="warning"' not in page and "<th>gpt4</th>" in page and "<td>no</td>" in page


def test_small_counts_use_fishers_exact_test_or_its_monte_carlo_version():
    two = exclusion_rate_test([3, 0], [10, 10], seed=1)
    assert two.test == exclusions.TEST_FISHER
    assert two.p == pytest.approx(fisher_exact([[3, 7], [0, 10]]).pvalue)
    three = exclusion_rate_test([4, 0, 0], [10, 10, 10], seed=1)
    assert three.test == exclusions.TEST_FISHER_MC
    again = exclusion_rate_test([4, 0, 0], [10, 10, 10], seed=1)
    assert three.p == again.p  # seeded: the same data give the same p
    exact = fisher_exact(np.array([[4, 6], [0, 10], [0, 10]])).pvalue  # scipy's exact r×c p
    assert three.p == pytest.approx(exact, abs=0.01)
    assert exclusion_rate_test([0, 0], [10, 10], seed=1).note == "no participant excluded"
    # A table SciPy answers with a one-element array (seen while participants were still answering).
    tiny = exclusion_rate_test([1, 0, 0], [2, 1, 1], seed=2024)
    assert tiny.test == exclusions.TEST_FISHER_MC and tiny.p == pytest.approx(1.0)
    assert exclusion_rate_test([10, 10], [10, 10], seed=1).note == "every participant excluded"


def test_incomplete_participants_are_excluded_by_default_in_a_new_study(tmp_path):
    people = participants_from_counts("human", {1: 20, 2: 20, 3: 20}) + participants_from_counts(
        "gpt4", {1: 20, 2: 20, 3: 20}
    )
    people += [
        Rated("gpt4", [("sad", 3, 4000)] * 4, status="returned"),
        Rated("gpt4", [("sad", 3, 4000)] * 3, status="timed_out"),
        Rated("human", [("sad", 1, 4000)] * 5, status="active"),  # abandoned halfway
    ]
    study = build_rating_study(slug="dropouts", conditions=["human", "gpt4"], participants=people).study
    assert Study().exclusion_rules == default_exclusion_rules() == study.exclusion_rules
    result = study_analyze(study=study, options=AnalysisOptions(bootstrap_samples=50))
    line = result.exclusions.set_index("rule").loc["incomplete"]
    assert (line["participants"], line["ratings"]) == (3, 12)
    assert (line["participants_human"], line["participants_gpt4"]) == (1, 2)
    assert line["test"] == exclusions.TEST_FISHER  # expected counts below 5
    assert result.n_rows == 120
    sensitivity = result.sensitivity.set_index("condition")
    assert sensitivity.loc["gpt4", "pct_Good_with"] == pytest.approx(100 / 3)
    assert sensitivity.loc["gpt4", "pct_Good_without"] == pytest.approx(100 * 27 / 67)


def test_when_the_rules_remove_every_rating_the_dashboard_and_command_say_which_rule(
    analyst_client, tmp_path
):
    people = [Rated(c, [("sad", v, 300) for v in (1, 2, 3)] * 3) for c in ("human", "gpt4") for _ in range(4)]
    declared = {**default_exclusion_rules(), "too_fast": {"min_median_ms": 1500}}
    study = build_rating_study(
        slug="fast", conditions=["human", "gpt4"], participants=people, exclusion_rules=declared
    ).study
    page = _dashboard(analyst_client, study)
    assert "No ratings to analyse yet" not in page
    assert "The exclusion rules removed every one of the 72 ratings" in page
    assert "too_fast removed 8 participants (72 ratings)" in page
    output = _analyze("fast", tmp_path)
    assert "too_fast removed 8 participants (72 ratings)" in output
    assert "0 of 72 ratings analysed" in output
    assert "With the exclusions: no ratings are left." in output
    assert "No comparison with human can be tested with the exclusions." in output
    # Without exclusions the same data are analysed.
    assert "72 of 72 ratings analysed" in _analyze("fast", tmp_path / "all", "--no-exclusions")


def test_most_ratings_removed_is_said_too():
    people = [Rated("human", [("sad", v, 300) for v in (1, 2, 3)] * 3) for _ in range(3)]
    people += [Rated("human", [("sad", v, 4000) for v in (1, 2, 3)] * 3)]
    declared = {**default_exclusion_rules(), "too_fast": {"min_median_ms": 1500}}
    study = build_rating_study(
        slug="most", conditions=["human"], participants=people, exclusion_rules=declared
    ).study
    result = study_analyze(study=study, options=AnalysisOptions(bootstrap_samples=20))
    assert result.n_rows == 9
    assert any("removed 27 of 36 ratings (75 %)" in note for note in result.notes)


def test_the_declaration_is_validated_against_the_scale():
    study = Study(slug="v", title="v")
    study.exclusion_rules = {"attention_checks": True, "straight_lining": {"min_items": 8}}
    study.full_clean(exclude=["slug"])
    assert study.exclusion_rules == {
        "attention_checks": True,
        "incomplete": True,
        "too_fast": None,
        "straight_lining": {"min_items": 8, "corroborating_median_ms": 3000, "identical_alone": False},
        "authenticity": False,
    }
    for bad, message in [
        (
            {"straight_lining": {"min_items": 10, "identical_alone": True}},
            "at least 5 points (this one has 3)",
        ),
        ({"speed": True}, "unknown rule(s) ['speed']"),
        ({"too_fast": {"min_median_ms": -1}}, "too_fast.min_median_ms must be a number above 0"),
        ({"incomplete": "yes"}, "incomplete must be true or false"),
        ([], "must be a JSON object"),
    ]:
        study.exclusion_rules = bad
        with pytest.raises(ValidationError) as caught:
            study.full_clean(exclude=["slug"])
        assert message in str(caught.value.message_dict["exclusion_rules"]), bad
    study.scale = [{"value": v, "label": str(v)} for v in range(1, 8)]  # a 7-point scale
    study.exclusion_rules = {"straight_lining": {"min_items": 10, "identical_alone": True}}
    study.full_clean(exclude=["slug"])
    assert ExclusionRules.from_declared(study.exclusion_rules).straight_lining_identical_alone


def _change_form_data(response) -> dict:
    """The admin change form's current values, as the browser would post them back (a setting edited as a form
    posts one value per input)."""
    forms = [response.context["adminform"].form]
    for inline in response.context["inline_admin_formsets"]:
        forms += [inline.formset.management_form, *inline.formset.forms]
    data = {}
    for form in forms:
        for name in form.fields:
            value, key = form[name].value(), form.add_prefix(name)
            widget = form.fields[name].widget
            pairs = zip(widget.widgets_names, value, strict=True) if hasattr(widget, "widgets_names") else []
            for sub_key, sub in [(key + suffix, sub) for suffix, sub in pairs] or [(key, value)]:
                if sub is True:
                    data[sub_key] = "on"
                elif sub is not None and sub is not False:
                    data[sub_key] = list(sub) if isinstance(sub, list | tuple) else sub
    return data


def test_the_admin_edits_the_rules_before_launch_and_shows_them_read_only_after(staff_client):
    study = build_rating_study(slug="adm", conditions=["human", "gpt4"], participants=[]).study
    study.state = Study.State.DRAFT
    study.save(update_fields=["state"])
    url = reverse("admin:studies_study_change", args=[study.pk])
    data = _change_form_data(staff_client.get(url))
    # Switches and thresholds (studies/admin_forms.py): straight-lining on identical answers alone.
    data.update(exclusion_rules_4="on", exclusion_rules_5="10", exclusion_rules_7="on")
    refused = staff_client.post(url, data)
    assert refused.status_code == 400 and "at least 5 points (this one has 3)" in refused.content.decode()
    data.pop("exclusion_rules_7"), data.pop("exclusion_rules_4"), data.pop("exclusion_rules_1", None)
    data.update(exclusion_rules_2="on", exclusion_rules_3="2000")
    assert staff_client.post(url, data).status_code == 302
    study.refresh_from_db()
    assert (
        study.exclusion_rules["too_fast"] == {"min_median_ms": 2000}
        and study.exclusion_rules["incomplete"] is False
    )
    study.state = Study.State.LIVE
    study.save(update_fields=["state"])
    page = staff_client.get(url)
    assert page.context["adminform"].form.fields["exclusion_rules"].disabled  # still shown, as switches
    assert re.search(r'<input[^>]*name="exclusion_rules_2"[^>]*\bdisabled\b[^>]*>', page.content.decode())
    data = _change_form_data(page)
    data.pop("exclusion_rules_2")  # a switch turned off by hand is ignored
    staff_client.post(url, data)
    study.refresh_from_db()
    assert study.exclusion_rules["too_fast"] == {"min_median_ms": 2000}


def test_the_export_flags_follow_the_declared_rules_by_default(analyst_client):
    people = [
        Rated("human", [("sad", 2, 4000)] * 3, status="returned"),
        Rated("human", [("sad", 2, 4000)] * 3),
    ]
    study = build_rating_study(slug="exp", conditions=["human"], participants=people).study
    body = b"".join(
        analyst_client.get(reverse("analysis:export", args=[study.slug, "ratings"])).streaming_content
    )
    rows = list(csv.DictReader(io.StringIO(body.decode())))
    assert Counter((r["participant_status"], r["excluded_incomplete"]) for r in rows) == {
        ("returned", "true"): 3,
        ("completed", "false"): 3,
    }


def _dashboard(client, study) -> str:
    """The dashboard as an analyst sees it once the analysis computed ahead is in."""
    snapshots.snapshot_compute(study_id=study.pk, baseline=None, no_exclusions=False)
    return client.get(reverse("analysis:dashboard", args=[study.slug])).content.decode()
