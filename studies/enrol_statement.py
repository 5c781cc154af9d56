"""A newcomer to a rating study enrolled in one PostgreSQL statement: `rating_enrol_in_place` (migration 0013).

`studies.participants.participant_enroll` offers each enrolment here first. The statement takes the common
case (a live rating study that is not a wave, a newcomer, nobody whose hold has lapsed) and makes exactly the
choices of the Python path for the same draws (studies/balancing.py): the condition, the responses and their
order. What it does not take writes nothing and comes back as `fallback`, and the Python path runs.
`PARTICIPANT_ENROL_STATEMENT=0` sends every enrolment through the Python path; SQLite has no such function.
"""

from __future__ import annotations

import random
from contextlib import nullcontext
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from .balancing import consent_cutoff, tie_break_draws
from .models import Participant, Study

ENROLLED, EXISTING, FULL, FALLBACK = "enrolled", "existing", "full", "fallback"


def applies(study: Study, *, is_preview: bool) -> bool:
    """Whether to offer this enrolment to the statement (it checks the study again under its lock)."""
    return (
        settings.PARTICIPANT_ENROL_STATEMENT
        and not is_preview
        and connection.vendor == "postgresql"
        and study.kind == Study.Kind.RATING
        and study.state == Study.State.LIVE
        and study.parent_id is None
    )


def draws(seed: int) -> list[int]:
    """A participant's tie-break draws in the Python path's order: the condition, the responses, their order."""
    rng = random.Random(seed)
    return [*tie_break_draws(rng), *tie_break_draws(rng), *tie_break_draws(rng)]


def enrol(
    study: Study, external_id: str, *, seed: int, now: datetime, **fields
) -> tuple[str, Participant | None]:
    """(`enrolled`, the new participant), (`existing`, None: someone has `external_id`), (`full`, None) or
    (`fallback`, None). `fields`: the platform and its ids, as `participant_enroll` takes them.

    Outside a transaction the statement is its own (no BEGIN and COMMIT around it); inside one, a savepoint
    keeps a refused INSERT (the same id arriving twice at once, which the lock makes all but impossible) from
    breaking the caller's transaction."""
    try:
        with transaction.atomic() if connection.in_atomic_block else nullcontext():
            outcome, participant_id, condition_id = _call(study, external_id, seed, now, fields)
    except IntegrityError:
        return EXISTING, None
    if outcome != ENROLLED:
        return outcome, None
    participant = Participant(
        pk=participant_id,
        study=study,
        condition_id=condition_id,
        external_id=external_id,
        **fields,
        is_preview=False,
        status=Participant.Status.ACTIVE,
        step=Participant.Step.CONSENT,
        seed=seed,
        started_at=now,
        last_seen_at=now,
    )
    participant._state.adding = False
    participant._state.db = connection.alias
    return outcome, participant


def _call(study: Study, external_id: str, seed: int, now: datetime, fields: dict) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT outcome, participant_id, condition_id FROM rating_enrol_in_place"
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::bigint[])",
            [
                study.pk,
                external_id,
                fields["platform"],
                fields["platform_study_id"],
                fields["platform_session_id"],
                fields["mturk_assignment_id"],
                fields["mturk_hit_id"],
                seed,
                now,
                consent_cutoff(now),
                draws(seed),
            ],
        )
        return cursor.fetchone()
