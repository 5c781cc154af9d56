"""Reading generation's records: progress, response lengths, provenance rows and their export. Read-only.

Other apps read generation through this module and nothing else (analysis → generation.selectors for the
responses export's provenance columns); it imports no generation service, so reading never drags in the code
that calls providers or dispatches work.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from collections import Counter
from decimal import Decimal

from django.db.models import Count, Sum

from generation.judge_formats import VERDICT_A, VERDICT_B, VERDICT_SAME, judge_format_of
from generation.models import (
    GenerationItem,
    GenerationJob,
    Judge,
    JudgeRating,
    LLMConditionConfig,
    ResponseProvenance,
)
from generation.providers.registry import placeholder_kinds
from studies.models import Condition, Prompt, Response, Study

Status = GenerationItem.Status
WORD_RE = re.compile(r"[\w’'-]+")


def words_count(text: str) -> int:
    return len(WORD_RE.findall(text or ""))


def generation_unsettled(*, conditions: list[Condition]) -> int:
    """Items still pending or running (what a caller waits for)."""
    return GenerationItem.objects.filter(
        condition__in=conditions, status__in=[Status.PENDING, Status.RUNNING]
    ).count()


def placeholder_conditions(*, study: Study) -> list[str]:
    """The names of the study's conditions whose replies come from the test model (placeholders made here, not a
    model's words): configured with it, or holding a response it wrote. Every page and file that shows such
    replies says so."""
    kinds = placeholder_kinds()
    configured = LLMConditionConfig.objects.filter(
        condition__study=study, provider__kind__in=kinds
    ).values_list("condition__name", flat=True)
    written = ResponseProvenance.objects.filter(
        response__condition__study=study, provider_kind__in=kinds, superseded_at__isnull=True
    ).values_list("response__condition__name", flat=True)
    return sorted(set(configured) | set(written))


def generation_progress(*, study: Study) -> list[dict]:
    """Per LLM condition: slots (prompts × samples), done / running / pending / failed / cancelled / not started,
    spend so far (USD), responses flagged for review, and the most common errors."""
    n_prompts = Prompt.objects.filter(study=study).count()
    rows = []
    placeholders = set(placeholder_conditions(study=study))
    for condition in study.conditions.filter(kind=Condition.Kind.LLM).order_by("position", "name"):
        config = LLMConditionConfig.objects.select_related("provider").filter(condition=condition).first()
        slots = n_prompts * (config.n_samples if config else 1)
        counts = dict(
            GenerationItem.objects.filter(condition=condition)
            .values_list("status")
            .annotate(n=Count("id"))
            .values_list("status", "n")
        )
        spend = GenerationItem.objects.filter(condition=condition).aggregate(s=Sum("cost"))["s"] or Decimal(0)
        errors = Counter(
            GenerationItem.objects.filter(condition=condition, status=Status.FAILED).values_list(
                "last_error", flat=True
            )
        ).most_common(3)
        stored = Response.objects.filter(condition=condition).count()
        latest_job = GenerationJob.objects.filter(condition=condition).order_by("-created_at").first()
        stopped = latest_job is not None and latest_job.status == GenerationJob.Status.STOPPED
        rows.append(
            {
                "condition": condition,
                "name": condition.name,
                "config": config,
                "placeholder": condition.name in placeholders,
                "slots": slots,
                "responses": stored,
                "done": counts.get(Status.DONE, 0),
                "running": counts.get(Status.RUNNING, 0),
                "pending": counts.get(Status.PENDING, 0),
                "failed": counts.get(Status.FAILED, 0),
                "cancelled": counts.get(Status.CANCELLED, 0),
                "not_started": max(slots - sum(counts.values()), 0),
                "spend": spend,
                "flagged": Response.objects.filter(
                    condition=condition, review=Response.Review.FLAGGED
                ).count(),
                "errors": errors,
                "stopped_reason": latest_job.stopped_reason if stopped else "",
                "percent": round(100 * counts.get(Status.DONE, 0) / slots) if slots else 0,
            }
        )
    return rows


def response_length_stats(*, study: Study) -> list[dict]:
    """Words per response for every condition (human baseline included): n, mean, median, SD. The seed
    study found LLM responses up to twice as long as the human ones — a confound worth reporting."""
    rows = []
    for condition in study.conditions.order_by("position", "name"):
        lengths = [
            words_count(t)
            for t in Response.objects.filter(condition=condition).values_list("text", flat=True)
        ]
        rows.append(
            {
                "condition": condition.name,
                "kind": condition.kind,
                "baseline": condition.is_baseline or condition.kind == Condition.Kind.HUMAN,
                "n": len(lengths),
                "mean": round(statistics.fmean(lengths), 1) if lengths else None,
                "median": statistics.median(lengths) if lengths else None,
                "sd": round(statistics.stdev(lengths), 1) if len(lengths) > 1 else None,
            }
        )
    return rows


PROVENANCE_COLUMNS = [
    "study",
    "condition",
    "dialogue_id",
    "sample_index",
    "response_id",
    "text",
    "source",
    "review",
    "review_flags",
    "edited",
    "provider",
    "provider_kind",
    "placeholder_reply",
    "base_url",
    "model_requested",
    "model_returned",
    "system_fingerprint",
    "provider_response_id",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "latency_ms",
    "attempts",
    "requested_at",
    "completed_at",
    "superseded_at",
    "request_json",
    "raw_response_json",
]


def provenance_rows(*, study: Study, include_superseded: bool = False):
    """One row per generated response (PROVENANCE_COLUMNS): what was asked, of which model, what came back,
    usage, cost, latency, attempts, timestamps. For exports; holds no key (only bodies were ever stored)."""
    queryset = (
        ResponseProvenance.objects.filter(response__condition__study=study)
        .select_related("response__condition", "response__prompt")
        .annotate(n_edits=Count("response__edits"))
        .order_by(
            "response__condition__position", "response__condition__name", "response__prompt_id", "created_at"
        )
    )
    if not include_superseded:
        queryset = queryset.filter(superseded_at__isnull=True)
    kinds = set(placeholder_kinds())
    for row in queryset.iterator(chunk_size=500):
        response = row.response
        yield {
            "study": study.slug,
            "condition": response.condition.name,
            "dialogue_id": response.prompt.dialogue_id,
            "sample_index": response.sample_index,
            "response_id": response.id,
            "text": response.text,
            "source": response.source,
            "review": response.review,
            "review_flags": ";".join(response.review_flags or []),
            "edited": row.n_edits > 0,
            "provider": row.provider_name,
            "provider_kind": row.provider_kind,
            "placeholder_reply": row.provider_kind in kinds,
            "base_url": row.base_url,
            "model_requested": row.model_requested,
            "model_returned": row.model_returned,
            "system_fingerprint": row.system_fingerprint,
            "provider_response_id": row.provider_response_id,
            "finish_reason": row.finish_reason,
            "input_tokens": row.input_tokens,
            "output_tokens": row.output_tokens,
            "cost_usd": f"{row.cost:.8f}",
            "latency_ms": row.latency_ms,
            "attempts": row.attempts,
            "requested_at": row.requested_at.isoformat(),
            "completed_at": row.completed_at.isoformat(),
            "superseded_at": row.superseded_at.isoformat() if row.superseded_at else "",
            "request_json": json.dumps(row.request, ensure_ascii=False, sort_keys=True),
            "raw_response_json": json.dumps(row.raw_response, ensure_ascii=False, sort_keys=True),
        }


def provenance_export(*, study: Study, path, include_superseded: bool = False) -> int:
    """Write provenance_rows to a CSV (or JSON Lines if the path ends in .jsonl). Returns the row count."""
    count = 0
    with open(path, "w", newline="", encoding="utf-8") as handle:
        if str(path).endswith(".jsonl"):
            for row in provenance_rows(study=study, include_superseded=include_superseded):
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
        else:
            writer = csv.DictWriter(handle, fieldnames=PROVENANCE_COLUMNS)
            writer.writeheader()
            for row in provenance_rows(study=study, include_superseded=include_superseded):
                writer.writerow(row)
                count += 1
    return count


def judges_of(*, study: Study) -> list[Judge]:
    """The study's judges, by name."""
    return list(Judge.objects.filter(study=study).select_related("provider").order_by("name"))


