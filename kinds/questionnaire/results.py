"""EmotionBench's published answers written as a questionnaire study, all or nothing."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection, transaction
from django.utils import timezone

from studies.emotionbench.data import (
    EmotionBenchImportError,
    normalise_text,
)
from studies.kinds import kind_of
from studies.models import (
    Condition,
    Instrument,
    QuestionnaireAnswer,
    QuestionnaireRun,
    QuestionnaireSettings,
    Situation,
    Study,
    StudySituation,
)

from .kind import QUESTIONNAIRE
from .results_parse import (
    ParsedSubject,
    PublishedKey,
    crowd_results_parse_xlsx,
    llm_results_parse_csv,
    summarise_columns,
)


@dataclass
class ResultsImportSummary:
    study: Study
    conditions: dict[str, int] = field(default_factory=dict)  # name → runs imported
    situations_matched: int = 0
    situations_added: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"study {self.study.slug}: {sum(self.conditions.values())} runs imported"]
        out += [f"  {name}: {n} runs" for name, n in self.conditions.items()]
        out.append(
            f"situations: {self.situations_matched} matched the pool by text, "
            f"{len(self.situations_added)} added with the text shown in the published files"
        )
        out += [f"  added {code}" for code in self.situations_added]
        out += self.notes
        return out


def published_results_import(
    *,
    study_slug: str,
    folder: Path,
    title: str = "EmotionBench published results",
    instrument_name: str = "PANAS",
) -> ResultsImportSummary:
    """Load the published PANAS answers of the LLMs and of the crowd as conditions of a questionnaire study.

    Reads `<folder>/results/PANAS Test/*-PANAS-testing.csv` (one condition per model) and `crowd.xlsx` sheet Raw
    (condition `human`). Everything is parsed and validated first; then, in one transaction, the study is
    created if new, its imported runs of these conditions are replaced (a re-import gives the same rows),
    situations are matched (see the module docstring), and runs and answers are bulk-inserted.
    Skipped columns and files missing situations other files have are reported in the summary, never silently
    dropped.
    """
    instrument = Instrument.objects.filter(name=instrument_name).first()
    if instrument is None:
        raise EmotionBenchImportError(
            f"instrument {instrument_name!r} is not imported; run `manage.py import_instruments questionnaires.json`"
        )
    if not Situation.objects.exists():
        raise EmotionBenchImportError(
            "no situations; run `manage.py import_situations situations.json` first"
        )
    folder = Path(folder)
    panas_dir = next(
        (d for d in (folder / "results" / "PANAS Test", folder / "PANAS Test", folder) if d.is_dir()), None
    )
    if panas_dir is None:
        raise EmotionBenchImportError(f"{folder}: not a folder")
    csv_files = sorted(panas_dir.glob(f"*-{instrument.name}-testing.csv"))
    crowd_path = panas_dir / "crowd.xlsx"
    if not csv_files and not crowd_path.exists():
        raise EmotionBenchImportError(
            f"{panas_dir}: no *-{instrument.name}-testing.csv files and no crowd.xlsx found"
        )
    texts: dict[PublishedKey, tuple[str, str]] = {}
    subjects = [llm_results_parse_csv(path=p, instrument=instrument, texts=texts) for p in csv_files]
    crowd_keys: set[PublishedKey] = set()
    if crowd_path.exists():
        crowd, crowd_keys = crowd_results_parse_xlsx(path=crowd_path, instrument=instrument)
        subjects.append(crowd)
    missing_text = sorted(crowd_keys - set(texts))
    if missing_text:
        raise EmotionBenchImportError(
            f"crowd.xlsx names situations no LLM answer file shows the text of: "
            f"{', '.join(f'{e}_F{f}S{s}' for e, f, s in missing_text[:10])}; put the answer files beside it"
        )
    _note_missing_runs(subjects)
    with transaction.atomic():
        return _results_write(
            study_slug=study_slug, title=title, instrument=instrument, subjects=subjects, texts=texts
        )


def challenging_results_import(*, study_slug: str, folder: Path) -> list[ResultsImportSummary]:
    """Load `<folder>/results/Challenging Bench/<model>-<instrument>-testing.csv` (EmotionBench's
    emotion-specific scales), one questionnaire study per instrument, `<study_slug>-<instrument>`.

    Every file is validated first (each instrument must be imported); then all studies are written in one
    transaction, with the same rules as `published_results_import`.
    """
    folder = Path(folder)
    bench = next(
        (d for d in (folder / "results" / "Challenging Bench", folder / "Challenging Bench") if d.is_dir()),
        None,
    )
    if bench is None:
        raise EmotionBenchImportError(f"{folder}: no 'results/Challenging Bench' folder")
    if not Situation.objects.exists():
        raise EmotionBenchImportError(
            "no situations; run `manage.py import_situations situations.json` first"
        )
    instruments = {i.name: i for i in Instrument.objects.exclude(name="PANAS")}
    plans: dict[str, tuple[Instrument, list[ParsedSubject], dict]] = {}
    for path in sorted(bench.glob("*-testing.csv")):
        instrument = next(
            (
                i
                for name, i in sorted(instruments.items(), key=lambda kv: -len(kv[0]))
                if path.name.endswith(f"-{name}-testing.csv")
            ),
            None,
        )
        if instrument is None:
            raise EmotionBenchImportError(
                f"{path.name}: no imported instrument matches its name (imported: {', '.join(sorted(instruments))})"
            )
        _, subjects, texts = plans.setdefault(instrument.name, (instrument, [], {}))
        subjects.append(llm_results_parse_csv(path=path, instrument=instrument, texts=texts))
    if not plans:
        raise EmotionBenchImportError(f"{bench}: no *-testing.csv files")
    summaries = []
    with transaction.atomic():
        for name, (instrument, subjects, texts) in plans.items():
            _note_missing_runs(subjects)
            slug = f"{study_slug}-{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}"
            summaries.append(
                _results_write(
                    study_slug=slug,
                    title=f"EmotionBench published results: {name}",
                    instrument=instrument,
                    subjects=subjects,
                    texts=texts,
                )
            )
    return summaries


def _results_write(
    *,
    study_slug: str,
    title: str,
    instrument: Instrument,
    subjects: list[ParsedSubject],
    texts: dict[PublishedKey, tuple[str, str]],
) -> ResultsImportSummary:
    """Write parsed published runs into a study (inside the caller's transaction)."""
    summary = ResultsImportSummary(study=None)  # type: ignore[arg-type]
    now = timezone.now()
    study = _study_for_results(slug=study_slug, title=title, instrument=instrument)
    summary.study = study
    situation_for = _situations_for_published(texts=texts, summary=summary)
    StudySituation.objects.bulk_create(
        [StudySituation(study=study, situation=s) for s in situation_for.values()], ignore_conflicts=True
    )
    for position, subject in enumerate(subjects):
        condition, _ = Condition.objects.get_or_create(
            study=study,
            name=subject.condition_name,
            defaults={
                "label": subject.condition_label,
                "kind": subject.kind,
                "is_baseline": subject.kind == Condition.Kind.HUMAN,
                "position": 0 if subject.kind == Condition.Kind.HUMAN else position + 1,
            },
        )
        QuestionnaireAnswer.objects.filter(
            run__condition=condition, run__source=QuestionnaireRun.Source.IMPORTED
        ).delete()
        QuestionnaireRun.objects.filter(condition=condition, source=QuestionnaireRun.Source.IMPORTED).delete()
        runs = []
        for parsed in subject.runs:
            situation = situation_for[parsed.published_key] if parsed.published_key else None
            runs.append(
                QuestionnaireRun(
                    study=study,
                    condition=condition,
                    subject_key=parsed.subject_key or situation.code,
                    phase=parsed.phase,
                    situation=situation,
                    run_index=parsed.run_index,
                    item_order=parsed.item_order,
                    source=QuestionnaireRun.Source.IMPORTED,
                    completed_at=now,
                )
            )
        QuestionnaireRun.objects.bulk_create(runs, batch_size=2000)
        answers_insert(
            rows=[
                (run.pk, item, value, pos + 1)
                for run, parsed in zip(runs, subject.runs, strict=True)
                for pos, (item, value) in enumerate(zip(parsed.item_order, parsed.values, strict=True))
            ]
        )
        summary.conditions[condition.name] = len(runs)
        summary.notes += [f"{subject.source_file}: {note}" for note in subject.skipped]
    return summary


def answers_insert(*, rows: list[tuple[int, int, int, int]]) -> None:
    """Insert (run id, item number, value, position) answer rows in bulk.

    On PostgreSQL one INSERT ... SELECT FROM unnest(arrays) per 50,000 rows: the published results are
    ~330,000 answers, and building a model instance per answer costs ten times the insert itself.
    Elsewhere (the SQLite of a local run) plain bulk_create.
    """
    if connection.vendor != "postgresql":
        QuestionnaireAnswer.objects.bulk_create(
            [QuestionnaireAnswer(run_id=r, item_number=i, value=v, position=p) for r, i, v, p in rows],
            batch_size=5000,
        )
        return
    table = QuestionnaireAnswer._meta.db_table
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 50_000):
            chunk = rows[start : start + 50_000]
            cursor.execute(
                f"INSERT INTO {table} (run_id, item_number, value, position) "
                "SELECT * FROM unnest(%s::bigint[], %s::smallint[], %s::smallint[], %s::smallint[])",
                [list(column) for column in zip(*chunk, strict=True)],
            )


