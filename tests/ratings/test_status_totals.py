"""The live status page's ratings come from the running totals (kinds/rating/rating_totals.py) and equal the
ratings counted from the rows, on a study whose participants are in every state, driven through the services."""

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from kinds.rating.models import Rating
from kinds.rating.services import rating_submit
from studies.models import Assignment, Participant
from studies.participants import (
    participant_advance,
    participant_enroll,
    participant_return,
    participant_screen_out,
    participants_release_stale,
)
from studies.selectors import study_status
from tests.factories import AttentionCheckFactory, rating_study_build

pytestmark = pytest.mark.django_db


def _answer(participant: Participant, pages: int | None = None) -> None:
    """Takes an enrolled participant through consent and instructions, then answers `pages` pages (all)."""
    for step in (Participant.Step.CONSENT, Participant.Step.INSTRUCTIONS):
        participant.refresh_from_db()
        if participant.step == step:
            assert participant_advance(participant=participant, from_step=step)
    for assignment in list(participant.assignments.order_by("position"))[:pages]:
        participant.refresh_from_db()
        value = assignment.attention_check.expected_value if assignment.attention_check_id else 3
        rating_submit(participant=participant, position=assignment.position, value=value)


def _counted_from_the_rows(study) -> dict[str, dict]:
    """Per condition name: ratings and the spread of ratings per response, counted from Rating rows."""
    per_response = Counter(
        Rating.objects.filter(
            assignment__participant__study=study,
            assignment__participant__is_preview=False,
            assignment__kind=Assignment.Kind.RESPONSE,
        ).values_list("assignment__response", flat=True)
    )
    out = {}
    for condition in study.conditions.all():
        counts = [per_response.get(rid, 0) for rid in condition.responses.values_list("pk", flat=True)]
        out[condition.name] = {
            "responses": len(counts),
            "ratings": sum(counts),
            "ratings_per_response": {
                "min": min(counts),
                "max": max(counts),
                "mean": round(sum(counts) / len(counts), 3),
                "histogram": {str(n): k for n, k in sorted(Counter(counts).items())},
            },
        }
    return out


def test_the_status_page_ratings_equal_the_rows_whatever_state_participants_are_in():
    study = rating_study_build(conditions=2, prompts=6, items_per_participant=3, quota_per_condition=100)
    AttentionCheckFactory(study=study, after_item=1, expected_value=2)
    enrol = lambda pid, **kw: participant_enroll(study=study, external_id=pid, **kw)  # noqa: E731
    for i in range(5):
        _answer(enrol(f"done{i}"))
    _answer(enrol("midway"), pages=2)  # active, an answered page and unanswered ones
    _answer(enrol("staff", is_preview=True))  # a preview: never counted
    returned = enrol("returned")
    _answer(returned, pages=1)
    participant_return(participant=returned)  # keeps its answered page, loses the rest
    screened = enrol("screened")
    participant_screen_out(participant=screened)
    stale = enrol("stale")
    _answer(stale, pages=1)
    lapsed = enrol("lapsed")  # its hold lapsed, not yet released: still active, its pages still there
    _answer(lapsed, pages=2)
    Participant.objects.filter(pk__in=[stale.pk, lapsed.pk]).update(
        last_seen_at=timezone.now() - timedelta(days=2)
    )
    participants_release_stale()
    lapsed_again = enrol("lapsed-after")
    _answer(lapsed_again, pages=1)
    Participant.objects.filter(pk=lapsed_again.pk).update(last_seen_at=timezone.now() - timedelta(days=2))
    statuses = set(Participant.objects.filter(study=study).values_list("status", flat=True))
    assert statuses == {"active", "completed", "returned", "screened_out", "timed_out"}

    status = study_status(study=study)
    expected = _counted_from_the_rows(study)
    for row in status["conditions"]:
        shown = {key: row[key] for key in ("responses", "ratings", "ratings_per_response")}
        assert shown == expected[row["name"]], row["name"]
    assert status["totals"]["ratings"] == sum(c["ratings"] for c in expected.values()) > 5 * 3
