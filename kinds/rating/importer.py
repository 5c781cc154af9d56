"""The published ratings of a study (`ratings_import`): a closed study with its prompts, responses, raters,
their TEQ answers and their ratings, validated whole before anything is written."""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from studies.balance_counts import counts_rebuild
from studies.design import design_freeze
from studies.exclusion_rules import seed_study_exclusion_rules
from studies.importers.corpus import conditions_ensure, emotions_by_name, progress_tick, prompts_unsaved
from studies.importers.parse import (
    BULK_BATCH,
    PUBLIC_FORMAT,
    TEQ_ANSWER_CODES,
    TEQ_ITEMS,
    TEQ_REVERSED,
    CorpusImportError,
    ImportProblem,
    ProgressCallback,
    corpus_parse,
    missing_columns,
)
from studies.models import Assignment, Participant, Prompt, Response, Study

from .models import Rating, RatingSettings


@dataclass
class RatingsImportResult:
    study: Study
    prompts: int
    responses: int
    participants_per_condition: dict[str, int]
    ratings: int
    ratings_per_participant: tuple[int, int]  # (fewest, most)

    def summary(self) -> str:
        per = ", ".join(f"{name} {n}" for name, n in self.participants_per_condition.items())
        low, high = self.ratings_per_participant
        each = f"{low}" if low == high else f"{low}–{high}"
        return (
            f"Imported closed study '{self.study.slug}': {self.prompts} prompts, {self.responses} responses, "
            f"participants {per}, {self.ratings} ratings ({each} per participant)."
        )


@dataclass
class _Rater:
    condition: str
    external_id: str
    part_no: str
    first_row: int
    teq_answers: dict[str, str]
    teq_score: int
    items: list[tuple[int, int]] = field(default_factory=list)  # (prompt index, rating)


def _parse_teq(raw: str, row: int, column: str) -> dict[str, str]:
    """The published ``empathy_arr`` list (16 answers, Never..Always written -2..2) as stored answers."""
    try:
        answers = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError):
        raise CorpusImportError([ImportProblem(f"{raw!r} is not a list of numbers", row, column)]) from None
    if (
        not isinstance(answers, list)
        or len(answers) != TEQ_ITEMS
        or not all(isinstance(a, int) and -2 <= a <= 2 for a in answers)
    ):
        raise CorpusImportError([ImportProblem(f"expected {TEQ_ITEMS} answers from -2 to 2", row, column)])
    return {str(number): TEQ_ANSWER_CODES[a + 2] for number, a in enumerate(answers, start=1)}


def teq_score(answers: dict[str, str]) -> int:
    """The TEQ total of stored answers, reversing the negatively worded items."""
    total = 0
    for number, code in answers.items():
        points = TEQ_ANSWER_CODES.index(code)
        total += 4 - points if int(number) in TEQ_REVERSED else points
    return total


