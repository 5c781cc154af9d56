"""The frozen design in the admin: edits of a frozen field refused with a clear message (the study form and its
condition / attention-check inlines), the design and pre-registration pages, and the amendment form.
StudyAdmin (studies/admin.py) takes these pieces as mixins."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.core.exceptions import PermissionDenied, ValidationError
from django.forms.models import modelform_factory
from django.http import HttpRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from .admin_forms import (
    SPARE_EXAMPLES,
    SPARE_OPTIONS,
    PlannedAnalysisField,
    ScaleField,
    WorkedExamplesField,
    value_in_words,
)
from .design import (
    FROZEN_STUDY_FIELDS,
    AmendmentError,
    FrozenDesignError,
    design_current,
    frozen_message,
    is_frozen,
    kind_settings_amendable,
    study_amend,
)
from .kinds import kind_of
from .models import Condition, Study, StudyAmendment, StudyDesign
from .prereg import prereg_context, prereg_markdown
from .selectors import study_design_summary

AMENDABLE = [f for f in FROZEN_STUDY_FIELDS if f != "kind"]


def _newlines(value):
    """Text as stored: a browser posts a textarea's line ends as CRLF, the database holds what was saved (LF)."""
    return value.replace("\r\n", "\n") if isinstance(value, str) else value


class FrozenDesignFormMixin:
    """On the study's form: a change to a frozen field of a launched study is a validation error per field. Text is
    compared and saved with LF line ends, so a browser's unchanged textarea (posted with CRLF) is no change."""

    def clean(self):
        cleaned = super().clean()
        for name, value in cleaned.items():
            cleaned[name] = _newlines(value)
        study = self.instance
        if study.pk and is_frozen(study):
            for name in self.changed_data:
                if name in FROZEN_STUDY_FIELDS and cleaned.get(name) != _newlines(self[name].initial):
                    self.add_error(name, frozen_message(study, f"“{self.fields[name].label}”"))
            for name in self._frozen_posted_changes():
                self.add_error(name, frozen_message(study, f"“{self.fields[name].label}”"))
        return cleaned

    def _frozen_posted_changes(self) -> list[str]:
        """The read-only (disabled) frozen fields posted with another value: a browser never posts a disabled
        input, so this is a page opened before launch, or a script, and it is told why rather than ignored."""
        changed = []
        for name, field in self.fields.items():
            key = self.add_prefix(name)
            if not field.disabled or name not in FROZEN_STUDY_FIELDS or key not in self.data:
                continue
            if isinstance(field.widget, forms.MultiWidget):
                continue  # a setting of several inputs: the stored value is kept, whatever was posted
            try:
                posted = field.clean(field.widget.value_from_datadict(self.data, self.files, key))
            except ValidationError:
                changed.append(name)
                continue
            if _newlines(posted) != _newlines(self[name].initial):
                changed.append(name)
        return changed