def _note_missing_runs(subjects: list[ParsedSubject]) -> None:
    """Record, per LLM file, the runs other files have and it lacks (e.g. llama2-7b's Jealousy columns)."""
    llm = [s for s in subjects if s.kind == Condition.Kind.LLM]
    design: set[tuple] = set()
    for subject in llm:
        design |= {(r.phase, r.published_key, r.run_index) for r in subject.runs} | subject.blank
    for subject in llm:
        have = {(r.phase, r.published_key, r.run_index) for r in subject.runs}
        missing = design - have - subject.blank
        if not missing:
            continue
        by_key: dict[str, list[int]] = defaultdict(list)
        for _phase, key, index in missing:
            name = "General" if key is None else f"{key[0]}-{key[1] - 1}_scenario-{key[2] - 1}"
            by_key[name].append(index)
        if by_key:
            columns = [f"{name}_test-{i}_order-0" for name, indexes in by_key.items() for i in indexes]
            subject.skipped.append(
                f"{len(columns)} columns that other answer files have are missing from this file: "
                + summarise_columns(sorted(columns))
            )


def _study_for_results(*, slug: str, title: str, instrument: Instrument) -> Study:
    study = Study.objects.filter(slug=slug).first()
    if study is None:
        study = Study.objects.create(
            slug=slug,
            title=title,
            kind=QUESTIONNAIRE.name,
            platform=Study.Platform.NONE,
            description="Published EmotionBench answers (Huang et al., NeurIPS 2024), imported as a reference.",
        )
        QuestionnaireSettings.objects.create(study=study, instrument=instrument)
        return study
    settings = kind_of(study).questionnaire(study)
    if settings is None:
        raise EmotionBenchImportError(f"study {slug!r} is a {study.kind} study, not a questionnaire study")
    if settings.instrument_id is None:
        settings.instrument = instrument
        settings.save(update_fields=["instrument"])
    elif settings.instrument_id != instrument.pk:
        raise EmotionBenchImportError(
            f"study {slug!r} uses instrument {settings.instrument.name!r}, not {instrument.name!r}"
        )
    return study


