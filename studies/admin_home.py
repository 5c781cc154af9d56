"""The researcher's home: the admin index shows the studies first, each with its state (draft, generating,
ready, live, paused, closed), its participants and what it still misses, under a prominent "New study"; the
rest of the admin follows, with tokens, sign-in and lock-out records last, under "System".

`ResearchAdminSite` is the project's admin site (`studies.apps.ResearchAdminConfig`, named in INSTALLED_APPS in
place of django.contrib.admin), so `admin.site` and every `@admin.register` work as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import admin
from django.urls import reverse

from .design import CONDITION_HOOKS
from .kinds import kind_of
from .models import Study
from .selectors import study_list_with_counts
from .services import study_launch_problems

HOME_STUDIES = 50
# The apps a researcher works in, in this order; every other app is listed under "System".
RESEARCH_APPS = ("studies", "generation", "analysis", "recruiting")
MISSING_SHOWN = 3


@dataclass
class HomeStudy:
    study: Study
    state: str  # draft / generating / ready / live / paused / closed
    state_label: str
    participants: int
    missing: list[str]
    links: list[tuple[str, str]]

    @property
    def more_missing(self) -> int:
        return max(len(self.missing) - MISSING_SHOWN, 0)

    @property
    def missing_shown(self) -> list[str]:
        return self.missing[:MISSING_SHOWN]


def home_studies(*, limit: int = HOME_STUDIES) -> list[HomeStudy]:
    """The newest studies with their state: a draft is "generating" while a condition hook reports work in
    progress (generation's items), "ready" when nothing stops its launch, else "draft" with what is missing."""
    studies = list(study_list_with_counts().order_by("-created_at")[:limit])
    drafts = [s.pk for s in studies if s.state == Study.State.DRAFT]
    busy: set[int] = set()
    for hook in CONDITION_HOOKS.values():
        if hook.busy is not None and drafts:
            busy |= hook.busy(drafts)
    rows = []
    for study in studies:
        missing: list[str] = []
        state = study.state
        if state == Study.State.DRAFT:
            missing = study_launch_problems(study=study)
            state = "generating" if study.pk in busy else ("draft" if missing else "ready")
        change = reverse("admin:studies_study_change", args=[study.pk])
        links = (
            [("Set up", reverse("admin:studies_study_setup", args=[study.pk]))]
            if not study.launched_at
            else []
        )
        links += [("Edit", change), ("Live status", reverse("admin:studies_study_status", args=[study.pk]))]
        if study.state != Study.State.DRAFT and (analysis := kind_of(study).analysis_url(study)):
            links.append(("Analysis", analysis))
        rows.append(
            HomeStudy(
                study=study,
                state=state,
                state_label=state.capitalize(),
                participants=study.n_participants,
                missing=missing,
                links=links,
            )
        )
    return rows


class ResearchAdminSite(admin.AdminSite):
    site_header = "Empathy studies"
    site_title = "Empathy studies"
    index_title = "Home"
    index_template = "admin/home.html"

    def index(self, request, extra_context=None):
        can_add = request.user.has_perm("studies.add_study")
        extra = {
            "home_studies": home_studies() if request.user.has_perm("studies.view_study") else [],
            "new_study_url": reverse("admin:studies_study_new") if can_add else None,
            **(extra_context or {}),
        }
        response = super().index(request, extra)
        apps = response.context_data["app_list"]
        response.context_data["research_apps"] = [app for app in apps if app["app_label"] in RESEARCH_APPS]
        response.context_data["system_apps"] = [app for app in apps if app["app_label"] not in RESEARCH_APPS]
        return response

    def get_app_list(self, request, app_label=None):
        """The apps researchers work in first, in RESEARCH_APPS' order (the index and the side bar), then the
        others alphabetically."""
        apps = super().get_app_list(request, app_label)
        rank = {label: n for n, label in enumerate(RESEARCH_APPS)}
        return sorted(apps, key=lambda app: (rank.get(app["app_label"], len(rank)), app["name"].lower()))
