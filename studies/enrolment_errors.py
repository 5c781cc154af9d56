"""Why an enrolment enrolled nobody: each error says what happened, and nothing was written."""

from __future__ import annotations

from .models import Participant, Study


class EnrollmentError(Exception):
    """Nobody was enrolled and nothing was written. `code` names the outcome for pages and APIs."""

    code = "enrollment_error"


class StudyRefused(EnrollmentError):
    """The study takes nobody new: `message` says why, with the study's fields ({slug}, {state})."""

    message = ""

    def __init__(self, study: Study):
        self.study = study
        super().__init__(self.message.format(slug=repr(study.slug), state=study.state))


class StudyNotOpen(StudyRefused):
    code = "study_not_open"
    message = "Study {slug} is {state}, not live: it takes no new participants."


class StudyFull(StudyRefused):
    code = "study_full"
    message = "Every condition of study {slug} has reached its quota."


class StudyBudgetSpent(StudyFull):
    """The study's kind says its spending budget cannot cover a new participant: to the participant, the study is
    full."""

    code = "study_budget_spent"
    message = "Study {slug} has spent its budget: it takes no new participants."


class AlreadyInFamily(StudyRefused):
    """The external id took part in another study of this study's family (its parent or another wave): a wave
    compares new conditions with the parent's raters, so it needs other people. Not a full study: places may
    be free, and the participant is told the real reason (trying again later would not help)."""

    code = "already_in_family"
    message = "This participant already took part in a study of the family of {slug}."


class InvalidExternalId(EnrollmentError):
    code = "invalid_external_id"


class ParticipantCannotRestart(EnrollmentError):
    """The external id belongs to someone who returned the study or timed out: their slot and items were
    given to others, so they cannot start again (recruiting platforms treat a return as final too)."""

    code = "cannot_restart"

    def __init__(self, participant: Participant):
        self.participant = participant
        super().__init__(
            f"Participant {participant.external_id!r} is {participant.status} and cannot restart."
        )
