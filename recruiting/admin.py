"""The Prolific admin of a linked study: create → publish → pause / resume / stop, reconcile, approve,
reject (the admin's decision, with Prolific's categories), bonuses; each participant's Prolific status
beside ours with mismatches highlighted. Every button is a POST into the same services the terminal and
the Celery tasks use."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse

from studies.sealed import key_seal, key_store_problem, url_origin

from .bonuses import (
    BonusError,
    bonus_batch_decide,
    bonuses_grant_per_rating,
    bonuses_import_csv,
    bonuses_pay,
)
from .client import ProlificError
from .filters import filters_parse, filters_text
from .hooks import HooksError, hooks_subscribe
from .launch import (
    ACTIONS,
    LaunchError,
    places_for,
    prolific_places_sync,
    prolific_study_act,
    prolific_study_create,
)
from .models import Bonus, BonusBatch, Device, ProlificStudy, ProlificSubmission, WebhookEvent
from .selectors import participants_beside_prolific
from .submissions import (
    REJECTION_CATEGORIES,
    SubmissionError,
    approvable,
    approval_report,
    needs_decision,
    submission_reject,
    submissions_approve,
    submissions_reconcile,
)


class ProlificStudyForm(forms.ModelForm):
    devices = forms.MultipleChoiceField(choices=Device.choices, widget=forms.CheckboxSelectMultiple)
    site_url = forms.URLField(
        max_length=300,
        assume_scheme="https",
        help_text=ProlificStudy._meta.get_field("site_url").help_text,
    )
    token = forms.CharField(
        required=False,
        strip=True,
        max_length=500,
        label="API token",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Paste the Prolific API token here to store it encrypted (never shown again); it is then used "
        "instead of the environment variable. Leave empty to keep the token as it is.",
    )
    token_remove = forms.BooleanField(
        required=False,
        label="Remove the stored token",
        help_text="Forget the typed token and use the environment variable again.",
    )
    filters = forms.CharField(
        required=False,
        label="Audience filters (prescreeners)",
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text="One Prolific filter a line, sent when the study is created on Prolific: "
        "<code>filter_id = choice, choice</code> (the ids of the answers to keep) or "
        "<code>filter_id = lower..upper</code>, e.g. <code>age = 18..65</code>. The ids are those of "
        "Prolific's filter list. Empty: anyone on Prolific who fits the devices.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.is_bound:
            self.initial["filters"] = filters_text(self.instance.filters)
        if self.instance.token_sealed:
            self.fields["token"].help_text = (
                "A token is stored (encrypted) and used instead of the environment variable. Paste a new one to "
                "replace it; leave empty to keep it."
            )

    def clean_filters(self) -> list[dict]:
        return filters_parse(self.cleaned_data.get("filters", ""))

    def clean(self):
        cleaned = super().clean()
        token = cleaned.get("token", "")
        if token:
            if problem := key_store_problem():
                self.add_error("token", problem)
            else:
                self.instance.token_sealed = key_seal(key=token, origin=url_origin(settings.PROLIFIC_API_URL))
        elif cleaned.get("token_remove"):
            self.instance.token_sealed = ""
        return cleaned

    class Meta:
        model = ProlificStudy
        fields = [
            "study",
            "token_env",
            "webhook_secret_env",
            "site_url",
            "prolific_name",
            "prolific_description",
            "reward",
            "estimated_minutes",
            "devices",
            "auto_approve",
            "bonus_flagged",
            "workspace_id",
            "filters",
        ]


@admin.register(ProlificStudy)
class ProlificStudyAdmin(admin.ModelAdmin):
    form = ProlificStudyForm
    change_form_template = "admin/recruiting/prolificstudy/change_form.html"
    list_display = ["study", "prolific_study_id", "state", "places", "auto_approve", "last_synced_at"]
    list_select_related = ["study"]
    readonly_fields = ["prolific_study_id", "state", "state_at", "places", "last_synced_at"]
    fields = [
        "study",
        ("token_env", "webhook_secret_env"),
        ("token", "token_remove"),
        "site_url",
        "prolific_name",
        "prolific_description",
        ("reward", "estimated_minutes"),
        "devices",
        "filters",
        ("auto_approve", "bonus_flagged"),
        "workspace_id",
        ("prolific_study_id", "state", "state_at"),
        ("places", "last_synced_at"),
    ]

    def get_fields(self, request, obj=None):
        fields = super().get_fields(request, obj)
        if obj is not None and obj.token_sealed:
            return fields
        return [("token",) if field == ("token", "token_remove") else field for field in fields]

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<int:pk>/act/<str:action>/", view(self.act_view), name="recruiting_prolificstudy_act"),
            path(
                "<int:pk>/reject/<int:sub>/", view(self.reject_view), name="recruiting_prolificstudy_reject"
            ),
        ] + super().get_urls()

    def change_view(self, request, object_id, form_url="", extra_context=None):
        link = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if link is not None:
            rows = participants_beside_prolific(link=link)
            extra.update(
                link=link,
                rows=rows,
                mismatches=sum(1 for r in rows if r.mismatch),
                approvable_count=approvable(link).count(),
                approvals=approval_report(link),
                decisions=needs_decision(link),
                categories=REJECTION_CATEGORIES,
                quota_places=places_for(link.study),
                actions=[a for a, (_, allowed) in ACTIONS.items() if link.state in allowed],
                batches=link.bonus_batches.order_by("-created_at")[:10],
                unpaid_bonuses=Bonus.objects.filter(link=link, batch__isnull=True).count(),
                webhook_url=request.build_absolute_uri(
                    reverse("recruiting:prolific-webhook", kwargs={"slug": link.study.slug})
                ),
            )
        return super().change_view(request, object_id, form_url, extra)

    def _link(self, request, pk) -> ProlificStudy:
        link = get_object_or_404(ProlificStudy.objects.select_related("study"), pk=pk)
        if not self.has_change_permission(request, link):
            raise PermissionDenied
        return link

    def act_view(self, request: HttpRequest, pk: int, action: str):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        link = self._link(request, pk)
        try:
            message = self._act(request, link, action)
        except (LaunchError, SubmissionError, BonusError, ProlificError, HooksError) as exc:
            self.message_user(request, str(exc), messages.ERROR)
        else:
            self.message_user(request, message, messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:recruiting_prolificstudy_change", args=[link.pk]))

    def _act(self, request, link: ProlificStudy, action: str) -> str:
        if action == "create":
            link = prolific_study_create(link=link)
            return f"Created on Prolific as a draft: {link.prolific_study_id} ({link.places} places)."
        if action in ACTIONS:
            link = prolific_study_act(link=link, action=action)
            return f"{action.capitalize()}: the study is {link.get_state_display().lower()} on Prolific."
        if action == "places":
            changed = prolific_places_sync(link=link)
            return f"Places on Prolific: {link.places}" + (" (updated)." if changed else " (already right).")
        if action == "sync":
            report = submissions_reconcile(link=link)
            missing = (
                f" Missing on Prolific: {', '.join(report.missing_on_prolific)}."
                if report.missing_on_prolific
                else ""
            )
            pending = approval_report(link, report.approved)
            return (
                f"{report.seen} submissions read, {report.changed} changed, {report.freed} places freed."
                f"{missing}{' ' + pending.summary() if pending.pending else ''}"
            )
        if action == "approve":
            ids = [int(i) for i in request.POST.getlist("submission") if i.isdigit()] or None
            return submissions_approve(link=link, ids=ids).summary()
        if action == "bonus-rule":
            amount = request.POST.get("amount", "")  # checked by the service (BonusError)
            n = bonuses_grant_per_rating(
                link=link, amount_per_rating=amount, reason=request.POST.get("reason") or "per-rating"
            )
            return f"{n} bonus(es) granted; pay them with Pay bonuses."
        if action == "bonus-csv":
            upload = request.FILES.get("file")
            if upload is None:
                raise BonusError("Choose a CSV file.")
            text = upload.read().decode("utf-8-sig", errors="strict")
            n = bonuses_import_csv(link=link, text=text, reason=request.POST.get("reason", ""))
            return f"{n} bonus(es) granted from the file; pay them with Pay bonuses."
        if action == "pay":
            return bonuses_pay(link=link).summary()
        if action in ("batch-paid", "batch-release"):
            batch = get_object_or_404(BonusBatch, pk=request.POST.get("batch", ""), link=link)
            return bonus_batch_decide(batch=batch, paid=action == "batch-paid")
        if action == "webhooks":
            return hooks_subscribe(link=link).summary()
        raise LaunchError(f"Unknown action {action!r}.")

    def reject_view(self, request: HttpRequest, pk: int, sub: int):
        link = self._link(request, pk)
        if request.method == "POST":
            submission = get_object_or_404(ProlificSubmission, pk=sub, link=link)
            try:
                submission_reject(
                    submission=submission,
                    category=request.POST.get("category", ""),
                    message=request.POST.get("message", ""),
                )
            except (SubmissionError, ProlificError) as exc:
                self.message_user(request, str(exc), messages.ERROR)
            else:
                self.message_user(request, f"Rejected {submission.prolific_pid}.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:recruiting_prolificstudy_change", args=[link.pk]))


@admin.register(WebhookEvent)
class WebhookEventAdmin(admin.ModelAdmin):
    list_display = [
        "event_id",
        "event_type",
        "resource_id",
        "deliveries",
        "received_at",
        "processed_at",
        "outcome",
    ]
    list_filter = ["event_type"]
    search_fields = ["event_id", "resource_id"]
    readonly_fields = [f.name for f in WebhookEvent._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(BonusBatch)
class BonusBatchAdmin(admin.ModelAdmin):
    list_display = ["pk", "link", "state", "prolific_bulk_id", "created_at", "paid_at", "last_error"]
    list_filter = ["state"]
    readonly_fields = [f.name for f in BonusBatch._meta.fields]

    def has_add_permission(self, request):
        return False
