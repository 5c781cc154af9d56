"""How many ratings each response of a rating study has, from the enrolment's running totals.

A rating counts when a non-preview participant answered a response page (kind "response": an attention check,
a consistency pair's repeat or a picture check is not a rating of a response). The balance keeps, per response,
the non-preview response pages that exist (studies/balance_counts.py, scope "response"), in the transaction
that writes or deletes them. Every such page is rated except the unrated pages of active participants: a page
is rated in the transaction that answers it, and a participant leaving the active status loses their unanswered
pages (`balance_counts.released`). So the ratings are the totals less those pages, which the index of active
participants finds (a handful, whatever the size of the study): two queries that do not grow with the study.
"""

from __future__ import annotations

from django.db.models import Count

from studies.balance_counts import counts_get
from studies.models import Assignment, Participant, Response, Study


def ratings_per_response(study: Study) -> dict[int, tuple[int, int]]:
    """{response id: (its condition id, its ratings by non-preview participants)} for every response of the
    study (zeros included)."""
    responses = dict(
        Response.objects.filter(condition__study=study).order_by().values_list("id", "condition_id")
    )
    pages = counts_get(study.pk, Assignment.Kind.RESPONSE)
    unrated = (
        Assignment.objects.filter(
            participant__condition_id__in=set(responses.values()),
            participant__status=Participant.Status.ACTIVE,
            participant__is_preview=False,
            kind=Assignment.Kind.RESPONSE,
            rating__isnull=True,
        )
        .order_by()
        .values_list("response_id")
        .annotate(n=Count("pk"))
    )
    for response_id, n in unrated:
        if response_id in pages:
            pages[response_id] -= n
    return {rid: (condition_id, pages.get(rid, 0)) for rid, condition_id in responses.items()}
