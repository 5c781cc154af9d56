"""The analysis page for people: the headline first, figures readable on a phone with a text alternative, the
change table in the plot's units, and report.html offered to analysts."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from analysis import snapshots
from analysis.html_tables import number_text
from analysis.permissions import ANALYSTS_GROUP
from analysis.services import AnalysisOptions, study_analyze
from kinds.rating import figures
from kinds.rating import report as reports
from tests.a11y import axe_violations
from tests.analysis.builders import build_rating_study, participants_from_counts, two_conditions_rated
from tests.browser_login import sign_in
from tests.screenshots import screenshot

SVG_TAG = re.compile(r"<svg[^>]*>")


def _attr(tag: str, name: str) -> str:
    return re.search(rf'\b{name}="([^"]*)"', tag)[1]


@pytest.mark.django_db
def test_every_figure_is_drawn_at_one_pixel_a_point_with_no_text_under_eleven(rated_study):
    analysis = study_analyze(study=rated_study, options=AnalysisOptions())
    for name in figures.FIGURES:
        svg = figures.figure_inline(analysis, name)
        tag = SVG_TAG.search(svg)[0]
        view_width = float(_attr(tag, "viewBox").split()[2])
        assert abs(float(_attr(tag, "width")) - view_width) <= 1, tag  # 1 px per point
        assert _attr(tag, "role") == "img" and _attr(tag, "aria-labelledby") == f"figure-{name}-caption"
        # matplotlib draws each text as glyph paths scaled by its size in points / 100
        sizes = [100 * float(s) for s in re.findall(r"scale\(([0-9.]+) -\1\)", svg)]
        assert sizes and min(sizes) >= 11, (name, min(sizes))
        assert figures.figure_alt(analysis, name)


@pytest.mark.django_db
def test_a_change_against_a_baseline_with_no_top_answer_says_it_is_not_defined():
    """The baseline's people never said Good: the relative change is not a number, and the figure's text says
    why instead of printing nan (the figure writes the same words on the row: looked at in a screenshot)."""
    people = participants_from_counts("human", {1: 10, 2: 10}) + participants_from_counts(
        "gpt4", {2: 10, 3: 10}
    )
    study = build_rating_study(slug="no-top", conditions=["human", "gpt4"], participants=people).study
    analysis = study_analyze(study=study, options=AnalysisOptions())
    alt = figures.figure_alt(analysis, "change_vs_baseline")
    assert "nan" not in alt and "gpt4 (overall) not defined: no Good among the ratings of human" in alt
    assert "nan" not in figures.figure_alts(analysis)["change_vs_baseline"]


@pytest.mark.django_db
def test_the_page_puts_the_headline_first_and_the_change_table_in_percent(analyst_client, rated_study):
    snapshots.snapshot_compute(study_id=rated_study.pk, baseline=None, no_exclusions=False)
    page = analyst_client.get(f"/analysis/{rated_study.slug}/").content.decode()
    headline = page.index('<h2 id="headline"')
    assert headline < page.index("Frozen design") if "Frozen design" in page else True
    assert headline < page.index('<h2 id="downloads"') < page.index('<h2 id="distribution"')
    analysis = study_analyze(study=rated_study, options=AnalysisOptions())
    change = analysis.bootstrap_change.iloc[0]["change"]
    assert f"{100 * change:+.1f} % relative" in page  # the headline's relative change, in percent
    # the change table says what the figure's axis says: percent (39.3, not 0.3931)
    table = page[page.index('aria-label="Change against the baseline"') :]
    table = table[: table.index("</table>")]
    assert "change (%)" in table and f"<td>{number_text(round(100 * change, 1))}</td>" in table
    assert f"<td>{number_text(change)}</td>" not in table
    for name in figures.FIGURES:
        assert f'<figcaption id="figure-{name}-caption">' in page


@pytest.mark.django_db
def test_analysts_download_report_html_and_nobody_else_does(analyst_client, rated_study, django_user_model):
    snapshots.snapshot_compute(study_id=rated_study.pk, baseline=None, no_exclusions=False)
    url = f"/analysis/{rated_study.slug}/report.html"
    response = analyst_client.get(url)
    assert response.status_code == 200
    named = f'attachment; filename="{rated_study.slug}-report-declared-exclusions.html"'
    assert response["Content-Disposition"] == named
    unfiltered = analyst_client.get(url, {"exclusions": "none"})["Content-Disposition"]
    assert unfiltered.endswith('-report-no-exclusions.html"')
    analysis = study_analyze(study=rated_study, options=AnalysisOptions())
    assert response.content.decode() == reports.report_html(analysis)  # what `analyze` writes
    assert (
        'href="/analysis/rated/report.html"'
        in analyst_client.get(f"/analysis/{rated_study.slug}/").content.decode()
    )
    assert Client().get(url).status_code == 302  # to the sign-in page
    outsider = django_user_model.objects.create_user(username="outsider", password="outsider-pass-123")
    other = Client()
    other.force_login(outsider)
    assert other.get(url).status_code == 403


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_on_a_phone_the_figures_keep_a_readable_size_and_at_1280_the_tests_fit(
    live_server, page_at, django_user_model
):
    people = two_conditions_rated()
    study = build_rating_study(slug="phone-study", conditions=["human", "gpt4"], participants=people).study
    snapshots.snapshot_compute(study_id=study.pk, baseline=None, no_exclusions=False)
    user = django_user_model.objects.create_user(username="analyst", password="analyst-pass-123")
    user.groups.add(Group.objects.get_or_create(name=ANALYSTS_GROUP)[0])
    for viewport in ("small-phone", "phone", "desktop"):
        page = page_at(viewport)
        sign_in(
            page,
            live_server.url,
            "analyst",
            "analyst-pass-123",
            next_path=f"/analysis/{study.slug}/",
            login_path="/analysis/login/",
        )
        shown = page.evaluate(
            """() => [...document.querySelectorAll('figure svg')].map(svg => ({
                 width: svg.getBoundingClientRect().width, viewBox: svg.viewBox.baseVal.width,
                 caption: document.getElementById(svg.getAttribute('aria-labelledby')).textContent.trim()}))"""
        )
        assert len(shown) == len(figures.FIGURES)
        for figure in shown:  # not shrunk: its 11-point texts are 11 px high
            assert figure["width"] >= figure["viewBox"] - 1 and figure["caption"], figure
        assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
        for name in figures.FIGURES:
            page.locator(f"#figure-{name}-caption").scroll_into_view_if_needed()
            screenshot(page, f"analysis-{viewport}-{name}", full_page=False)
        if viewport == "desktop":
            edges = page.evaluate(
                """() => { const box = document.querySelector("[aria-label='Main tests']");
                   const th = [...box.querySelectorAll('th')].find(h => h.textContent.startsWith('Significant'));
                   return [th.getBoundingClientRect().right, box.getBoundingClientRect().right]; }"""
            )
            assert edges[0] <= edges[1], edges
        if viewport != "small-phone":
            assert axe_violations(page) == []


@pytest.mark.django_db
def test_the_dashboard_and_the_report_open_with_a_table_of_contents(analyst_client, rated_study):
    snapshots.snapshot_compute(study_id=rated_study.pk, baseline=None, no_exclusions=False)
    for url in (f"/analysis/{rated_study.slug}/", f"/analysis/{rated_study.slug}/report.html"):
        page = analyst_client.get(url).content.decode()
        nav = page.split('<nav class="toc" aria-label="Contents">', 1)[1].split("</nav>", 1)[0]
        targets = re.findall(r'href="#([^"]+)"', nav)
        assert {"headline", "exclusions", "main"} <= set(targets), url
        assert all(f'id="{target}"' in page for target in targets) and len(targets) == len(set(targets))
        assert page.index("</h1>") < page.index('<nav class="toc"')
