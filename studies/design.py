"""A study's frozen design: what was decided before the first participant, as canonical JSON with its SHA-256.

`design_build` reads the study as it is now (conditions; the prompt sample with ids and a SHA-256 of each text;
each LLM configuration, described by the hook generation registers; the scale; items per participant;
attention checks; quotas; exclusion rules; the planned analysis; the hypotheses; the kind's own settings).
`design_freeze` writes it as a StudyDesign row: at launch (studies.services.study_launch) and at the end of an
import of a finished study. From then on the study's design is frozen: `design_edit_refuse` (called by the
model signals below, the admin forms and generation's own signal) refuses any edit of a frozen field, except
inside `study_amend`, which records the change (who, when, why, old → new) and writes a new version.

Canonical JSON: `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`, hashed as UTF-8.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models.signals import pre_delete, pre_save
from django.dispatch import receiver

from .kinds import kind_of
from .kinds.base import AnalysisPlan
from .models import (
    AttentionCheck,
    Condition,
    PairAttentionCheck,
    Prompt,
    Study,
    StudyAmendment,
    StudyDesign,
)
from .planned_analysis import planned_analysis_normalise
from .rating_settings import STUDY_SETTINGS, study_setting_normalise

FORMAT = 1

# Study fields frozen at launch (the kind's settings and the study's conditions, prompts and checks too).
FROZEN_STUDY_FIELDS = (
    "kind",
    "consent_text",
    "instructions_text",
    "worked_examples",
    "scale",
    "items_per_participant",
    "quota_per_condition",
    "attention_check_max_failures",
    "seed",
    "exclusion_rules",
    "hypotheses",
    "planned_analysis",
    "rerate_share",
    "family_exclusive",
    # The authenticity traps: switched on or off mid-study, they would detect differently over time.
    "trap_hidden_instruction",
    "trap_repeat_items",
    "trap_picture",
)
FROZEN_CONDITION_FIELDS = ("name", "label", "kind", "is_baseline", "quota")
FROZEN_CHECK_FIELDS = (
    "emotion_label", "situation", "speaker_utterance", "response_text", "expected_value", "after_item",
    "after_item_max",
)  # fmt: skip
FROZEN_PROMPT_FIELDS = ("dialogue_id", "emotion_id", "situation", "speaker_utterance")
FROZEN_PAIR_CHECK_FIELDS = (
    "emotion_label", "situation", "speaker_utterance", "good_reply", "poor_reply", "after_item",
)  # fmt: skip


class FrozenDesignError(ValidationError):
    """An edit of a frozen field of a launched study, outside an amendment."""


class ConditionDeleteError(ValidationError):
    """Deleting a condition that has responses on its own (not with its whole study)."""


class AmendmentError(Exception):
    """The amendment cannot be recorded as asked (unknown field, bad value, no change, no reason)."""


# --- hooks: what other apps add to a condition's design (generation: the LLM configuration) ----------------


@dataclass(frozen=True)
class ConditionHook:
    """`describe(conditions) -> {condition id: JSON-ready dict}` for those it knows; `copy(source, target)` copies
    its rows of one condition onto another (study_copy, study_extend); `busy(study ids) -> the ids of those
    with work in progress for a condition` (generation: items pending or running), for the researcher's home;
    `placeholders(study) -> names of its conditions whose stimuli are placeholders, not real ones` (generation:
    the test model's), which a study launches with only as a confirmed dry run (studies.services.study_launch)."""

    describe: Callable[[list[Condition]], dict[int, dict]]
    copy: Callable[[Condition, Condition], None]
    busy: Callable[[list[int]], set[int]] | None = None
    placeholders: Callable[[Study], list[str]] | None = None


CONDITION_HOOKS: dict[str, ConditionHook] = {}


def condition_hook_register(name: str, hook: ConditionHook) -> None:
    """Called once per app in its AppConfig.ready (generation registers "llm"); re-registering replaces."""
    CONDITION_HOOKS[name] = hook


# --- building and hashing ----------------------------------------------------------------------------------


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(design: dict) -> str:
    return json.dumps(design, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def design_sha256(design: dict) -> str:
    return text_sha256(canonical_json(design))


def exclusion_rules_of(study: Study) -> Any:
    """The study's declared exclusion rules (Study.exclusion_rules): what its analysis applies by default."""
    return study.exclusion_rules


def planned_analysis_of(study: Study) -> tuple[dict, str | None, AnalysisPlan | None]:
    """The analysis the study planned, with every key present, the SHA-256 of the design it comes from, and the
    kind's declared tests (`analysis_plan_of`): the current frozen version (amendments included) once the study is
    launched; the study's field, None and the kind's declaration while it is a draft. Bad data in a draft gives
    ValidationError."""
    # Only those keys and the hash, in one query: a design holds every prompt's hash (hundreds of kB for the
    # published study), and the dashboard's status poll reads this.
    current = (
        StudyDesign.objects.filter(study_id=study.pk)
        .order_by("-created_at", "-id")
        .values_list("design__planned_analysis", "sha256", "design__analysis_plan")
        .first()
        if study.pk
        else None
    )
    if current is not None:
        return planned_analysis_normalise(current[0]), current[1], _plan(study, current[2])
    return planned_analysis_normalise(study.planned_analysis), None, kind_of(study).analysis_plan


def _plan(study: Study, frozen: dict | None) -> AnalysisPlan | None:
    """A frozen design's declared tests; the kind's for a design frozen before the kinds declared them."""
    return AnalysisPlan.from_json(frozen) if frozen else kind_of(study).analysis_plan


def analysis_plan_of(study: Study) -> AnalysisPlan | None:
    """The primary and secondary tests the study's analysis runs: as frozen in its design once it is launched (a
    design frozen before the kinds declared their plan reads the kind's), the kind's declaration while it is a
    draft. The pre-registration prints it; the kind's analysis reports its primary test as primary."""
    frozen = (
        StudyDesign.objects.filter(study_id=study.pk)
        .order_by("-created_at", "-id")
        .values_list("design__analysis_plan", flat=True)
        .first()
        if study.pk
        else None
    )
    return _plan(study, frozen)


def design_build(study: Study) -> dict:
    """The study's design as it stands now, JSON-ready (see the module docstring)."""
    conditions = list(study.conditions.order_by("position", "name"))
    described: dict[str, dict[int, dict]] = {
        name: hook.describe(conditions) for name, hook in sorted(CONDITION_HOOKS.items())
    }
    condition_rows = []
    for c in conditions:
        row = {f: getattr(c, f) for f in FROZEN_CONDITION_FIELDS}
        row["quota_effective"] = c.effective_quota
        for name, by_id in described.items():
            row[name] = by_id.get(c.pk)
        condition_rows.append(row)
    prompts = [
        {
            "dialogue_id": p.dialogue_id,
            "emotion": p.emotion.name,
            "situation_sha256": text_sha256(p.situation),
            "speaker_utterance_sha256": text_sha256(p.speaker_utterance),
        }
        for p in Prompt.objects.filter(study=study).select_related("emotion").order_by("dialogue_id")
    ]
    checks = [
        # a check without a range leaves `after_item_max` out, so designs frozen before ranges keep their hash
        {
            f: getattr(check, f)
            for f in FROZEN_CHECK_FIELDS
            if f != "after_item_max" or check.after_item_max is not None
        }
        for check in study.attention_checks.order_by("after_item", "id")
    ]
    fields = {f: getattr(study, f) for f in FROZEN_STUDY_FIELDS}
    parent = getattr(study, "parent", None)
    pair_checks = [
        {f: getattr(check, f) for f in FROZEN_PAIR_CHECK_FIELDS}
        for check in PairAttentionCheck.objects.filter(study=study).order_by("after_item", "id")
    ]
    # Only where a study has known-answer pairs (pairwise studies): every other design reads as before.
    known_answer_pairs = {"known_answer_pairs": pair_checks} if pair_checks else {}
    plan = kind_of(study).analysis_plan
    return {
        "format": FORMAT,
        "study": study.slug,
        "fields": fields,
        "kind_settings": kind_of(study).settings_values(study),
        "conditions": condition_rows,
        "quotas": {
            "per_condition_default": study.quota_per_condition,
            "by_condition": {c.name: c.effective_quota for c in conditions},
        },
        "prompts": {"count": len(prompts), "items": prompts},
        "attention_checks": checks,
        **known_answer_pairs,
        "exclusion_rules": exclusion_rules_of(study),
        "planned_analysis": study.planned_analysis,
        "analysis_plan": plan.as_json() if plan is not None else None,
        "hypotheses": study.hypotheses,
        "parent": _parent_reference(parent),
    }


def _parent_reference(parent: Study | None) -> dict | None:
    if parent is None:
        return None
    current = design_current(parent)
    return {"study": parent.slug, "design_sha256": current.sha256 if current else None}


def design_current(study: Study) -> StudyDesign | None:
    """The newest frozen version of the study's design (None: not frozen yet)."""
    return StudyDesign.objects.filter(study=study).order_by("-created_at", "-id").first()


def design_freeze(study: Study, *, reason: str) -> StudyDesign:
    """Writes the study's design as it stands now as a new version."""
    design = json.loads(canonical_json(design_build(study)))
    canonical = canonical_json(design)
    return StudyDesign.objects.create(
        study=study, design=design, canonical=canonical, sha256=text_sha256(canonical), reason=reason
    )


# --- the guard ---------------------------------------------------------------------------------------------

_AMENDING: contextvars.ContextVar[bool] = contextvars.ContextVar("design_amending", default=False)


@contextmanager
def _amending() -> Iterator[None]:
    token = _AMENDING.set(True)
    try:
        yield
    finally:
        _AMENDING.reset(token)


def is_frozen(study: Study | None) -> bool:
    return bool(study is not None and study.pk and StudyDesign.objects.filter(study_id=study.pk).exists())


def frozen_message(study: Study, what: str) -> str:
    current = design_current(study)
    sha = current.sha256[:12] if current else "?"
    return (
        f"{what} of study '{study.slug}' is part of its frozen design (sha256 {sha}…, frozen since it was "
        f"launched, now {study.state}). Record an amendment instead (admin: “Amend the design”; terminal: "
        f"manage.py study_amend), or run new conditions as a follow-up wave (manage.py study_extend)."
    )


def design_edit_refuse(study: Study, what: str) -> None:
    """Raises FrozenDesignError when `study`'s design is frozen and no amendment is being recorded."""
    if not _AMENDING.get() and is_frozen(study):
        raise FrozenDesignError(frozen_message(study, what))


def changed_fields(instance, fields: tuple[str, ...]) -> list[str]:
    """The `fields` whose values differ from the stored row (all of them for a new row)."""
    if instance.pk is None:
        return list(fields)
    stored = type(instance).objects.filter(pk=instance.pk).values(*fields).first()
    if stored is None:
        return list(fields)
    return [f for f in fields if stored[f] != getattr(instance, f)]


@receiver(pre_save, sender=Study, dispatch_uid="design_guard_study")
def _guard_study(sender, instance: Study, raw=False, update_fields=None, **kwargs):
    if raw or instance.pk is None:
        return
    checked = (
        FROZEN_STUDY_FIELDS
        if update_fields is None
        else tuple(f for f in FROZEN_STUDY_FIELDS if f in update_fields)
    )
    changed = changed_fields(instance, checked) if checked else []
    if changed:
        design_edit_refuse(instance, "The field(s) " + ", ".join(changed))


@receiver(pre_save, sender=Condition, dispatch_uid="design_guard_condition")
def _guard_condition(sender, instance: Condition, raw=False, **kwargs):
    if raw:
        return
    if instance.pk is None:
        design_edit_refuse(instance.study, f"Adding the condition '{instance.name}'")
    elif changed := changed_fields(instance, FROZEN_CONDITION_FIELDS):
        design_edit_refuse(instance.study, f"The condition '{instance.name}' ({', '.join(changed)})")


@receiver(pre_save, sender=AttentionCheck, dispatch_uid="design_guard_check")
def _guard_check(sender, instance: AttentionCheck, raw=False, **kwargs):
    if not raw and changed_fields(instance, FROZEN_CHECK_FIELDS):
        design_edit_refuse(instance.study, "The attention checks")


@receiver(pre_save, sender=Prompt, dispatch_uid="design_guard_prompt")
def _guard_prompt(sender, instance: Prompt, raw=False, **kwargs):
    if not raw and changed_fields(instance, FROZEN_PROMPT_FIELDS):
        design_edit_refuse(instance.study, "The prompt sample")


@receiver(pre_save, sender=PairAttentionCheck, dispatch_uid="design_guard_pair_check")
def _guard_pair_check(sender, instance: PairAttentionCheck, raw=False, **kwargs):
    if not raw and (instance.pk is None or changed_fields(instance, FROZEN_PAIR_CHECK_FIELDS)):
        design_edit_refuse(instance.study, "The known-answer pairs")


def _guard_kind_settings(sender, instance, raw=False, **kwargs):
    """A launched study's kind settings change only by an amendment; a study without its row reads the defaults,
    so a row created after launch may only hold the defaults."""
    if raw:
        return
    fields = [f for f in sender._meta.concrete_fields if f.name not in {"id", "study"}]
    if instance.pk is None:
        changed = [f.attname for f in fields if getattr(instance, f.attname) != f.get_default()]
    else:
        changed = changed_fields(instance, tuple(f.attname for f in fields))
    if changed:
        design_edit_refuse(instance.study, "The study kind's settings")


def kind_settings_guard_connect(kind) -> None:
    """A registered kind's own settings (`StudyKind.settings_model`) frozen with the design: called by the kind's
    app once it is registered (studies/kinds/app.py)."""
    if kind.settings_model is not None:
        pre_save.connect(
            _guard_kind_settings,
            sender=kind.settings_model,
            dispatch_uid=f"design_guard_kind_settings:{kind.name}",
        )


def deleted_with_study(origin) -> bool:
    """Whether a pre_delete's `origin` is the deletion of whole studies (which the admin lists before it goes)."""
    return isinstance(origin, Study) or getattr(origin, "model", None) is Study


@receiver(pre_delete, sender=Prompt, dispatch_uid="design_guard_prompt_delete")
def _guard_prompt_delete(sender, instance: Prompt, origin=None, **kwargs):
    """A launched study's prompt goes only with its study: on its own it would take its responses and their
    ratings with it, and change the frozen prompt sample."""
    if not deleted_with_study(origin):
        design_edit_refuse(
            instance.study, f"Deleting the prompt '{instance.dialogue_id}' (with its responses)"
        )


@receiver(pre_delete, sender=AttentionCheck, dispatch_uid="design_guard_check_delete")
def _guard_check_delete(sender, instance: AttentionCheck, origin=None, **kwargs):
    if not deleted_with_study(origin):
        design_edit_refuse(instance.study, "Deleting an attention check")


@receiver(pre_delete, sender=PairAttentionCheck, dispatch_uid="design_guard_pair_check_delete")
def _guard_pair_check_delete(sender, instance: PairAttentionCheck, origin=None, **kwargs):
    if not deleted_with_study(origin):
        design_edit_refuse(instance.study, "Deleting a known-answer pair")


@receiver(pre_delete, sender=Condition, dispatch_uid="design_guard_condition_delete")
def _guard_condition_delete(sender, instance: Condition, origin=None, **kwargs):
    """Nothing deleted silently: a condition with responses (and their generation records and spend) goes only
    with its whole study, whose deletion lists everything it takes."""
    if deleted_with_study(origin):
        return
    design_edit_refuse(instance.study, f"Deleting the condition '{instance.name}'")
    n = instance.responses.count()
    if n:
        raise ConditionDeleteError(
            f"Condition '{instance.name}' of study '{instance.study.slug}' has {n} response(s); deleting it would "
            "delete them with their generation records and spend. Switch it off instead (enrolling), or delete "
            "its responses first if they really must go."
        )


# --- amendments --------------------------------------------------------------------------------------------


def kind_settings_amendable(study: Study) -> tuple[str, ...]:
    """The fields of the study's kind's own settings (`StudyKind.settings_model`) amendable like Study's: its
    plain values (a relation, such as a questionnaire's instrument, is not)."""
    model = kind_of(study).settings_model
    if model is None:
        return ()
    return tuple(
        f.name for f in model._meta.concrete_fields if f.name not in {"id", "study"} and not f.is_relation
    )


def _value_clean(study: Study, field: str, value: Any, *, on=None) -> Any:
    on = study if on is None else on
    model_field = type(on)._meta.get_field(field)
    try:
        clean = model_field.clean(model_field.to_python(value), on)
        if field in STUDY_SETTINGS:  # a JSON setting: its one validator, as Study.clean runs it
            clean = study_setting_normalise(study, field, clean)
        return clean
    except ValidationError as exc:
        raise AmendmentError(f"{field}: " + "; ".join(exc.messages)) from None


def study_amend(*, study: Study, field: str, value: Any, reason: str, author: str) -> StudyAmendment:
    """Changes one frozen field of a launched study and records it (who, when, why, old → new, the hash before
    and after); the design gets a new version. All or nothing."""
    own = kind_settings_amendable(study)
    if (field not in FROZEN_STUDY_FIELDS and field not in own) or field == "kind":
        allowed = ", ".join(f for f in (*FROZEN_STUDY_FIELDS, *own) if f != "kind")
        raise AmendmentError(f"'{field}' cannot be amended: choose one of {allowed}")
    if not reason.strip():
        raise AmendmentError("an amendment needs a reason (why the frozen design changes)")
    if not author.strip():
        raise AmendmentError("an amendment needs an author")
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        before = design_current(study)
        if before is None:
            raise AmendmentError(
                f"study '{study.slug}' is a draft: its design is not frozen yet, edit it directly"
            )
        # A field of the kind's own settings is amended on its row (created with the defaults when missing).
        target = kind_of(study).settings(study) if field in own else study
        new = _value_clean(study, field, value, on=target)
        old = getattr(target, field)
        if old == new:
            raise AmendmentError(f"{field} already has this value: nothing to amend")
        setattr(target, field, new)
        with _amending():
            target.save(**({"update_fields": [field]} if target.pk is not None else {}))
        after = design_freeze(study, reason=f"amendment of {field}")
        return StudyAmendment.objects.create(
            study=study,
            field=field,
            old_value=json.loads(canonical_json(old)),
            new_value=json.loads(canonical_json(new)),
            reason=reason.strip(),
            author=author.strip(),
            sha256_before=before.sha256,
            sha256_after=after.sha256,
        )