class StudyAdminForm(FrozenDesignFormMixin, forms.ModelForm):
    """The study's admin form (ModelAdmin supplies the model and fields; `StudyAdmin.formfield_for_dbfield` gives
    the JSON settings their forms). The worked examples get as many slots as the study has examples, plus spare
    ones, each rated on the study's scale; the planned analysis keeps the study's notes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        study = self.instance
        if isinstance(self.fields.get("scale"), ScaleField):
            options = study.scale if isinstance(study.scale, list) else []
            self._replace("scale", ScaleField(slots=len(options) + SPARE_OPTIONS))
        if isinstance(self.fields.get("worked_examples"), WorkedExamplesField):
            examples = study.worked_examples if isinstance(study.worked_examples, list) else []
            self._replace(
                "worked_examples",
                WorkedExamplesField(
                    slots=len(examples) + SPARE_EXAMPLES,
                    form=kind_of(study).worked_example_form,
                    answers=kind_of(study).example_answers(study) or None,
                ),
            )
        if isinstance(self.fields.get("planned_analysis"), PlannedAnalysisField):
            self._replace("planned_analysis", PlannedAnalysisField(stored=study.planned_analysis))

    def _replace(self, name: str, field: forms.Field) -> None:
        field.label = self.fields[name].label
        self.fields[name] = field


def frozen_fields_lock(form_class: type[forms.ModelForm], study: Study) -> None:
    """On a launched study's page, every frozen field is shown read-only (a disabled field keeps its stored value
    whatever is posted), each with an "Amend this field" link to its amendment form; the kind is read-only
    outright (StudyAdmin.get_readonly_fields: no amendment changes it)."""
    amend = reverse("admin:studies_study_amend", args=[study.pk])
    for name, field in form_class.base_fields.items():
        if name not in AMENDABLE:
            continue
        field.disabled = True
        field.help_text_unfrozen = field.help_text
        field.help_text = format_html(
            '{} <span class="frozen-note">Frozen at launch. <a href="{}?field={}" aria-label="Amend this field: {}">'
            "Amend this field</a></span>",
            field.help_text,
            amend,
            name,
            field.label or name,
        )


class FrozenInlineFormSet(forms.BaseInlineFormSet):
    """A condition / attention-check inline of a launched study: adding, changing a frozen field or deleting a
    row is refused with the reason (the model guards refuse it too; this says it on the page)."""

    def clean(self):
        super().clean()
        study = self.instance
        if not (study.pk and is_frozen(study)):
            self._refuse_deleting_responses()
            return
        what = self.model._meta.verbose_name
        for form in self.forms:
            if (
                not hasattr(form, "cleaned_data")
                or not form.has_changed()
                and not self._should_delete_form(form)
            ):
                continue
            if self._should_delete_form(form):
                raise ValidationError(frozen_message(study, f"Deleting a {what}"))
            if form.instance.pk is None:
                raise ValidationError(frozen_message(study, f"Adding a {what}"))
            frozen = [n for n in form.changed_data if n not in {"enrolling", "position"}]
            if frozen:
                raise ValidationError(
                    frozen_message(study, f"The {what} “{form.instance}” ({', '.join(frozen)})")
                )

    def _refuse_deleting_responses(self):
        for form in self.forms:
            target = form.instance
            if self._should_delete_form(form) and isinstance(target, Condition) and target.pk:
                if n := target.responses.count():
                    raise ValidationError(
                        f"Condition “{target.name}” has {n} response(s): deleting it would delete them with their "
                        "generation records and spend. Switch it off (enrolling) instead."
                    )


class KindSettingsInline(admin.StackedInline):
    """A kind's own settings (`StudyKind.settings_model`) on the study page: one row, never deleted, frozen with
    the design at launch (a change is refused on the page). A kind's subclass names the model and its fields."""

    formset = FrozenInlineFormSet
    can_delete = False
    max_num = 1
    min_num = 1


class AmendForm(forms.Form):
    """An amendment of one frozen field: the field as the study's own form edits it (its widget, its clean()),
    filled in with the current value, and the reason."""

    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), help_text="Why the frozen design changes."
    )

    def __init__(self, data=None, *, study_form: forms.ModelForm, name: str):
        super().__init__(data, initial={name: study_form.initial.get(name)})
        field = study_form.fields[name]
        # The change page shows a launched study's frozen fields read-only; an amendment is the recorded way to
        # change them.
        field.disabled = False
        field.help_text = getattr(field, "help_text_unfrozen", field.help_text)
        self.fields = {name: field, **self.fields}


