"""The toy kind's answer service, through the spine's one answer protocol (studies/answers.py), and its export."""

from django.db import transaction
from django.utils import timezone

from studies.answers import InvalidValue, Page, answer_take
from studies.participants import participant_lock, participant_state_copy

from .kind import TOY_STEP
from .models import ToyWave

EXPORT_COLUMNS = ["participant", "condition", "hand", "waved_at"]


def toy_pages(participant) -> list[Page]:
    return [Page(0, TOY_STEP, ToyWave.objects.filter(participant_id=participant.pk).exists())]


def wave_submit(*, participant, hand: str, now=None) -> bool:
    """Stores the participant's wave, exactly once (False: they had waved already, nothing stored)."""
    if hand not in ToyWave.Hand.values:
        raise InvalidValue(f"{hand!r} is not a hand.")
    now = now or timezone.now()
    with transaction.atomic():
        locked = participant_lock(participant)

        def store(page: Page) -> bool:
            ToyWave.objects.create(participant=locked, hand=hand, waved_at=now)
            return False  # the toy has no attention check

        taken = answer_take(locked, pages=toy_pages(locked), position=0, now=now, store=store)
    if taken.created:
        participant_state_copy(participant, locked)
    return taken.created


def toy_export(study, rules=None):
    """The kind's answers export (`StudyKind.answers_export`): one row per wave."""
    waves = ToyWave.objects.filter(participant__study=study).select_related("participant__condition")
    records = (
        [w.participant.external_id, w.participant.condition.name, w.hand, w.waved_at.isoformat()]
        for w in waves.order_by("pk")
    )
    return list(EXPORT_COLUMNS), records
