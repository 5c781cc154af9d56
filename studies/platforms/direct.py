"""A direct link: no recruiting platform. A person opens `/s/<slug>/`, clicks start and is enrolled under a
generated id; a finished one is sent to the study's completion redirect, if any."""

from .base import RecruitingPlatform
from .registry import register


class DirectLink(RecruitingPlatform):
    name = "none"
    label = "None (direct link)"
    enrolls_without_id = True
    needs_completion_code = False


register(DirectLink())
