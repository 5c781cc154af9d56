"""What a recruiting platform is to the study: `RecruitingPlatform`.

A platform sends people to `/s/<slug>/` with parameters of its own, takes them back when they finish, return or
are screened out, and has the researcher paste the participant link somewhere. Everything the site knows of one
platform is one subclass of `RecruitingPlatform`, registered once (registry.py); the entry, the outcome pages,
the admin and the launch checks ask the study's or the participant's platform and never name one.

What every platform stores on a participant: `Participant.platform` (its name), `platform_study_id` (the
platform's id of the study: Prolific's STUDY_ID, MTurk's hitId), `platform_session_id` (its id of this attempt:
Prolific's SESSION_ID, MTurk's assignmentId; a browser resumes someone only with it) and `platform_data` (JSON:
whatever else the platform needs back at the end, e.g. MTurk's submit host).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from studies.models import Participant

# Platforms' ids are short tokens (Prolific: 24 hex digits; MTurk: upper-case letters and digits). Anything
# else (an unfilled "{{%PROLIFIC_PID%}}" placeholder, markup, binary) is refused.
ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
ID_MAX_LENGTH = 128
OTHER_PARAMETER_MAX_LENGTH = 200


@dataclass(frozen=True)
class Entry:
    """Who an entry link names, as `participant_enroll` takes it."""

    platform: str
    external_id: str
    platform_study_id: str = ""
    platform_session_id: str = ""
    platform_data: dict = field(default_factory=dict)

    def enrollment_fields(self) -> dict:
        return asdict(self)  # a copy: platform_data is the participant's own


@dataclass(frozen=True)
class SubmitForm:
    """A form the completion page posts to the platform (MTurk's externalSubmit)."""

    action: str
    fields: dict
    button: str


@dataclass(frozen=True)
class Completion:
    """How a finished participant goes back: a link (redirect_url), a form to post, or neither (copy the code)."""

    redirect_url: str = ""
    submit_form: SubmitForm | None = None


class RecruitingPlatform:
    """One recruiting platform. Subclass, set the class attributes, override what differs, and `register` an
    instance (registry.py)."""

    name: str = ""
    label: str = ""
    # What participants are told to go back to ("Return to Prolific"); "" for none (a direct link).
    site_name: str = ""

    # --- entry parameters -----------------------------------------------------------------------------
    participant_parameter: str | None = None  # the query parameter naming the participant; None: no ids
    study_parameter: str = ""  # the platform's id of the study
    session_parameter: str = ""  # the platform's id of this attempt
    other_parameters: tuple[str, ...] = ()  # read but not ids (free text up to 200 characters)
    # A direct link: a person arrives with no id and is enrolled under a generated one after a click.
    enrolls_without_id: bool = False
    # Shown on the preview page a platform opens before a person accepts (is_preview), e.g. MTurk's.
    preview_notice: str = ""

    # --- outcomes ------------------------------------------------------------------------------------
    needs_completion_code: bool = True  # launch refuses a study without one
    returned_text: str = ""  # what a participant who stopped should do on the platform
    timed_out_text: str = ""

    # --- admin ---------------------------------------------------------------------------------------
    link_query: str = ""  # the placeholders appended to the participant link, without "?"
    link_instructions: str = "your invitation"  # "paste it into ..."

    def id_parameters(self) -> tuple[str, ...]:
        return tuple(
            p for p in (self.participant_parameter, self.study_parameter, self.session_parameter) if p
        )

    def parameters(self) -> tuple[str, ...]:
        return self.id_parameters() + tuple(self.other_parameters)

    def entry(self, query: Mapping[str, str]) -> Entry | None:
        """Who the (validated) query names on this platform, or None when it names nobody of this platform."""
        if not self.participant_parameter or not query.get(self.participant_parameter):
            return None
        return Entry(
            platform=self.name,
            external_id=query[self.participant_parameter],
            platform_study_id=query.get(self.study_parameter, "") if self.study_parameter else "",
            platform_session_id=query.get(self.session_parameter, "") if self.session_parameter else "",
            platform_data=self.platform_data(query),
        )

    def platform_data(self, query: Mapping[str, str]) -> dict:
        """What this platform keeps on the participant beyond its ids."""
        return {}

    def is_preview(self, query: Mapping[str, str]) -> bool:
        """The platform shows the task before a person accepts it: describe it, write nothing."""
        return False

    def completion(self, participant: Participant, code: str, redirect_url: str) -> Completion:
        """How a finished participant goes back, given the study's completion redirect with their code."""
        return Completion(redirect_url=redirect_url)