def ratings_import(
    *, study_slug: str, data: bytes, title: str = "", progress: ProgressCallback | None = None
) -> RatingsImportResult:
    """Load the public dataset of Welivita & Pu (every ``response_<c>`` with its ``rating_<c>``,
    ``annotator_<c>``, ``empathy_propensity_<c>`` and ``empathy_arr_<c>``) as a new, closed rating study.

    Guarantees: the study (which must not exist yet), its conditions, prompts, responses, completed participants
    (one per annotator, with their TEQ answers and total), their assignments (position = order within the
    annotator's ``part_no`` batch) and ratings are all written, or nothing is. Checked first: every rater rates
    one batch only and belongs to one condition, ratings are on the study's scale, TEQ totals match the answers.
    """
    if Study.objects.filter(slug=study_slug).exists():
        raise CorpusImportError([ImportProblem(f"study '{study_slug}' already exists; choose a new slug")])
    emotions = emotions_by_name()
    corpus = corpus_parse(data=data, known_emotions=set(emotions))
    if corpus.format != PUBLIC_FORMAT:
        raise CorpusImportError(
            [ImportProblem("ratings can only be imported from the public dataset format", 1)]
        )
    header = corpus.header
    conditions = [c for c in corpus.conditions if f"rating_{c}" in header]
    problems: list[ImportProblem] = []
    for name in conditions:
        problems += missing_columns(
            header, [f"annotator_{name}", f"empathy_propensity_{name}", f"empathy_arr_{name}", "part_no"]
        )
    if not conditions:
        problems.append(ImportProblem("missing column", row=1, column="rating_<condition>"))
    if problems:
        raise CorpusImportError(sorted(set(problems), key=str))
    scale = {option["value"] for option in Study._meta.get_field("scale").get_default()}

    raters: dict[tuple[str, str], _Rater] = {}
    owner: dict[str, str] = {}
    for index, prompt in enumerate(corpus.prompts):
        values = prompt.extra
        for name in conditions:
            external_id = values[f"annotator_{name}"].strip()
            if not external_id:
                problems.append(ImportProblem("empty annotator id", prompt.row, f"annotator_{name}"))
                continue
            raw_rating = values[f"rating_{name}"].strip()
            try:
                rating = int(raw_rating)
            except ValueError:
                rating = None
            if rating not in scale:
                problems.append(
                    ImportProblem(
                        f"{raw_rating!r} is not on the scale {sorted(scale)}", prompt.row, f"rating_{name}"
                    )
                )
                continue
            if owner.setdefault(external_id, name) != name:
                problems.append(
                    ImportProblem(
                        f"annotator {external_id!r} also rates in condition {owner[external_id]!r}",
                        prompt.row,
                        f"annotator_{name}",
                    )
                )
                continue
            rater = raters.get((name, external_id))
            if rater is None:
                try:
                    answers = _parse_teq(values[f"empathy_arr_{name}"], prompt.row, f"empathy_arr_{name}")
                    total = int(values[f"empathy_propensity_{name}"].strip())
                except CorpusImportError as exc:
                    problems += exc.problems
                    continue
                except ValueError:
                    problems.append(
                        ImportProblem("not a whole number", prompt.row, f"empathy_propensity_{name}")
                    )
                    continue
                if teq_score(answers) != total:
                    problems.append(
                        ImportProblem(
                            f"TEQ total {total} does not match the answers (they score {teq_score(answers)})",
                            prompt.row,
                            f"empathy_propensity_{name}",
                        )
                    )
                    continue
                rater = raters[(name, external_id)] = _Rater(
                    name, external_id, values["part_no"].strip(), prompt.row, answers, total
                )
            elif values["part_no"].strip() != rater.part_no:
                problems.append(
                    ImportProblem(
                        f"annotator {external_id!r} rates batch {values['part_no']!r} here but batch "
                        f"{rater.part_no!r} on row {rater.first_row}",
                        prompt.row,
                        "part_no",
                    )
                )
                continue
            rater.items.append((index, rating))
    if problems:
        raise CorpusImportError(problems)
    per_condition = Counter(rater.condition for rater in raters.values())
    items_per_participant = max(len(r.items) for r in raters.values())

    with transaction.atomic():
        study = Study.objects.create(
            slug=study_slug,
            title=title or "Published ratings (Welivita & Pu)",
            description="Imported published ratings: public dataset of github.com/anuradha1992/llm-empathy-evaluation "
            "(texts from EmpatheticDialogues, CC BY-NC 4.0).",
            state=Study.State.CLOSED,
            items_per_participant=items_per_participant,
            quota_per_condition=max(per_condition.values()),
            # The published study declared attention checks as its only exclusion rule.
            exclusion_rules=seed_study_exclusion_rules(),
            closed_at=timezone.now(),
        )
        RatingSettings.objects.create(study=study, ask_teq=True, target_ratings_per_response=1)
        condition_rows = conditions_ensure(study, conditions)
        prompt_rows = Prompt.objects.bulk_create(
            prompts_unsaved(study, corpus.prompts, emotions),
            batch_size=BULK_BATCH,
        )
        progress_tick(progress, "prompts", len(prompt_rows), len(prompt_rows))
        response_rows = Response.objects.bulk_create(
            [
                Response(prompt=prompt_row, condition=condition_rows[name], text=parsed.responses[name])
                for parsed, prompt_row in zip(corpus.prompts, prompt_rows, strict=True)
                for name in conditions
            ],
            batch_size=BULK_BATCH,
        )
        response_of = {(r.prompt_id, r.condition.name): r for r in response_rows}
        progress_tick(progress, "responses", len(response_rows), len(response_rows))
        rater_list = list(raters.values())
        participant_rows = Participant.objects.bulk_create(
            [
                Participant(
                    study=study,
                    condition=condition_rows[r.condition],
                    external_id=r.external_id,
                    platform=Study.Platform.PROLIFIC,
                    status=Participant.Status.COMPLETED,
                    step=Participant.Step.DONE,
                    teq_answers=r.teq_answers,
                    teq_score=r.teq_score,
                )
                for r in rater_list
            ],
            batch_size=BULK_BATCH,
        )
        progress_tick(progress, "participants", len(participant_rows), len(participant_rows))
        assignments = []
        values = []
        for rater, participant in zip(rater_list, participant_rows, strict=True):
            for position, (index, value) in enumerate(rater.items):
                response = response_of[(prompt_rows[index].pk, rater.condition)]
                assignments.append(
                    Assignment(
                        participant=participant,
                        position=position,
                        kind=Assignment.Kind.RESPONSE,
                        response=response,
                    )
                )
                values.append(value)
        assignment_rows = Assignment.objects.bulk_create(assignments, batch_size=BULK_BATCH)
        Rating.objects.bulk_create(
            [Rating(assignment=a, value=v) for a, v in zip(assignment_rows, values, strict=True)],
            batch_size=BULK_BATCH,
        )
        progress_tick(progress, "ratings", len(values), len(values))
        design_freeze(study, reason="import of a finished study")
        counts_rebuild(study)  # the balance's running totals (studies/balance_counts.py)
    return RatingsImportResult(
        study=study,
        prompts=len(prompt_rows),
        responses=len(response_rows),
        participants_per_condition={name: per_condition[name] for name in conditions},
        ratings=len(values),
        ratings_per_participant=(min(len(r.items) for r in rater_list), items_per_participant),
    )
