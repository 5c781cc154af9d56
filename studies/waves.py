"""Copies and follow-up waves of a study.

* `study_copy`: a new draft with the same design (texts participants read, questionnaire and kind settings,
  scale, checks, codes, conditions with their LLM configurations through the condition hooks of
  studies/design.py, the prompts and the imported responses); generated responses are generated again. Neither
  takes what was written for an LLM judge (`Response.Source.JUDGE_INPUT`, e.g. a chat's transcripts).
* `study_extend`: a follow-up wave of a frozen study: the same prompts; the new LLM conditions (their
  configurations added in the admin, or copied from a parent condition); and a re-rating condition that shows
  the parent's baseline responses again to a share of the parent's baseline participants (rater drift) — or,
  for a kind whose waves keep their conditions (`StudyKind.wave_keeps_conditions`: pairwise), every parent
  condition with its replies, the new conditions compared with them and `rerate_share` of the pairs re-asking
  the parent's comparisons (rater drift). The
  wave links to its parent; by default a participant of one study of the family cannot join another.
"""

from __future__ import annotations

import math

from django.db import transaction
from django.db.models import Q

from .design import CONDITION_HOOKS, FROZEN_CHECK_FIELDS, FROZEN_PAIR_CHECK_FIELDS, is_frozen
from .kinds import kind_of
from .models import (
    AttentionCheck,
    Condition,
    PairAttentionCheck,
    Participant,
    Prompt,
    Response,
    Study,
    StudySituation,
)

DEFAULT_RERATE_SHARE = 0.10
RERATE_SUFFIX = "_rerate"
# What a copy does not take from its source: identity, lifecycle, family.
NOT_COPIED = {"id", "slug", "title", "state", "created_at", "launched_at", "closed_at", "parent"}


class StudyCopyError(Exception):
    """The copy or wave cannot be made as asked; nothing was written."""


def _study_fields(source: Study) -> dict:
    return {
        f.attname: getattr(source, f.attname)
        for f in Study._meta.concrete_fields
        if f.name not in NOT_COPIED and f.attname not in NOT_COPIED
    }


def _check_new_slug(new_slug: str) -> None:
    if not new_slug or not new_slug.replace("-", "").replace("_", "").isalnum():
        raise StudyCopyError(f"'{new_slug}' is not a valid slug (letters, digits, - and _)")
    if Study.objects.filter(slug=new_slug).exists():
        raise StudyCopyError(f"a study '{new_slug}' already exists")


def _copy_kind_settings(source: Study, target: Study) -> None:
    settings = kind_of(source).settings(source)
    if settings is not None and settings.pk is not None:
        settings.pk = None
        settings.id = None
        settings.study = target
        settings.save()
    StudySituation.objects.bulk_create(
        [StudySituation(study=target, situation_id=s.situation_id) for s in source.study_situations.all()]
    )


def _copy_prompts(source: Study, target: Study) -> dict[int, Prompt]:
    """The source's prompts on the target, same ids and texts; source prompt id -> new prompt. Not a prompt that
    holds a text written for an LLM judge (a chat's transcript, `Response.Source.JUDGE_INPUT`): it is one of the
    source's conversations, not material participants are shown."""
    prompts = list(source.prompts.exclude(responses__source=Response.Source.JUDGE_INPUT).order_by("id"))
    created = Prompt.objects.bulk_create(
        [
            Prompt(
                study=target,
                dialogue_id=p.dialogue_id,
                emotion_id=p.emotion_id,
                situation=p.situation,
                speaker_utterance=p.speaker_utterance,
            )
            for p in prompts
        ]
    )
    return {old.pk: new for old, new in zip(prompts, created, strict=True)}


def _copy_responses(
    source: Condition, target: Condition, prompts: dict[int, Prompt], *, generated: bool
) -> int:
    """The source condition's responses on the target: what participants are shown (the generated ones only when
    `generated`), never a text written for an LLM judge (their prompts are not copied either)."""
    rows = source.responses.exclude(source=Response.Source.JUDGE_INPUT)
    if not generated:
        rows = rows.exclude(source=Response.Source.GENERATED)
    created = Response.objects.bulk_create(
        [
            Response(
                prompt=prompts[r.prompt_id],
                condition=target,
                sample_index=r.sample_index,
                text=r.text,
                source=r.source,
                review=r.review,
                review_flags=r.review_flags,
            )
            for r in rows
        ]
    )
    return len(created)


def _condition_copy(source: Condition, study: Study, **overrides) -> Condition:
    fields = {
        "name": source.name,
        "label": source.label,
        "kind": source.kind,
        "is_baseline": source.is_baseline,
        "quota": source.quota,
        "position": source.position,
        "enrolling": source.enrolling,
        **overrides,
    }
    condition = Condition.objects.create(study=study, **fields)
    for hook in CONDITION_HOOKS.values():
        hook.copy(source, condition)
    return condition


def _copy_checks(source: Study, target: Study) -> None:
    """The source's attention checks (rating) and known-answer pairs (pairwise), their frozen fields copied."""
    for model, fields in (
        (AttentionCheck, FROZEN_CHECK_FIELDS),
        (PairAttentionCheck, FROZEN_PAIR_CHECK_FIELDS),
    ):
        checks = model.objects.filter(study=source).order_by("after_item", "id")
        model.objects.bulk_create([model(study=target, **{f: getattr(c, f) for f in fields}) for c in checks])


