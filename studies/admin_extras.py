"""Pieces of the study admin that speak to researchers rather than to the database: the study link to paste
into the recruiting platform, a state change confirmed on its own page (Launch as a button, and Close
that says who is still taking part), and a plain summary of what stops a deletion."""

from __future__ import annotations

import logging
from collections import Counter

from django.contrib import messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.utils import NestedObjects
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import router
from django.http import HttpRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import get_text_list

from .kinds import kind_of, resolved
from .models import Participant, Study
from .platforms import platform_of
from .services import (
    StudyLaunchError,
    StudyStateError,
    study_close,
    study_launch,
    study_launch_problems,
    study_pause,
    study_placeholder_conditions,
    study_resume,
)

# verb → (service, the states it starts from, the button's words)
STATE_CHANGES = {
    "launch": (study_launch, {Study.State.DRAFT}, "Launch"),
    "pause": (study_pause, {Study.State.LIVE}, "Pause"),
    "resume": (study_resume, {Study.State.PAUSED}, "Resume"),
    "close": (study_close, {Study.State.LIVE, Study.State.PAUSED}, "Close for good"),
}

logger = logging.getLogger(__name__)


def participant_link(request: HttpRequest, study: Study) -> str:
    """The link participants open, as the study's recruiting platform wants it pasted."""
    base = request.build_absolute_uri(reverse("ratings:entry", args=[study.slug]))
    query = platform_of(study).link_query
    return f"{base}?{query}" if query else base


def launch_panel(study: Study, query=None) -> str:
    """The kind's launch panel (e.g. the rating kind's power before launch, on the assumptions typed in the
    page's `query`), or "" when it has none. The panel is advice: when it fails, the launch page says so and
    still works."""
    path = kind_of(study).launch_panel
    if path is None:
        return ""
    try:
        return resolved(path)(study, query or {})
    except Exception:
        logger.exception("launch panel %s failed for study %s", path, study.slug)
        return format_html(
            "<p class='errornote'>{}</p>", "The power figures could not be computed (see the log)."
        )


def state_changes_for(study: Study) -> list[tuple[str, str]]:
    """(verb, button words) of the state changes open to the study now."""
    return [(verb, words) for verb, (_, sources, words) in STATE_CHANGES.items() if study.state in sources]


def active_participants(study: Study) -> int:
    return study.participants.filter(status=Participant.Status.ACTIVE, is_preview=False).count()


def state_change_view(model_admin, request: HttpRequest, pk: int, verb: str):
    """GET: what the change will do (launch problems, participants still taking part), with one button.
    POST: the change itself, through the service; back to the study with a message either way."""
    study = get_object_or_404(Study, pk=pk)
    if verb not in STATE_CHANGES or not model_admin.has_change_permission(request, study):
        raise PermissionDenied
    service, sources, words = STATE_CHANGES[verb]
    change_url = reverse("admin:studies_study_change", args=[study.pk])
    placeholders = study_placeholder_conditions(study=study) if verb == "launch" else []
    if request.method == "POST":
        try:
            service(
                study=study, **({"dry_run": request.POST.get("dry_run") == "yes"} if placeholders else {})
            )
        except StudyLaunchError as exc:
            model_admin.message_user(
                request, f"Cannot launch “{study.slug}”: {'; '.join(exc.problems)}", messages.ERROR
            )
        except StudyStateError as exc:
            model_admin.message_user(request, str(exc), messages.ERROR)
        else:
            model_admin.message_user(request, f"“{study.slug}” is now {study.state}.", messages.SUCCESS)
        return HttpResponseRedirect(change_url)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "original": study,
        "title": f"{words}: {study.title}",
        "verb": verb,
        "words": words,
        "allowed": study.state in sources,
        "problems": study_launch_problems(study=study) if verb == "launch" else [],
        "launch_panel": launch_panel(study, request.GET) if verb == "launch" else "",
        "placeholders": placeholders,
        "active": active_participants(study) if verb in {"close", "pause"} else 0,
        "change_url": change_url,
        "participant_link": participant_link(request, study),
    }
    return TemplateResponse(request, "admin/studies/study/state_change.html", context)


def protected_summary(objs, request, *, what: str, instead: str):
    """`ModelAdmin.get_deleted_objects`, with the protected rows summarised as counts per kind and a way out,
    instead of one line per assignment or participant (hundreds on a running study)."""
    collector = NestedObjects(using=router.db_for_write(objs[0].__class__) if objs else "default")
    collector.collect(objs)
    if not collector.protected:
        return None
    counts = Counter(obj._meta.verbose_name_plural for obj in collector.protected)
    listed = get_text_list([f"{n} {name}" for name, n in sorted(counts.items())], "and")
    return [
        f"{listed} depend on it ({what} cannot be deleted once participants were given it). {instead}".strip()
    ]


class FriendlyProtectedDeleteInline:
    """An inline whose rows, once participants were given them, are refused deletion in one sentence
    (counts per kind and what to do instead) instead of Django's list of every protected row; its inputs
    are named for screen readers."""

    protected_what = "a row"
    protected_instead = ""

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        inline = self

        class FriendlyDeleteForm(formset.form):
            def hand_clean_DELETE(self):
                if self.cleaned_data.get("DELETE") and not self.instance._state.adding:
                    summary = protected_summary(
                        [self.instance], request, what=inline.protected_what, instead=inline.protected_instead
                    )
                    if summary:
                        raise ValidationError(
                            "“%(instance)s” cannot be deleted: %(summary)s",
                            code="deleting_protected",
                            params={"instance": self.instance, "summary": summary[0]},
                        )
                return super().hand_clean_DELETE()

        class LabelledFormSet(formset):
            def add_fields(self, form, index):
                super().add_fields(form, index)
                # A tabular inline's inputs (its Delete box too) sit under column headings, with no <label>
                # of their own: name them, or a screen reader announces only their help text (axe: label).
                for name, field in form.fields.items():
                    field.widget.attrs.setdefault("aria-label", str(field.label or name))

        LabelledFormSet.form = FriendlyDeleteForm
        return LabelledFormSet


def close_confirmation(model_admin, request: HttpRequest, queryset):
    """The list action "close": when any chosen study still has participants taking part, a page that says
    so and asks again (None when there is nothing to ask, or the answer is in)."""
    if request.POST.get("confirm") == "yes":
        return None
    busy = [(study, active_participants(study)) for study in queryset]
    busy = [(study, n) for study, n in busy if n]
    if not busy:
        return None
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": "Close studies with participants taking part?",
        "busy": busy,
        "studies": list(queryset),
        "action": request.POST.get("action", ""),
        "selected": request.POST.getlist(ACTION_CHECKBOX_NAME),
    }
    return TemplateResponse(request, "admin/studies/study/close_confirm.html", context)
