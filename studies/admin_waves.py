"""Copies and follow-up waves in the admin: the "Duplicate" action, the "Extend as a follow-up wave" form and
the family page (every study of a family with its conditions, wave and date). StudyAdmin takes the mixin."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.validators import validate_slug
from django.http import HttpRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse

from .models import Condition, Study
from .waves import DEFAULT_RERATE_SHARE, StudyCopyError, family_members, study_copy, study_extend


def free_slug(base: str) -> str:
    slug, n = f"{base}-copy"[:64], 2
    while Study.objects.filter(slug=slug).exists():
        slug, n = f"{base}-copy-{n}"[:64], n + 1
    return slug


class ExtendForm(forms.Form):
    new_slug = forms.CharField(max_length=64, validators=[validate_slug], label="Slug of the wave")
    conditions = forms.CharField(
        label="New conditions",
        help_text="The new LLM conditions' names, separated by commas or spaces (e.g. gpt5, llama4).",
    )
    rerate_share = forms.FloatField(
        label="Re-rating share",
        initial=DEFAULT_RERATE_SHARE,
        min_value=0.01,
        max_value=1.0,
        help_text="Share of the parent's baseline raters who re-rate its baseline responses (rater drift).",
    )
    like = forms.ChoiceField(
        label="Start from condition",
        required=False,
        help_text="Optional: a parent LLM condition whose configuration (provider, model, prompt, decoding) the "
        "new ones start from; change the model afterwards.",
    )

    def __init__(self, *args, parent: Study, **kwargs):
        super().__init__(*args, **kwargs)
        llm = parent.conditions.filter(kind=Condition.Kind.LLM).order_by("position", "name")
        self.fields["like"].choices = [("", "None: configure each new condition")] + [
            (c.name, c.name if c.label in ("", c.name) else f"{c.name} ({c.label})") for c in llm
        ]

    def clean_conditions(self) -> list[str]:
        names = [n for n in self.cleaned_data["conditions"].replace(",", " ").split() if n]
        for name in names:
            validate_slug(name)
        if not names:
            raise forms.ValidationError("Name at least one new condition.")
        return names


class StudyWavesAdminMixin:
    def wave_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<int:pk>/extend/", view(self.extend_view), name="studies_study_extend"),
            path("<int:pk>/family/", view(self.family_view), name="studies_study_family"),
        ]

    @admin.action(description="Duplicate selected studies (as drafts)")
    def duplicate_selected(self, request, queryset):
        for study in queryset:
            try:
                copy = study_copy(source=study, new_slug=free_slug(study.slug))
            except StudyCopyError as exc:
                self.message_user(request, f"Cannot copy “{study.slug}”: {exc}", messages.ERROR)
            else:
                self.message_user(
                    request, f"Copied “{study.slug}” to the draft “{copy.slug}”.", messages.SUCCESS
                )

    def extend_view(self, request: HttpRequest, pk: int):
        parent = get_object_or_404(Study, pk=pk)
        if not self.has_add_permission(request):
            return HttpResponseRedirect(reverse("admin:studies_study_change", args=[pk]))
        form = ExtendForm(
            request.POST or None, initial={"new_slug": f"{parent.slug}-wave"[:64]}, parent=parent
        )
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                wave = study_extend(
                    parent=parent, new_slug=data["new_slug"], conditions=data["conditions"],
                    rerate_share=data["rerate_share"], like=data["like"] or None,
                )  # fmt: skip
            except StudyCopyError as exc:
                form.add_error(None, str(exc))
            else:
                self.message_user(
                    request,
                    f"Created the wave “{wave.slug}”: configure its new conditions' models, generate, then launch.",
                    messages.SUCCESS,
                )
                return HttpResponseRedirect(reverse("admin:studies_study_change", args=[wave.pk]))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": parent,
            "title": f"Extend {parent.slug} as a follow-up wave",
            "form": form,
        }
        return TemplateResponse(request, "admin/studies/study/extend.html", context)

    def family_view(self, request: HttpRequest, pk: int):
        study = get_object_or_404(Study, pk=pk)
        members = family_members(study)
        rows = [
            {
                "study": member,
                "wave": i,
                "date": member.launched_at or member.closed_at or member.created_at,
                "conditions": list(member.conditions.order_by("position", "name")),
            }
            for i, member in enumerate(members)
        ]
        newest = members[-1]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": study,
            "title": f"Family of {members[0].slug}",
            "rows": rows,
            "analysis_slug": newest.slug if newest.parent_id else None,
        }
        return TemplateResponse(request, "admin/studies/study/family.html", context)