def study_copy(*, source: Study, new_slug: str, title: str = "") -> Study:
    """A new draft with `source`'s design (see the module docstring). All or nothing."""
    _check_new_slug(new_slug)
    with transaction.atomic():
        study = Study.objects.create(
            slug=new_slug,
            title=title or f"{source.title} (copy)",
            state=Study.State.DRAFT,
            **_study_fields(source),
        )
        _copy_kind_settings(source, study)
        _copy_checks(source, study)
        prompts = _copy_prompts(source, study)
        for condition in source.conditions.order_by("position", "name"):
            copy = _condition_copy(condition, study)
            _copy_responses(condition, copy, prompts, generated=False)
    return study


def parent_baseline(parent: Study) -> Condition:
    baseline = (
        parent.conditions.filter(is_baseline=True).first() or parent.conditions.filter(name="human").first()
    )
    if baseline is None:
        raise StudyCopyError(f"study '{parent.slug}' has no baseline condition to compare a wave with")
    return baseline


def rerate_quota(parent: Study, baseline: Condition, share: float) -> int:
    """Participants who re-rate the parent's baseline: `share` of those who rated it (of its quota when none)."""
    rated = Participant.objects.filter(study=parent, condition=baseline, is_preview=False).exclude(
        status__in=[
            Participant.Status.RETURNED,
            Participant.Status.TIMED_OUT,
            Participant.Status.SCREENED_OUT,
        ]
    )
    n = rated.count() or baseline.effective_quota
    return max(1, math.ceil(share * n))


def study_extend(
    *,
    parent: Study,
    new_slug: str,
    conditions: list[str],
    rerate_share: float = DEFAULT_RERATE_SHARE,
    like: str | None = None,
    title: str = "",
) -> Study:
    """A follow-up wave of `parent` (a draft): see the module docstring. `like` names a parent LLM condition
    whose configuration each new condition starts from (change the model in the admin); without it the new
    conditions get their configuration in the admin. All or nothing."""
    if not is_frozen(parent):
        raise StudyCopyError(f"study '{parent.slug}' is a draft: launch it (or copy it) before extending it")
    if parent.parent_id is not None:
        root = family_root(parent)
        raise StudyCopyError(
            f"'{parent.slug}' is itself a wave: extend the family's first study '{root.slug}' (its baseline is "
            "the one every wave is compared with)"
        )
    if not conditions:
        raise StudyCopyError("name at least one new condition (--condition NAME)")
    if not 0 < rerate_share <= 1:
        raise StudyCopyError("the re-rating share must be above 0 and at most 1 (e.g. 0.1 for 10 %)")
    taken = set(parent.conditions.values_list("name", flat=True))
    baseline = parent_baseline(parent)
    clash = sorted({*conditions} & {*taken, baseline.name + RERATE_SUFFIX}) or sorted(
        n for n in set(conditions) if conditions.count(n) > 1
    )
    if clash:
        raise StudyCopyError(f"condition name(s) already used in the family: {', '.join(clash)}")
    template = None
    if like is not None:
        template = parent.conditions.filter(name=like, kind=Condition.Kind.LLM).first()
        if template is None:
            raise StudyCopyError(f"study '{parent.slug}' has no LLM condition '{like}' to start from")
    _check_new_slug(new_slug)
    with transaction.atomic():
        fields = {**_study_fields(parent), "rerate_share": rerate_share}
        wave = Study.objects.create(
            slug=new_slug,
            title=title or f"{parent.title}: wave",
            state=Study.State.DRAFT,
            parent=parent,
            **fields,
        )
        _copy_kind_settings(parent, wave)
        _copy_checks(parent, wave)
        prompts = _copy_prompts(parent, wave)
        if kind_of(parent).wave_keeps_conditions:  # every stored condition, to compare the new ones with
            kept = list(parent.conditions.order_by("position", "name"))
            for condition in kept:
                _copy_responses(condition, _condition_copy(condition, wave), prompts, generated=True)
            first = max((c.position for c in kept), default=0) + 1
        else:
            rerate = _condition_copy(
                baseline,
                wave,
                name=baseline.name + RERATE_SUFFIX,
                label=f"{baseline.label or baseline.name} (re-rated)",
                is_baseline=False,
                quota=rerate_quota(parent, baseline, rerate_share),
                position=0,
                enrolling=True,
            )
            _copy_responses(baseline, rerate, prompts, generated=True)
            first = 1
        for position, name in enumerate(conditions, start=first):
            if template is not None:
                _condition_copy(template, wave, name=name, label=name, is_baseline=False, position=position,
                                quota=baseline.effective_quota, enrolling=True)  # fmt: skip
            else:
                Condition.objects.create(
                    study=wave, name=name, label=name, kind=Condition.Kind.LLM, position=position,
                    quota=baseline.effective_quota,
                )  # fmt: skip
    return wave


# --- the family --------------------------------------------------------------------------------------------


def family_root(study: Study) -> Study:
    seen = {study.pk}
    while study.parent_id is not None and study.parent_id not in seen:
        seen.add(study.parent_id)
        study = Study.objects.get(pk=study.parent_id)
    return study


def family_members(study: Study) -> list[Study]:
    """The root and every wave below it, oldest first."""
    root = family_root(study)
    members, frontier = [root], [root.pk]
    while frontier:
        children = list(Study.objects.filter(parent_id__in=frontier).order_by("created_at", "id"))
        members += children
        frontier = [c.pk for c in children]
    return members


def seen_in_family(study: Study, external_id: str) -> bool:
    """True when `study` is a wave that keeps its family's participants out and `external_id` took part in
    another study of its family."""
    if not study.family_exclusive or study.parent_id is None:
        return False  # a wave keeps out its family's people; the parent was run first
    others = [s.pk for s in family_members(study) if s.pk != study.pk]
    return Participant.objects.filter(
        Q(study_id__in=others), external_id=external_id, is_preview=False
    ).exists()
