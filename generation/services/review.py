"""A person's review of generated responses: approve, edit (with an audit trail), regenerate."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from generation.models import GenerationItem, LLMConditionConfig, ResponseEdit, ResponseProvenance
from generation.services.dispatch import generation_dispatch
from generation.services.judging import judge_ratings_stale
from generation.services.prompts import generation_problems
from generation.services.running import SAME_TEXT_FLAG
from studies.models import Response

Status = GenerationItem.Status


def response_approve(*, response: Response) -> None:
    """Mark a flagged response as reviewed and fine (its flags stay, for the record)."""
    Response.objects.filter(id=response.id).update(review=Response.Review.APPROVED, updated_at=timezone.now())


def response_edit(*, response: Response, text: str, user, note: str = "") -> ResponseEdit | None:
    """Replace a response's text, keeping who changed what and when (ResponseEdit). The response becomes
    source=edited and approved; judges' ratings of the old text go back to pending. No-op (None) if the text is unchanged; ValidationError if it is empty."""
    text = (text or "").strip()
    if not text:
        raise ValidationError("A response cannot be empty.")
    with transaction.atomic():
        locked = Response.objects.select_for_update().get(id=response.id)
        if locked.text == text:
            return None
        edit = ResponseEdit.objects.create(
            response=locked,
            editor=user,
            editor_username=getattr(user, "username", "") or "",
            before=locked.text,
            after=text,
            note=note,
        )
        locked.text = text
        locked.source = Response.Source.EDITED
        locked.review = Response.Review.APPROVED
        locked.save(update_fields=["text", "source", "review", "updated_at"])
        judge_ratings_stale(response=locked)  # judges rated the old text: rate again
    return edit


def same_text_repeat(*, response: Response, item: GenerationItem) -> str:
    """Why regenerating would only return the same text again ("" if it may not): the last regeneration gave
    the old text back and the condition still sends the seed that produced it."""
    if SAME_TEXT_FLAG not in (response.review_flags or []):
        return ""
    seed = (
        LLMConditionConfig.objects.filter(condition_id=item.condition_id)
        .values_list("seed", flat=True)
        .first()
    )
    request = (
        ResponseProvenance.objects.filter(response=response, superseded_at__isnull=True)
        .values_list("request", flat=True)
        .first()
        or {}
    )
    sent = request.get("seed", request.get("_seed_not_sent"))
    if seed is None or sent != seed:
        return ""
    return (
        f"Response {response.id}: the provider returned the same text again with seed {seed}, so asking again "
        "would give it once more. Change the condition's seed (or clear it) or edit the text."
    )


def response_regenerate(*, response: Response) -> None:
    """Ask the provider again for this response's slot; the new text replaces the old when it arrives (the old
    provenance is kept, marked superseded). Refused (ValidationError) for a response participants have seen,
    one not generated here, one whose generation is running, or one whose last regeneration gave the same text
    back under the seed the condition still sends (see `same_text_repeat`)."""
    if response.assignments.exists():
        raise ValidationError(
            f"Response {response.id} has been shown to participants; it cannot be regenerated."
        )
    with transaction.atomic():
        item = GenerationItem.objects.select_for_update().filter(response=response).first()
        if item is None:
            raise ValidationError(
                f"Response {response.id} was not generated here, so it cannot be regenerated."
            )
        if item.status in (Status.RUNNING, Status.PENDING):
            raise ValidationError(f"Response {response.id} is already being generated.")
        repeat = same_text_repeat(response=response, item=item)
        if repeat:
            raise ValidationError(repeat)
        problems = generation_problems(conditions=[item.condition])
        if problems:
            raise ValidationError(" ".join(problems))
        GenerationItem.objects.filter(id=item.id).update(
            status=Status.PENDING,
            regenerate=True,
            attempts=0,
            last_error="",
            error_kind="",
            updated_at=timezone.now(),
        )
        transaction.on_commit(lambda: generation_dispatch(item_ids=[item.id]))