def judge_progress(*, judge: Judge, conditions: list[Condition] | None = None) -> dict:
    """How far a judge has got: ratings done / running / pending / failed (of responses × samples), spend and
    tokens so far, the most common errors of failed ratings, and the same counts per condition."""
    rows = JudgeRating.objects.filter(judge=judge)
    if conditions is not None:
        rows = rows.filter(response__condition__in=conditions)
    counts = dict(rows.order_by().values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    totals = rows.aggregate(
        spend=Sum("cost"), tokens_in=Sum("spent_input_tokens"), tokens_out=Sum("spent_output_tokens")
    )
    per_condition = {}
    for name, status, n in (
        rows.order_by()
        .values_list("response__condition__name", "status")
        .annotate(n=Count("id"))
        .values_list("response__condition__name", "status", "n")
    ):
        per_condition.setdefault(name, {})[status] = n
    slots = (
        judge_format_of(judge.study).unit_count(study=judge.study, conditions=conditions) * judge.n_samples
    )
    S = JudgeRating.Status
    return {
        "slots": slots,
        "done": counts.get(S.DONE, 0),
        "running": counts.get(S.RUNNING, 0),
        "pending": counts.get(S.PENDING, 0),
        "failed": counts.get(S.FAILED, 0),
        "not_started": max(slots - sum(counts.values()), 0),
        "spend": totals["spend"] or Decimal(0),
        "tokens_in": totals["tokens_in"] or 0,
        "tokens_out": totals["tokens_out"] or 0,
        # .order_by(): counting needs no order, and the default one joins three study rows to every rating.
        "errors": Counter(
            rows.filter(status=S.FAILED).order_by().values_list("last_error", flat=True)
        ).most_common(3),
        "error_kinds": Counter(
            rows.filter(status=S.FAILED).order_by().values_list("error_kind", flat=True)
        ).most_common(),
        "percent": round(100 * counts.get(S.DONE, 0) / slots) if slots else 0,
        "conditions": [
            {"name": name, **{s: per_condition[name].get(s, 0) for s in S.values}}
            for name in sorted(per_condition)
        ],
    }


def judge_ratings_frame(*, judge: Judge, conditions: list[Condition] | None = None):
    """The judge's stored ratings as a DataFrame: response_id, sample_index, value, condition, emotion, words.

    Only rows that are done (a value on the study's scale). This is the only way analysis reads judge ratings;
    they never enter a human statistic."""
    import pandas as pd

    rows = JudgeRating.objects.filter(judge=judge, status=JudgeRating.Status.DONE)
    if conditions is not None:
        rows = rows.filter(response__condition__in=conditions)
    records = list(
        rows.order_by("response_id", "sample_index").values_list(
            "response_id",
            "sample_index",
            "value",
            "response__condition__name",
            "response__prompt__emotion__name",
            "response__text",
        )
    )
    return pd.DataFrame(
        [
            {
                "response_id": r,
                "sample_index": s,
                "value": v,
                "condition": c,
                "emotion": e,
                "words": words_count(t),
            }
            for r, s, v, c, e, t in records
        ],
        columns=["response_id", "sample_index", "value", "condition", "emotion", "words"],
    )


def judge_rates_scale(*, study: Study) -> bool:
    """Whether the study's judges rate single responses on its scale (the judge report of analysis/judge_report.py
    calibrates those); False for a kind whose judges answer otherwise, or have none."""
    try:
        return judge_format_of(study).rates_scale
    except ValueError:
        return False


# A comparison's verdict as the pairwise frame names a choice: the reply shown as A is on the left.
_VERDICT_CHOICE = {VERDICT_A: "left", VERDICT_B: "right", VERDICT_SAME: "tie"}
VERDICT_COLUMNS = [
    "judge", "prompt_id", "left_condition", "right_condition", "choice", "both_inadequate", "sample_index",
    "left_length", "right_length",
]  # fmt: skip


def judge_verdicts_frame(*, judge: Judge):
    """A comparing judge's stored verdicts (done rows), one row per order of a pair and sample, in the pairwise
    frame's terms (kinds/pairwise/frame.py): the reply shown as A is `left`, choice left / right / tie,
    prompt_id the prompt's dialogue id, lengths in characters. The only way analysis reads them."""
    import pandas as pd
    from django.db.models.functions import Length

    rows = (
        JudgeRating.objects.filter(judge=judge, status=JudgeRating.Status.DONE, versus__isnull=False)
        .annotate(left_length=Length("response__text"), right_length=Length("versus__text"))
        .order_by("response__prompt_id", "id")
        .values_list(
            "response__prompt__dialogue_id",
            "response__condition__name",
            "versus__condition__name",
            "value",
            "both_inadequate",
            "sample_index",
            "left_length",
            "right_length",
        )  # fmt: skip
    )
    return pd.DataFrame(
        [
            (judge.name, p, lc, rc, _VERDICT_CHOICE[v], bool(b), s, ll, rl)
            for p, lc, rc, v, b, s, ll, rl in rows
        ],
        columns=VERDICT_COLUMNS,
    )


def judge_run_summary(*, judge: Judge) -> dict:
    """What a judge's run has done so far, read-only: its rows by status, the responses it rated, tokens and
    spend (USD, rows with a cost), the last rating's time and id (a new rating changes them)."""
    rows = JudgeRating.objects.filter(judge=judge)
    by_status = dict(rows.order_by().values_list("status").annotate(n=Count("id")))
    totals = rows.aggregate(
        cost=Sum("cost"), input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens")
    )
    done = rows.filter(status=JudgeRating.Status.DONE)
    last = done.order_by("-rated_at", "-id").values_list("id", "rated_at").first()
    return {
        "judge": judge.name,
        "model": judge.model,
        "provider": str(judge.provider),
        "samples_per_response": judge.n_samples,
        "done": by_status.get(JudgeRating.Status.DONE, 0),
        "pending": by_status.get(JudgeRating.Status.PENDING, 0)
        + by_status.get(JudgeRating.Status.RUNNING, 0),
        "failed": by_status.get(JudgeRating.Status.FAILED, 0),
        "responses_rated": done.values("response_id").distinct().count(),
        "cost_usd": float(totals["cost"] or Decimal(0)),
        "input_tokens": int(totals["input_tokens"] or 0),
        "output_tokens": int(totals["output_tokens"] or 0),
        "last_rating_id": last[0] if last else None,
        "last_rated_at": last[1].isoformat() if last and last[1] else None,
    }
