"""Which counts of failed sign-ins lock a sign-in out (django-axes' AXES_LOCKOUT_PARAMETERS, as a callable).

django-axes counts failures per parameter set and refuses a sign-in once any count reaches
AXES_FAILURE_LIMIT, for AXES_COOLOFF_MINUTES after the last failure. Its parameter sets are fixed unless a
callable chooses them per request, which is what this is:

* always per username and address, and per address whatever the username: one address guessing is stopped
  without letting it lock anyone out elsewhere;
* per username over every address, except from an address the username signed in from before (a *known
  address*, from axes' own AccessLog of successful sign-ins, within KNOWN_FOR): guessing one password from
  many addresses is throttled after AXES_FAILURE_LIMIT failures in all, and the owner still gets in from a
  device they used, however many addresses are guessing.

django-axes offers no per-username limit that spares known addresses (a username-only parameter locks the
owner out everywhere; its whitelist callable lifts every limit, the per-address ones too), hence this choice
of parameters rather than a throttle of our own.
"""

from __future__ import annotations

from datetime import timedelta

from axes.helpers import get_client_username
from axes.models import AccessLog
from django.http import HttpRequest
from django.utils import timezone

PER_ADDRESS: list = [["username", "ip_address"], "ip_address"]
#: How long a successful sign-in makes its address known for that username.
KNOWN_FOR = timedelta(days=90)


def address_known(username: str | None, ip_address: str | None) -> bool:
    if not username or not ip_address:
        return False
    return AccessLog.objects.filter(
        username=username, ip_address=ip_address, attempt_time__gte=timezone.now() - KNOWN_FOR
    ).exists()


def lockout_parameters(request_or_attempt, credentials: dict | None = None) -> list:
    """The parameter sets counted for this sign-in (see the module's docstring). Axes also calls it with a
    stored attempt (which carries its username and address) when it resets counts."""
    if isinstance(request_or_attempt, HttpRequest):
        username = get_client_username(request_or_attempt, credentials)
        ip_address = getattr(request_or_attempt, "axes_ip_address", None)
    else:
        username = getattr(request_or_attempt, "username", None)
        ip_address = getattr(request_or_attempt, "ip_address", None)
    if address_known(username, ip_address):
        return PER_ADDRESS
    return [*PER_ADDRESS, "username"]
