"""Writing a parsed corpus into a draft study, in one transaction (`corpus_import`)."""

from __future__ import annotations

from django.db import transaction

from ..kinds import kind_of
from ..models import Condition, Emotion, Prompt, Response, Study
from ..reply_review import same_replies_flag
from .parse import (
    BULK_BATCH,
    ED_RAW_FORMAT,
    HUMAN_CONDITION,
    CorpusImportError,
    ImportProblem,
    ImportResult,
    ProgressCallback,
    corpus_parse,
    corpus_sample,
)


def emotions_by_name() -> dict[str, Emotion]:
    return {e.name.lower(): e for e in Emotion.objects.all()}


def _refuse_kind_without_corpus(study: Study) -> None:
    """Prompts and responses are what a kind with `corpus_import` shows; another kind's study has no use for them."""
    if not kind_of(study).corpus_import:
        raise CorpusImportError(
            [ImportProblem(f"study '{study.slug}' is a {study.kind} study: its kind takes no corpus")]
        )


def _refuse_non_draft(study: Study) -> None:
    if study.state != Study.State.DRAFT:
        raise CorpusImportError(
            [
                ImportProblem(
                    f"study '{study.slug}' is {study.state}: a corpus can only be imported into a draft"
                )
            ]
        )


def prompts_unsaved(study: Study, parsed, emotions: dict) -> list[Prompt]:
    """The Prompt rows (unsaved) of parsed prompts, their emotions looked up by name in `emotions`."""
    return [
        Prompt(
            study=study,
            dialogue_id=p.dialogue_id,
            emotion=emotions[p.emotion],
            situation=p.situation,
            speaker_utterance=p.speaker_utterance,
        )
        for p in parsed
    ]


def conditions_ensure(study: Study, names: list[str]) -> dict[str, Condition]:
    existing = {c.name: c for c in study.conditions.all()}
    has_baseline = any(c.is_baseline for c in existing.values())
    base = max((c.position for c in existing.values()), default=-1) + 1
    for offset, name in enumerate(names):
        if name in existing:
            continue
        human = name == HUMAN_CONDITION
        existing[name] = Condition.objects.create(
            study=study,
            name=name,
            label=name.replace("_", " ").capitalize() if human else name,
            kind=Condition.Kind.HUMAN if human else Condition.Kind.LLM,
            is_baseline=human and not has_baseline,
            position=base + offset,
        )
    return existing


def progress_tick(progress: ProgressCallback | None, stage: str, done: int, total: int) -> None:
    if progress is not None:
        progress(stage, done, total)


def corpus_import(
    *,
    study_slug: str,
    data: bytes,
    sample: int | None = None,
    seed: int = 0,
    conditions: list[str] | None = None,
    replace: bool = False,
    dry_run: bool = False,
    progress: ProgressCallback | None = None,
) -> ImportResult:
    """Import prompts and their responses into a draft study (created, as a draft, when the slug is new).

    Guarantees: either every prompt and response of the file (or of the balanced sample) is written, or nothing
    is (the study and its conditions included). Refused, with row and column: unreadable or malformed files,
    unknown emotions, dialogue ids already in the study (unless ``replace``, which first deletes the study's
    prompts, responses and staff-preview participants), and any study that is not a draft. With ``dry_run``
    the whole import runs and is then rolled back: the answer says what would be imported.
    """
    existing_study = Study.objects.filter(slug=study_slug).first()
    if existing_study is not None:
        _refuse_non_draft(existing_study)
        _refuse_kind_without_corpus(existing_study)
    emotions = emotions_by_name()
    corpus = corpus_parse(data=data, conditions=conditions, known_emotions=set(emotions))
    prompts = (
        corpus_sample(prompts=corpus.prompts, n=sample, seed=seed) if sample is not None else corpus.prompts
    )

    with transaction.atomic():
        study, created = Study.objects.get_or_create(
            slug=study_slug, defaults={"title": study_slug.replace("-", " ").capitalize()}
        )
        study = Study.objects.select_for_update().get(pk=study.pk)
        _refuse_non_draft(study)  # again, under the lock: a launch may have happened meanwhile
        _refuse_kind_without_corpus(study)
        replaced = 0
        if replace:
            study.participants.filter(is_preview=True).delete()
            if study.participants.exists():
                raise CorpusImportError(
                    [ImportProblem(f"study '{study.slug}' has participants: cannot replace")]
                )
            replaced = study.prompts.count()
            study.prompts.all().delete()  # their responses go with them
        else:
            already = dict(
                study.prompts.filter(dialogue_id__in=[p.dialogue_id for p in prompts]).values_list(
                    "dialogue_id", "id"
                )
            )
            if already:
                id_column = "conv_id" if corpus.format == ED_RAW_FORMAT else "dialog_id"
                raise CorpusImportError(
                    [
                        ImportProblem(
                            f"dialogue id {p.dialogue_id!r} is already in study '{study.slug}' "
                            "(use replace to import the corpus afresh)",
                            row=p.row,
                            column=id_column,
                        )
                        for p in prompts
                        if p.dialogue_id in already
                    ]
                )
        condition_rows = conditions_ensure(study, corpus.conditions)
        total = len(prompts)
        created_prompts = []
        for start in range(0, total, BULK_BATCH):
            batch = prompts[start : start + BULK_BATCH]
            created_prompts += Prompt.objects.bulk_create(prompts_unsaved(study, batch, emotions))
            progress_tick(progress, "prompts", len(created_prompts), total)
        responses = [
            Response(
                prompt=prompt_row,
                condition=condition_rows[name],
                text=text,
                source=Response.Source.CORPUS,
            )
            for parsed, prompt_row in zip(prompts, created_prompts, strict=True)
            for name, text in parsed.responses.items()
        ]
        for start in range(0, len(responses), BULK_BATCH):
            Response.objects.bulk_create(responses[start : start + BULK_BATCH])
            progress_tick(progress, "responses", min(start + BULK_BATCH, len(responses)), len(responses))
        same_replies_flag(study=study, prompt_ids=[p.pk for p in created_prompts])
        if dry_run:
            # Everything was checked and written, database constraints included; now undo it all.
            transaction.set_rollback(True)
    return ImportResult(
        study=study,
        study_created=created,
        format=corpus.format,
        prompts=len(created_prompts),
        responses=len(responses),
        conditions=corpus.conditions,
        replaced=replaced,
        dry_run=dry_run,
    )
