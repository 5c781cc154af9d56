"""Admin of a study's LLM judges: configure (provider, model, rubric with the seed study's default, samples,
screening) with what would be sent for the study's first response, and a run page per judge (run, submit as a
Batch API batch, collect, retry failed; live progress, spend, the most common errors). Every button calls a
generation service (generation.services.judging, generation.judge_batches) or selector."""

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from generation import judge_batches, selectors
from generation.judge_formats import judge_format_of
from generation.judge_models import Judge, JudgeBatch, JudgeRating
from generation.providers import batch_api_of
from generation.providers.registry import placeholder_kinds
from generation.services import judging


@admin.register(Judge)
class JudgeAdmin(admin.ModelAdmin):
    list_display = ["name", "study", "provider", "model", "n_samples", "screens_new_conditions", "run_link"]
    list_filter = ["study", "provider", "screens_new_conditions"]
    list_select_related = ["study", "provider"]
    search_fields = ["name", "model", "study__slug"]
    readonly_fields = ["rendered_example", "run_link"]
    fieldsets = [
        (None, {"fields": ["study", "name", "provider", "model", "run_link"]}),
        (
            "Rubric",
            {
                "fields": ["rubric", "system_prompt", "rendered_example"],
                "description": "The default follows the seed study's Good / Okay / Bad definitions. The reply must "
                "name exactly one of the study's scale labels; anything else is retried, then failed.",
            },
        ),
        ("Decoding", {"fields": ["temperature", "max_tokens", "seed", "n_samples"]}),
        ("Screening", {"fields": ["screens_new_conditions"]}),
    ]

    def get_urls(self):
        run = path(
            "<int:judge_id>/run/", self.admin_site.admin_view(self.run_view), name="generation_judge_run"
        )
        return [run, *super().get_urls()]

    @admin.display(description="Run")
    def run_link(self, obj):
        if not obj or not obj.pk:
            return "Save the judge first."
        return format_html(
            '<a href="{}">Run this judge, see its progress</a>',
            reverse("admin:generation_judge_run", args=[obj.pk]),
        )

    @admin.display(description="What it sends (the study's first response; nothing is sent from here)")
    def rendered_example(self, obj):
        if not obj or not obj.pk:
            return "Save to see the rubric filled with the study's first response."
        try:
            example = judging.judge_example(judge=obj)
        except ValidationError as exc:
            return format_html('<p class="errornote">{}</p>', " ".join(exc.messages))
        if example is None:
            return "The study has no responses yet."
        system, messages_ = example
        return format_html(
            '{}<pre style="white-space:pre-wrap">{}</pre>',
            format_html('<p><strong>System</strong></p><pre style="white-space:pre-wrap">{}</pre>', system)
            if system
            else "",
            messages_[0]["content"],
        )

    def run_view(self, request, judge_id: int):
        judge = get_object_or_404(Judge.objects.select_related("study", "provider"), pk=judge_id)
        if not self.has_change_permission(request, judge):
            messages.error(request, "You may not run judges.")
            return HttpResponseRedirect(reverse("admin:index"))
        if request.method == "POST":
            return self._run_action(request, judge)
        progress = selectors.judge_progress(judge=judge)
        busy = bool(progress["pending"] or progress["running"])
        context = {
            **self.admin_site.each_context(request),
            "title": f"Judge {judge.name}: {judge.study.title}",
            "judge": judge,
            "judge_answers": judge_format_of(judge.study).answers,
            "placeholder": judge.provider.kind in placeholder_kinds(),
            "progress": progress,
            "busy": busy,
            "problems": judging.judge_problems(judge=judge),
            "estimate": judging.judge_estimate(judge=judge),
            "conditions": list(judge.study.conditions.order_by("position", "name")),
            "batches": JudgeBatch.objects.filter(judge=judge)[:20],
            "has_batch_api": batch_api_of(judge.provider) is not None,
            "recent_failures": JudgeRating.objects.filter(judge=judge, status=JudgeRating.Status.FAILED)
            .select_related("response__condition")
            .order_by("-id")[:10],
            "opts": self.model._meta,
            "change_url": reverse("admin:generation_judge_change", args=[judge.pk]),
        }
        return TemplateResponse(request, "admin/generation/judge_run.html", context)

    def _run_action(self, request, judge):
        action = request.POST.get("action")
        back = HttpResponseRedirect(reverse("admin:generation_judge_run", args=[judge.pk]))
        user = request.user.get_username()
        try:
            names = [request.POST["condition"]] if request.POST.get("condition") else None
            conditions = judging.judge_conditions(judge=judge, names=names) if names else None
            if action == "run":
                started = judging.judge_start(judge=judge, conditions=conditions)
                messages.success(
                    request,
                    f"Started: {started.created} new ratings, {len(started.rating_ids)} sent to the workers.",
                )
            elif action == "batch_submit":
                batch = judge_batches.judge_batch_submit(judge=judge, conditions=conditions, started_by=user)
                messages.success(
                    request,
                    f"Submitted {batch.ratings_total} ratings as batch {batch.provider_batch_id}."
                    if batch
                    else "No pending ratings to submit.",
                )
            elif action == "batch_poll":
                for batch in JudgeBatch.objects.filter(judge=judge, status=JudgeBatch.Status.SUBMITTED):
                    judge_batches.judge_batch_poll(batch=batch)
                messages.success(request, "Checked the open batches.")
            elif action == "retry_failed":
                ids = judging.judge_retry_failed(judge=judge, conditions=conditions)
                messages.success(request, f"Retrying {len(ids)} failed ratings.")
            else:
                messages.error(request, f"Unknown action {action!r}.")
        except judging.JudgeSetupError as exc:
            messages.error(request, f"The judge could not run: {exc}")
        return back
