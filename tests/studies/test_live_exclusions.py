"""The declared exclusion rules while a study runs: the live status page and the participant list flag each
participant as the analysis will (one computation), and count their ratings alike (attention checks apart)."""

import re

import pytest
from django.urls import reverse

from analysis import exclusions
from kinds.rating.frame import rating_rows_frame
from kinds.rating.models import Rating
from studies.models import Assignment, AttentionCheck, Participant, ParticipantAuthenticity, Study
from tests.factories import ConditionFactory, ParticipantFactory, PromptFactory, ResponseFactory, StudyFactory

pytestmark = pytest.mark.django_db


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def answered(person: Participant, responses, *, ms: int, check: AttentionCheck | None = None) -> None:
    for position, response in enumerate(responses):
        page = Assignment.objects.create(participant=person, position=position, response=response)
        Rating.objects.create(assignment=page, value=1 + position % 3, response_time_ms=ms)
    if check is not None:  # an answered attention-check page: a check, not a rating
        page = Assignment.objects.create(
            participant=person, position=len(responses), kind=Assignment.Kind.ATTENTION, attention_check=check
        )
        Rating.objects.create(assignment=page, value=check.expected_value, response_time_ms=ms)


def test_live_status_and_the_participant_list_flag_whom_the_declared_rules_exclude(staff_client):
    study = StudyFactory(
        slug="flags",
        state=Study.State.LIVE,
        exclusion_rules={"attention_checks": True, "incomplete": True, "too_fast": {"min_median_ms": 2000}},
    )
    human = ConditionFactory(study=study, name="human", is_baseline=True)
    responses = [ResponseFactory(prompt=PromptFactory(study=study), condition=human) for _ in range(3)]
    check = AttentionCheck.objects.create(study=study, expected_value=2, after_item=1)
    done = Participant.Status.COMPLETED
    fast = ParticipantFactory(study=study, condition=human, status=done, external_id="speedy")
    slow = ParticipantFactory(study=study, condition=human, status=done, external_id="careful")
    odd = ParticipantFactory(study=study, condition=human, status=done, external_id="unusual")
    answered(fast, responses, ms=400, check=check)
    answered(slow, responses, ms=5000, check=check)
    answered(odd, responses, ms=5000)
    ParticipantAuthenticity.objects.create(participant=odd, score=90, flagged=True, excluded=True)

    status = text_of(
        staff_client.get(reverse("admin:studies_study_status", args=[study.pk])).content.decode()
    )
    declared = status[status.index("Under the declared exclusion rules") :]
    assert "speedy human Completed 3 too fast" in declared
    assert "unusual human Completed 3 kept flagged" in declared
    assert "careful" not in declared
    # Ratings: 9 answers to response pages; the two answered attention-check pages are not counted.
    assert "ratings (attention checks not counted)" in status.lower()

    listing = staff_client.get(
        reverse("admin:studies_participant_changelist") + f"?study__id__exact={study.pk}"
    )
    rows = {
        name: text_of(row)
        for row in listing.content.decode().split("<tr")[1:]
        for name in ("speedy", "careful", "unusual")
        if f">{name}<" in row
    }
    assert "too fast" in rows["speedy"] and " 3 " in rows["speedy"]  # 3 ratings, its check not counted
    assert "kept" in rows["careful"] and " 3 " in rows["careful"]
    assert "kept" in rows["unusual"] and 'alt="True"' in listing.content.decode().split(">unusual<")[1]

    # The same participants as the analysis excludes under the same declared rules.
    rows_frame = rating_rows_frame(study=study)
    _, flags, _ = exclusions.exclusions_apply(
        rows_frame,
        exclusions.ExclusionRules.from_declared(study.exclusion_rules),
        conditions=["human"],
        alpha=0.05,
    )
    assert set(flags.index[flags["excluded"]]) == {fast.pk}
