"""Prolific as a recruiting platform (studies/platforms/): Prolific fills PROLIFIC_PID, STUDY_ID and SESSION_ID
into the study URL and takes a finished participant back at the study's completion redirect."""

from studies.platforms import RecruitingPlatform, register

PLACEHOLDERS = "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"


class Prolific(RecruitingPlatform):
    name = "prolific"
    label = "Prolific"
    site_name = "Prolific"
    participant_parameter = "PROLIFIC_PID"
    study_parameter = "STUDY_ID"
    session_parameter = "SESSION_ID"
    returned_text = (
        "Please also click \u201cReturn submission\u201d on Prolific so that your submission is closed."
    )
    timed_out_text = (
        "Please return your submission on Prolific. If you think this is a mistake, message the researchers "
        "through Prolific."
    )
    link_query = PLACEHOLDERS
    link_instructions = "Prolific's study URL (it carries Prolific's placeholders)"


register(Prolific())
