"""Who may see analyses and exports: staff, or members of the "Analysts" group. One rule for pages and the API.

Participants never have a user account (their session only holds a participant id), so they are anonymous here:
pages send them to the login form, the API answers 401/403.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.models import Group
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from rest_framework.exceptions import NotFound
from rest_framework.permissions import BasePermission

from analysis.tokens import token_allows_slug

ANALYSTS_GROUP = "Analysts"


def analyst_grant(user) -> None:
    """Puts `user` in the Analysts group (created on first use): they may then read analyses and the API."""
    group, _ = Group.objects.get_or_create(name=ANALYSTS_GROUP)
    user.groups.add(group)


def user_is_analyst(user) -> bool:
    if not (user and user.is_authenticated and user.is_active):
        return False
    return bool(user.is_staff or user.groups.filter(name=ANALYSTS_GROUP).exists())


def analyst_required(view):
    """Anonymous → the analysts' login page (then back); signed in but not an analyst → 403. The admin's own login
    admits staff only, so analysts who are not staff sign in on `analysis:login`."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), login_url=reverse("analysis:login"))
        if not user_is_analyst(request.user):
            raise PermissionDenied("Analyses are open to staff and members of the Analysts group.")
        return view(request, *args, **kwargs)

    return wrapper


class IsAnalyst(BasePermission):
    """Staff or an analyst; through a token, only the studies the token may read (analysis.tokens): another
    study answers 404, as an unknown one does."""

    message = "Analyses are open to staff and members of the Analysts group."

    def has_permission(self, request, view) -> bool:
        if not user_is_analyst(request.user):
            return False
        slug = getattr(view, "kwargs", {}).get("slug")
        if slug is not None and not token_allows_slug(request, slug):
            raise NotFound()
        return True
