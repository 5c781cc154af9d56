"""The pairwise kind's power panel on the quotas step and the launch page: the shared form of the rating kind's
panel (analysis.power_form), the typed smallest win rate against 50 % and tie rate giving the votes needed."""

import pytest
from django.urls import reverse

from analysis.study_power import study_power_plan
from kinds.pairwise.launch_power import shares_of
from studies.models import Study
from tests.factories import pairwise_study_build

pytestmark = pytest.mark.django_db


def test_typing_a_win_rate_recomputes_the_pairwise_plan(staff_client):
    study = pairwise_study_build(conditions=3, state=Study.State.DRAFT, completion_code="DONE123")
    quotas = reverse("admin:studies_study_setup_step", args=[study.pk, "quotas"])
    launch = reverse("admin:studies_study_state", args=[study.pk, "launch"])
    default = staff_client.get(quotas).content.decode()
    assert "Until you type your own, every condition is assumed to win 55%" in default
    assert 'name="effect-arm1" value="55, 25"' in default

    typed = {"effect-arm1": "60, 10"}
    expected = study_power_plan(study=study, shares={"arm1": shares_of(0.6, 0.1)})
    line = next(ln for ln in expected.lines if ln.condition == "arm1" and ln.power == 0.8)
    untouched = next(ln for ln in expected.lines if ln.condition == "arm2" and ln.power == 0.8)
    default_plan = study_power_plan(study=study)
    assert line.ratings_uncorrected != next(
        ln.ratings_uncorrected for ln in default_plan.lines if ln.condition == "arm1" and ln.power == 0.8
    )
    for url in (quotas, launch):
        page = staff_client.get(url, typed).content.decode()
        row = (
            f'<th scope="row">arm1</th><td>60.0 %, 10.0 %</td><td>80 %</td><td>{line.ratings_uncorrected}</td>'
            f"<td>{line.ratings_per_condition}</td><td>{line.participants_per_condition}</td>"
        )
        assert row in page
        assert (
            f'<th scope="row">arm2</th><td>55.0 %, 25.0 %</td><td>80 %</td><td>{untouched.ratings_uncorrected}</td>'
            in page
        )
        assert 'name="effect-arm1" value="60, 10"' in page and "typed on this page" in page

    # The defaults sent back as filled count as nothing typed; a bad rate is named and changes nothing.
    assert "typed on this page" not in staff_client.get(quotas, {"effect-arm1": "55, 25"}).content.decode()
    wrong = staff_client.get(quotas, {"effect-arm1": "50", "effect-arm2": "60, 100", "effect-x": "60"})
    text = wrong.content.decode()
    assert "arm1: the win rate must lie between 0 and 100 % and differ from 50 %" in text
    assert "arm2: the tie rate must be at least 0 and below 100 %" in text
    assert "x: not a condition compared with the baseline" in text and "typed on this page" not in text
