"""Published pairwise votes (`pairwise_import`): a corpus (prompts and every condition's replies, the corpus
import's format) and a votes file, written as a new closed pairwise study for re-analysis. Validated whole
before anything is written; any problem refuses the file with its row and column, and nothing is written.

The votes file is a CSV with the columns `prompt` (the corpus' dialogue id), `condition_a` and `condition_b`
(the conditions of reply A, shown on the left, and reply B), `choice` (`a`, `b` or `tie`; `left` and `right` are
read as `a` and `b`) and `rater` (the rater's id), and optionally `both_inadequate` (true/false, 1/0, yes/no).
Each rater becomes a completed participant; their votes are their pairs in file order.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from kinds.pairwise.models import PairItem, PairwiseSettings
from studies.balance_counts import counts_rebuild
from studies.design import design_freeze
from studies.importers.corpus import corpus_import
from studies.importers.reading import CorpusImportError, ImportProblem, csv_text
from studies.kinds import DONE
from studies.models import Participant, Prompt, Response, Study

VOTE_COLUMNS = ("prompt", "condition_a", "condition_b", "choice", "rater")
CHOICES = {"a": PairItem.Choice.LEFT, "left": PairItem.Choice.LEFT, "b": PairItem.Choice.RIGHT,
           "right": PairItem.Choice.RIGHT, "tie": PairItem.Choice.TIE}  # fmt: skip
FLAGS = {"": False, "0": False, "false": False, "no": False, "1": True, "true": True, "yes": True}


@dataclass
class PairwiseImportResult:
    study: Study
    prompts: int
    raters: int
    votes: int

    def summary(self) -> str:
        return (
            f"Imported closed pairwise study '{self.study.slug}': {self.prompts} prompts, {self.raters} raters, "
            f"{self.votes} votes."
        )


@dataclass
class _Vote:
    row: int
    prompt: str
    a: str
    b: str
    choice: str
    both_inadequate: bool


def votes_parse(data: bytes) -> dict[str, list[_Vote]]:
    """The votes file's rows by rater, in file order; CorpusImportError with every problem otherwise."""
    reader = csv.DictReader(io.StringIO(csv_text(data)))
    missing = [c for c in VOTE_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise CorpusImportError([f"the votes file has no column {', '.join(repr(c) for c in missing)}"])
    problems: list[ImportProblem] = []
    by_rater: dict[str, list[_Vote]] = {}
    for row_number, row in enumerate(reader, start=2):
        cells = {key: (row.get(key) or "").strip() for key in (*VOTE_COLUMNS, "both_inadequate")}
        for column in VOTE_COLUMNS:
            if not cells[column]:
                problems.append(ImportProblem("empty", row_number, column))
        choice = CHOICES.get(cells["choice"].lower())
        if cells["choice"] and choice is None:
            problems.append(ImportProblem(f"{cells['choice']!r} is not a, b or tie", row_number, "choice"))
        flag = FLAGS.get(cells["both_inadequate"].lower())
        if flag is None:
            problems.append(ImportProblem("not true or false", row_number, "both_inadequate"))
        if cells["condition_a"] and cells["condition_a"] == cells["condition_b"]:
            problems.append(ImportProblem("the same condition on both sides", row_number, "condition_b"))
        votes = by_rater.setdefault(cells["rater"], [])
        if any(v.prompt == cells["prompt"] for v in votes) and cells["prompt"]:
            problems.append(ImportProblem("this rater already voted on this prompt", row_number, "prompt"))
        votes.append(_Vote(row_number, cells["prompt"], cells["condition_a"], cells["condition_b"],
                           choice or "", bool(flag)))  # fmt: skip
    if not by_rater and not problems:
        problems.append(ImportProblem("the votes file has a header but no rows", row=1))
    if problems:
        raise CorpusImportError(problems)
    return by_rater


def pairwise_import(
    *, study_slug: str, corpus: bytes, votes: bytes, title: str = "", baseline: str = "human"
) -> PairwiseImportResult:
    """A new closed pairwise study `study_slug`: the corpus' prompts and replies, one completed participant per
    rater with their votes, the design frozen. Refused whole (CorpusImportError) when the slug is taken, the
    corpus or the votes file has a problem, a vote names a prompt or condition the corpus lacks, or `baseline`
    is not one of the corpus' conditions."""
    by_rater = votes_parse(votes)
    if Study.objects.filter(slug=study_slug).exists():
        raise CorpusImportError([f"a study '{study_slug}' exists already: choose a new slug"])
    now = timezone.now()
    with transaction.atomic():
        Study.objects.create(
            slug=study_slug,
            kind=Study.Kind.PAIRWISE,
            title=title or study_slug.replace("-", " ").capitalize(),
            description="Imported published pairwise votes, for re-analysis.",
        )
        study = corpus_import(study_slug=study_slug, data=corpus).study
        PairwiseSettings.objects.create(study=study)
        conditions = {c.name: c for c in study.conditions.all()}
        if baseline not in conditions:
            raise CorpusImportError([f"the corpus has no condition {baseline!r} to be the baseline"])
        study.conditions.update(is_baseline=False)
        study.conditions.filter(name=baseline).update(is_baseline=True)
        prompts = dict(Prompt.objects.filter(study=study).values_list("dialogue_id", "pk"))
        replies = {
            (p, c): r
            for p, c, r in Response.objects.filter(condition__study=study, sample_index=0).values_list(
                "prompt_id", "condition__name", "pk"
            )
        }
        problems, pages = [], []
        for votes_of in by_rater.values():
            for vote in votes_of:
                prompt = prompts.get(vote.prompt)
                if prompt is None:
                    problems.append(
                        ImportProblem(f"no prompt {vote.prompt!r} in the corpus", vote.row, "prompt")
                    )
                    continue
                for column, name in (("condition_a", vote.a), ("condition_b", vote.b)):
                    if name not in conditions:
                        problems.append(
                            ImportProblem(f"no condition {name!r} in the corpus", vote.row, column)
                        )
                    elif (prompt, name) not in replies:
                        problems.append(
                            ImportProblem(f"no reply of {name!r} to this prompt", vote.row, column)
                        )
        if problems:
            raise CorpusImportError(problems)
        for rater, votes_of in by_rater.items():
            participant = Participant.objects.create(
                study=study,
                condition=conditions[baseline],
                external_id=rater[:128],
                status=Participant.Status.COMPLETED,
                step=DONE,
                finished_at=now,
            )
            for position, vote in enumerate(votes_of):
                prompt = prompts[vote.prompt]
                pages.append(
                    PairItem(
                        participant=participant,
                        position=position,
                        prompt_id=prompt,
                        left_id=replies[(prompt, vote.a)],
                        right_id=replies[(prompt, vote.b)],
                        choice=vote.choice,
                        both_inadequate=vote.both_inadequate,
                        shown_at=now,
                        answered_at=now,
                    )
                )
        PairItem.objects.bulk_create(pages, batch_size=2000)
        study.items_per_participant = max(len(v) for v in by_rater.values())
        study.state, study.closed_at = Study.State.CLOSED, now
        study.save(update_fields=["items_per_participant", "state", "closed_at"])
        design_freeze(study, reason="import of a finished study")
        counts_rebuild(study)  # the balance's running totals (studies/balance_counts.py)
    return PairwiseImportResult(study=study, prompts=len(prompts), raters=len(by_rater), votes=len(pages))
