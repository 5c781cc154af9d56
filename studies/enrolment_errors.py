"""Why an enrolment enrolled nobody: each error says what happened, and nothing was written."""

from __future__ import annotations

from .models import Participant, Study


class EnrollmentError(Exception):
    """Nobody was enrolled and nothing was written. `code` names the outcome for pages and APIs."""

    code = "enrollment_error"


class StudyNotOpen(EnrollmentError):
    code = "study_not_open"

    def __init__(self, study: Study):
        self.study = study
        super().__init__(f"Study {study.slug!r} is {study.state}, not live: it takes no new participants.")


class StudyFull(EnrollmentError):
    code = "study_full"

    def __init__(self, study: Study):
        self.study = study
        super().__init__(f"Every condition of study {study.slug!r} has reached its quota.")


class AlreadyInFamily(EnrollmentError):
    """The external id took part in another study of this study's family (its parent or another wave): a wave
    compares new conditions with the parent's raters, so it needs other people. Not a full study: places may
    be free, and the participant is told the real reason (trying again later would not help)."""

    code = "already_in_family"

    def __init__(self, study: Study):
        self.study = study
        super().__init__(f"This participant already took part in a study of the family of {study.slug!r}.")


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