def _situations_for_published(
    *, texts: dict[PublishedKey, tuple[str, str]], summary: ResultsImportSummary
) -> dict[PublishedKey, Situation]:
    """Map each published situation to a Situation: same text in the same emotion and factor, else a new one
    with the text shown, appended to that factor (see the module docstring)."""
    pool: dict[tuple[str, int], list[Situation]] = defaultdict(list)
    for situation in Situation.objects.all():
        pool[(situation.emotion, situation.factor_index)].append(situation)
    result: dict[PublishedKey, Situation] = {}
    for key in sorted(texts):
        emotion, factor, _ = key
        text = texts[key][0]
        candidates = pool.get((emotion, factor))
        if not candidates:
            raise EmotionBenchImportError(
                f"{texts[key][1]}: situation {emotion}-{factor - 1}: the pool has no factor {factor} of {emotion}"
                " (import situations.json first)"
            )
        wanted = normalise_text(text)
        match = next((s for s in candidates if normalise_text(s.text) == wanted), None)
        if match is None:
            match = Situation.objects.create(
                emotion=emotion,
                factor_index=factor,
                factor_name=candidates[0].factor_name,
                index=max(s.index for s in candidates) + 1,
                text=text,
            )
            candidates.append(match)
            summary.situations_added.append(
                f"{match.code} for published {emotion}-{factor - 1}_scenario-{key[2] - 1}"
            )
        else:
            summary.situations_matched += 1
        result[key] = match
    return result
