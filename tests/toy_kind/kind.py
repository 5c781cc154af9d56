"""The toy kind: after the shared consent, one page where the participant waves (left or right hand), once.

It declares its pages, its answers' export and its analysis by dotted paths inside its own package, and no other
capability (no analysts' page, corpus, judges or power plan)."""

from studies.kinds import StudyKind, register
from studies.models import Participant

TOY_STEP = "toy_wave"


class ToyKind(StudyKind):
    name = "toy"
    label = "Toy study (wave once)"
    step_labels = {TOY_STEP: "Wave"}
    pages = {TOY_STEP: "tests.toy_kind.pages.TOY_PAGE"}
    status_columns = [("waved", "waved")]
    answers_export = "tests.toy_kind.answers.toy_export"
    analysis = "tests.toy_kind.analysis.TOY_ANALYSIS"

    def steps(self, study):
        return [TOY_STEP]

    def assignments_create(self, participant, *, rng, now):
        return []  # nothing to show but the wave

    def status_counts(self, study, conditions):
        per = {c.pk: {"waved": 0} for c in conditions}
        for condition_id in Participant.objects.filter(
            study=study, status=Participant.Status.COMPLETED, is_preview=False
        ).values_list("condition_id", flat=True):
            per[condition_id]["waved"] += 1
        return per

    def status_totals(self, study, per_condition):
        return {"waved": sum(row["waved"] for row in per_condition.values())}


TOY = register(ToyKind())