class StudyDesignAdminMixin:
    """Pages of a study's design: /design/ (JSON, hash, amendments), /prereg/ (HTML, ?format=md for Markdown),
    /amend/ (the amendment form)."""

    def design_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<int:pk>/design/", view(self.design_view), name="studies_study_design"),
            path("<int:pk>/prereg/", view(self.prereg_view), name="studies_study_prereg"),
            path("<int:pk>/amend/", view(self.amend_view), name="studies_study_amend"),
        ]

    def _study(self, request, pk: int, *, change: bool = False) -> Study:
        study = get_object_or_404(Study, pk=pk)
        allowed = (
            self.has_change_permission(request, study) if change else self.has_view_permission(request, study)
        )
        if not allowed:
            raise PermissionDenied
        return study

    def design_view(self, request: HttpRequest, pk: int):
        study = self._study(request, pk)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": study,
            "title": f"Design of {study.slug}",
            "summary": study_design_summary(study=study),
            "design_json": json.dumps(
                prereg_context(study)["design"], indent=2, sort_keys=True, ensure_ascii=False
            ),
        }
        return TemplateResponse(request, "admin/studies/study/design.html", context)

    def prereg_view(self, request: HttpRequest, pk: int):
        study = self._study(request, pk)
        if request.GET.get("format") == "md":
            response = TemplateResponse(
                request, "admin/studies/study/prereg.md", {"text": prereg_markdown(study)}
            )
            response["Content-Type"] = "text/markdown; charset=utf-8"
            response["Content-Disposition"] = f'attachment; filename="{study.slug}-prereg.md"'
            return response
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": study,
            "title": f"Pre-registration of {study.slug}",
            "bundle_url": kind_of(study).bundle_url(study),
            **prereg_context(study),
        }
        return TemplateResponse(request, "admin/studies/study/prereg.html", context)

    def amend_view(self, request: HttpRequest, pk: int):
        """The frozen fields this study's page shows, each with its current value in words; ?field=NAME gives
        that field's own input (the study form's) and the reason, posted to `study_amend`."""
        study = self._study(request, pk, change=True)
        if design_current(study) is None:
            self.message_user(request, f"“{study.slug}” is a draft: edit it directly.", messages.WARNING)
            return HttpResponseRedirect(reverse("admin:studies_study_change", args=[study.pk]))
        shown = flatten_fieldsets(self.get_fieldsets(request, study))
        names = [name for name in shown if name in AMENDABLE]
        study_form = self.get_form(request, study, change=True, fields=names)(instance=study)
        # The kind's own settings (`StudyKind.settings_model`) are amended like the study's fields, after them.
        own = kind_of(study).settings(study)
        if kind_settings_amendable(study):
            own_form = modelform_factory(type(own), fields=kind_settings_amendable(study))(instance=own)
            study_form.fields.update(own_form.fields)
            study_form.initial.update(own_form.initial)
            names += list(own_form.fields)
        name = request.GET.get("field", "")
        form = None
        if name in names:
            form = AmendForm(
                request.POST if request.method == "POST" else None, study_form=study_form, name=name
            )
        elif name:
            self.message_user(
                request, f"“{name}” cannot be amended here: choose a field below.", messages.WARNING
            )
        if form is not None and form.is_bound and form.is_valid():
            try:
                amendment = study_amend(
                    study=study, field=name, value=form.cleaned_data[name], reason=form.cleaned_data["reason"],
                    author=request.user.get_username(),
                )  # fmt: skip
            except (AmendmentError, FrozenDesignError) as exc:
                form.add_error(None, "; ".join(getattr(exc, "messages", [str(exc)])))
            else:
                self.message_user(
                    request,
                    f"Amended {amendment.field}: design {amendment.sha256_before[:12]} → {amendment.sha256_after[:12]}.",
                    messages.SUCCESS,
                )
                return HttpResponseRedirect(reverse("admin:studies_study_design", args=[study.pk]))
        # Each field's current value in its own labels: a JSON setting as its groups (one a line when its inputs
        # are a table, like the scale's options), any other as text.
        current = []
        for each in names:
            field = study_form.fields[each]
            words = value_in_words(field, study_form.initial.get(each))
            grouped = isinstance(words, list)
            current.append({"name": each, "label": field.label, "words": words, "groups": grouped,
                            "one_line": grouped and field.widget.table})  # fmt: skip
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": study,
            "title": f"Amend the design of {study.slug}",
            "form": form,
            "field_label": study_form.fields[name].label if form is not None else "",
            "current": current,
        }
        return TemplateResponse(
            request, "admin/studies/study/amend.html", context, status=400 if form and form.errors else 200
        )


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(StudyDesign)
class StudyDesignAdmin(ReadOnlyAdmin):
    list_display = ["study", "sha256", "reason", "created_at"]
    list_filter = ["study"]
    list_select_related = ["study"]
    fields = ["study", "sha256", "reason", "created_at", "canonical"]
    readonly_fields = fields


@admin.register(StudyAmendment)
class StudyAmendmentAdmin(ReadOnlyAdmin):
    list_display = ["study", "field", "author", "created_at", "sha256_after"]
    list_filter = ["study"]
    list_select_related = ["study"]
    fields = ["study", "field", "old_value", "new_value", "reason", "author", "created_at", "sha256_before",
              "sha256_after"]  # fmt: skip
    readonly_fields = fields
