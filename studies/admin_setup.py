"""The researcher's guided path in the admin: "New study" (title, kind, platform → a draft), then one page per
setup step — material (a corpus, or the kind's own), conditions and their models, consent and instructions,
checks, quotas against power and coverage, preview, launch — each saying what is still missing and linking to
where it is done (the study's admin page, the corpus import, generation's pages). The admin stays for the rest.

What a step is missing comes from the one launch rule (`study_launch_checks`, each problem naming its step) and
the kind's own advice (`coverage_problems`, its launch panel); nothing here decides whether a study can launch.
StudyAdmin takes the views as a mixin; the kind is asked, never compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.validators import validate_slug
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.text import slugify

from .admin_extras import launch_panel
from .design import CONDITION_HOOKS
from .kinds import kind_choices, kind_of
from .kinds.base import CHECKS, CONDITIONS, LAUNCH, MATERIAL, PREVIEW, QUOTAS, SETUP_STEPS, TEXTS
from .models import Condition, Study
from .platforms import platform_choices
from .services import StudyCreateError, study_create, study_launch_checks

TITLES = {
    CONDITIONS: "Conditions and their models",
    TEXTS: "Consent and instructions",
    CHECKS: "Checks",
    QUOTAS: "Quotas, power and coverage",
    PREVIEW: "Preview",
    LAUNCH: "Recruiting and launch",
}


@dataclass
class SetupStep:
    key: str
    number: int
    title: str
    what: str
    missing: list[str] = field(default_factory=list)  # what stops the launch, fixed in this step
    advice: list[str] = field(default_factory=list)  # worth fixing; does not stop a launch
    links: list[tuple[str, str]] = field(default_factory=list)  # (words, address) of where it is done
    done: bool = False
    panel: str = ""  # safe HTML shown on the step's page (the kind's launch panel, for quotas)
    todo: str = "to do"  # the status of a step not done with nothing missing

    @property
    def status(self) -> str:
        if self.missing:
            return f"{len(self.missing)} missing"
        return "done" if self.done else ("to check" if self.advice else self.todo)


def _change(study: Study, anchor: str = "") -> str:
    return reverse("admin:studies_study_change", args=[study.pk]) + (f"#{anchor}" if anchor else "")


def _unconfigured_llm_conditions(study: Study, conditions: list[Condition]) -> list[Condition]:
    """LLM conditions that no condition hook describes (no model configured) and that have no responses yet."""
    llm = [c for c in conditions if c.kind == Condition.Kind.LLM]
    described: set[int] = set()
    for hook in CONDITION_HOOKS.values():
        described |= set(hook.describe(llm))
    return [c for c in llm if c.pk not in described and not c.responses.exists()]


def setup_steps(study: Study, *, with_panel: str | None = None, typed=None) -> list[SetupStep]:
    """The study's setup steps, in order, with what each is missing. `with_panel`: the step whose page also
    shows its panel (the quotas step: the kind's power before launch, on the assumptions `typed` in its form: the page's query)."""
    kind = kind_of(study)
    problems: dict[str, list[str]] = {key: [] for key in SETUP_STEPS}
    for problem in study_launch_checks(study=study):
        problems[problem.step].append(problem.text)
    conditions = list(study.conditions.order_by("position", "name"))
    steps: list[SetupStep] = []

    def add(key: str, title: str, what: str, *, done: bool = True, **more) -> SetupStep:
        """A step is done when nothing it owns stops the launch and its own condition (`done`) holds: a preview
        taken, a check chosen."""
        step = SetupStep(
            key=key, number=len(steps) + 1, title=title, what=what, missing=problems[key], **more
        )
        step.done = done and not step.missing
        steps.append(step)
        return step

    material_links = [("Edit the study", _change(study))]
    if kind.corpus_import:
        query = urlencode({"study": study.slug, "then": "setup"})  # the import returns to this setup
        material_links.insert(0, ("Import a corpus", reverse("admin:studies_study_import") + "?" + query))
    add(
        MATERIAL,
        kind.material_title,
        "What participants are shown: "
        + (
            "prompts, with the responses the file has (e.g. the human baseline); LLM responses come next."
            if kind.corpus_import
            else "chosen on the study's page."
        ),
        links=material_links,
    )

    unconfigured = _unconfigured_llm_conditions(study, conditions)
    links = [("Add or change conditions", _change(study, "conditions-group"))]
    links += [
        (
            f"Choose the model of “{c.name}”",
            reverse("admin:generation_llmconditionconfig_add") + "?" + urlencode({"condition": c.pk}),
        )
        for c in unconfigured
    ]
    if kind.generation_admin_view is not None or any(c.kind == Condition.Kind.LLM for c in conditions):
        links.append(
            ("Generate and review LLM responses", reverse("admin:generation_study", args=[study.pk]))
        )
    add(
        CONDITIONS,
        TITLES[CONDITIONS],
        "Each condition is one arm participants are assigned to: the human baseline or a model. An LLM "
        "condition needs a provider and a model, then its responses generated and reviewed.",
        advice=[
            f"condition '{c.name}' has no model yet: choose its provider and model" for c in unconfigured
        ],
        links=links,
    )
    add(
        TEXTS,
        TITLES[TEXTS],
        f"What participants read before they start, and {kind.setup_texts.answers}.",
        links=[("Edit the texts", _change(study, "id_consent_text"))],
    )
    checked = kind.checks(study)  # (how many, what one is called, its inline's anchor), or None
    add(
        CHECKS,
        TITLES[CHECKS],
        (f"{checked[0]} {checked[1]}{'' if checked[0] == 1 else 's'}; " if checked else "")
        + "the exclusion rules the analysis applies, declared before launch.",
        advice=(
            [f"no {checked[1]} yet: add one so careless participants can be excluded"]
            if checked and not checked[0]
            else []
        ),
        done=not checked or checked[0] > 0,
        links=[
            (f"{checked[1].capitalize()}s and exclusion rules", _change(study, checked[2]))
            if checked
            else ("Exclusion rules", _change(study))
        ],
    )
    coverage = kind.coverage_problems(study, conditions)
    add(
        QUOTAS,
        TITLES[QUOTAS],
        f"{study.quota_per_condition} participants per condition (a condition may set its own), "
        f"{study.items_per_participant} {kind.setup_texts.items} each.",
        advice=coverage,
        done=not coverage,
        links=[("Quotas and design", _change(study, "id_quota_per_condition"))],
        panel=launch_panel(study, typed) if with_panel == QUOTAS else "",
    )
    previewed = study.participants.filter(is_preview=True).exists()
    add(
        PREVIEW,
        TITLES[PREVIEW],
        "Go through the study as a participant does; previews are never counted.",
        done=previewed or study.state != Study.State.DRAFT,
        links=[("Preview as participant", f"/s/{study.slug}/?preview=1")],
    )
    earlier = sum(len(step.missing) for step in steps)
    launch_links = [("Recruiting platform and codes", _change(study, "id_platform"))]
    if study.state == Study.State.DRAFT:
        launch_links.append(("Launch", reverse("admin:studies_study_state", args=[study.pk, "launch"])))
    add(
        LAUNCH,
        TITLES[LAUNCH],
        "The recruiting platform, the codes participants are given, then the launch.",
        advice=[f"{earlier} thing{'' if earlier == 1 else 's'} missing in the steps above"]
        if earlier
        else [],
        done=study.state != Study.State.DRAFT,
        todo="ready to launch" if not earlier else "to do",
        links=launch_links,
    )
    return steps


class NewStudyForm(forms.Form):
    title = forms.CharField(
        max_length=200, help_text="What the study is called in the admin and the reports."
    )
    slug = forms.CharField(
        max_length=64,
        required=False,
        validators=[validate_slug],
        help_text="Its short name in links and exports (letters, digits, - and _); blank: made from the title.",
    )
    kind = forms.ChoiceField(choices=kind_choices, label="Kind of study")
    platform = forms.ChoiceField(choices=platform_choices, label="Recruiting platform")

    def clean(self):
        data = super().clean()
        if data.get("title") and not data.get("slug"):
            data["slug"] = slugify(data["title"])[:64]
        return data


class StudySetupAdminMixin:
    def setup_urls(self):
        view = self.admin_site.admin_view
        return [
            path("new/", view(self.new_study_view), name="studies_study_new"),
            path("<int:pk>/setup/", view(self.setup_view), name="studies_study_setup"),
            path("<int:pk>/setup/<slug:step>/", view(self.setup_view), name="studies_study_setup_step"),
        ]

    def new_study_view(self, request: HttpRequest):
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = NewStudyForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                study = study_create(
                    slug=data["slug"], title=data["title"], kind=data["kind"], platform=data["platform"]
                )
            except StudyCreateError as exc:
                form.add_error("slug", str(exc))
            else:
                self.message_user(request, f"Created the draft “{study.slug}”.", messages.SUCCESS)
                return HttpResponseRedirect(reverse("admin:studies_study_setup", args=[study.pk]))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "New study",
            "form": form,
        }
        return TemplateResponse(
            request, "admin/studies/study/new.html", context, status=400 if form.errors else 200
        )

    def setup_view(self, request: HttpRequest, pk: int, step: str | None = None):
        study = get_object_or_404(Study, pk=pk)
        if not self.has_view_permission(request, study):
            raise PermissionDenied
        if step is not None and step not in SETUP_STEPS:
            raise Http404("no such setup step")
        steps = setup_steps(study, with_panel=step, typed=request.GET)
        current = next((s for s in steps if s.key == step), None)
        index = steps.index(current) if current else -1
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": study,
            "title": f"{current.title}: {study.title}" if current else f"Set up {study.title}",
            "steps": steps,
            "step": current,
            "previous": steps[index - 1] if current and index > 0 else None,
            "next": steps[index + 1]
            if current and index + 1 < len(steps)
            else (steps[0] if not current else None),
            "missing": sum(len(s.missing) for s in steps),
        }
        return TemplateResponse(request, "admin/studies/study/setup.html", context)
