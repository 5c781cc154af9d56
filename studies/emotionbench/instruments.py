"""EmotionBench's instruments (questionnaires.json) and situation pool (situations.json), imported all or
nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from studies.models import (
    Instrument,
    InstrumentCategory,
    InstrumentItem,
    Situation,
)

from ..importers.reading import CorpusImportError, json_read
from .data import (
    EMOTIONS,
    PANAS_ANCHORS,
    EmotionBenchImportError,
    ImportSummary,
    emotion_canonical,
)

# --- Instruments ----------------------------------------------------------------------------------------


@dataclass
class InstrumentSpec:
    name: str
    items: dict[int, str]
    scale_min: int
    scale_max: int
    anchors: list[str]
    reverse: list[int]
    categories: list[tuple[str, list[int]]]
    compute_mode: str
    llm_prompt: str
    llm_system_prompt: str
    notes: list[str] = field(default_factory=list)


_RANGE_RE = re.compile(r"(?:numbers|scale|ranging)\s+(?:of|from)\s+(-?\d+)\s+to\s+(-?\d+)", re.IGNORECASE)
_ANCHOR_RE = re.compile(r"(-?\d+)\s*(?:denotes|=)\s*\"([^\"]+)\"")


def _int_list(value, where: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise EmotionBenchImportError(f"{where}: expected a list of item numbers, got {value!r}")
    return list(value)


def instrument_spec_parse(*, obj: dict, where: str) -> InstrumentSpec:
    """Validate one questionnaires.json object (at JSON path `where`) and return what to store.

    Guarantees: items numbered 1..n without gaps; a valid range (from `scale_min`/`scale_max` if given, else
    from the prompt's "from X to Y"), consistent with the file's `scale` (= min + max, so that a reversed item
    scores `scale - x`); reverse items among the items; at least one category, every category non-empty and
    within the items, every item in some category, and categories that do not cover every item (subscales)
    pairwise disjoint.
    """
    if not isinstance(obj, dict):
        raise EmotionBenchImportError(f"{where}: expected an object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise EmotionBenchImportError(f"{where}.name: missing or empty")
    where = f"{where} ({name})"
    questions = obj.get("questions")
    if not isinstance(questions, dict) or not questions:
        raise EmotionBenchImportError(f"{where}.questions: expected a non-empty object of numbered items")
    items: dict[int, str] = {}
    for key, text in questions.items():
        if not str(key).isdigit():
            raise EmotionBenchImportError(f"{where}.questions[{key!r}]: item keys must be numbers")
        if not isinstance(text, str) or not text.strip():
            raise EmotionBenchImportError(f"{where}.questions[{key!r}]: empty item text")
        items[int(key)] = text.strip()
    if sorted(items) != list(range(1, len(items) + 1)):
        raise EmotionBenchImportError(
            f"{where}.questions: items must be numbered 1..{len(items)} without gaps"
        )

    prompt = obj.get("prompt", "") or ""
    if "scale_min" in obj or "scale_max" in obj:
        lo, hi = obj.get("scale_min"), obj.get("scale_max")
        if not isinstance(lo, int) or not isinstance(hi, int):
            raise EmotionBenchImportError(f"{where}.scale_min/scale_max: both must be integers")
    else:
        match = _RANGE_RE.search(prompt)
        if not match:
            raise EmotionBenchImportError(
                f"{where}: no range: give scale_min and scale_max, or say 'from X to Y' in the prompt"
            )
        lo, hi = int(match[1]), int(match[2])
    if lo >= hi:
        raise EmotionBenchImportError(
            f"{where}: bad range {lo}..{hi} (the minimum must be below the maximum)"
        )
    scale = obj.get("scale")
    if scale is not None and scale != lo + hi:
        raise EmotionBenchImportError(
            f"{where}.scale: {scale!r} does not fit the range {lo}..{hi} (reverse scoring needs scale = min + max"
            f" = {lo + hi})"
        )

    reverse = _int_list(obj.get("reverse", []), f"{where}.reverse")
    outside = sorted(set(reverse) - set(items))
    if outside:
        raise EmotionBenchImportError(
            f"{where}.reverse: items {outside} are not in the item list 1..{len(items)}"
        )

    compute_mode = obj.get("compute_mode", "SUM")
    if compute_mode not in Instrument.ComputeMode.values:
        raise EmotionBenchImportError(f"{where}.compute_mode: {compute_mode!r} is not SUM or SUM*2")

    raw_categories = obj.get("categories")
    if not isinstance(raw_categories, list) or not raw_categories:
        raise EmotionBenchImportError(
            f"{where}.categories: missing; an instrument needs at least one category"
        )
    categories: list[tuple[str, list[int]]] = []
    seen_names: set[str] = set()
    for i, cat in enumerate(raw_categories):
        cwhere = f"{where}.categories[{i}]"
        if not isinstance(cat, dict):
            raise EmotionBenchImportError(f"{cwhere}: expected an object")
        cname = cat.get("cat_name")
        if not isinstance(cname, str) or not cname.strip():
            raise EmotionBenchImportError(f"{cwhere}.cat_name: missing or empty")
        if cname in seen_names:
            raise EmotionBenchImportError(f"{cwhere}.cat_name: {cname!r} appears twice")
        seen_names.add(cname)
        numbers = _int_list(cat.get("cat_questions"), f"{cwhere}.cat_questions")
        if not numbers:
            raise EmotionBenchImportError(f"{cwhere}.cat_questions: empty category {cname!r}")
        if len(set(numbers)) != len(numbers):
            raise EmotionBenchImportError(f"{cwhere}.cat_questions: an item is listed twice in {cname!r}")
        outside = sorted(set(numbers) - set(items))
        if outside:
            raise EmotionBenchImportError(f"{cwhere}.cat_questions: items {outside} are not in the item list")
        categories.append((cname, numbers))
    covered = set().union(*(set(nums) for _, nums in categories))
    missing = sorted(set(items) - covered)
    if missing:
        raise EmotionBenchImportError(f"{where}.categories: items {missing} belong to no category")
    subscales = [(n, set(nums)) for n, nums in categories if set(nums) != set(items)]
    for a in range(len(subscales)):
        for b in range(a + 1, len(subscales)):
            overlap = sorted(subscales[a][1] & subscales[b][1])
            if overlap:
                raise EmotionBenchImportError(
                    f"{where}.categories: {subscales[a][0]!r} and {subscales[b][0]!r} overlap on items {overlap}"
                )

    notes: list[str] = []
    anchors = obj.get("anchors")
    if anchors is not None:
        if not isinstance(anchors, list) or len(anchors) != hi - lo + 1:
            raise EmotionBenchImportError(f"{where}.anchors: expected {hi - lo + 1} labels for {lo}..{hi}")
        anchors = [str(a) for a in anchors]
    else:
        anchors = _anchors_from_prompt(prompt, lo, hi)
        if anchors is None and name.upper() == "PANAS":
            anchors = list(PANAS_ANCHORS)
        if anchors is None:
            anchors = []
            notes.append(f"{name}: the prompt labels the scale ambiguously or per item; no anchors stored")
    return InstrumentSpec(
        name=name.strip(),
        items=items,
        scale_min=lo,
        scale_max=hi,
        anchors=anchors,
        reverse=sorted(set(reverse)),
        categories=categories,
        compute_mode=compute_mode,
        llm_prompt=prompt,
        llm_system_prompt=obj.get("inner_setting", "") or "",
        notes=notes,
    )


def _anchors_from_prompt(prompt: str, lo: int, hi: int) -> list[str] | None:
    """Labels of lo..hi from `N denotes "label"` phrases; blank where a value has none; None if a value is
    labelled twice differently (item-specific anchors, as in MJS) or no value is labelled."""
    labels: dict[int, str] = {}
    for number, label in _ANCHOR_RE.findall(prompt):
        value = int(number)
        if not lo <= value <= hi:
            continue
        if value in labels and labels[value] != label:
            return None
        labels[value] = label.strip()
    if not labels:
        return None
    return [labels.get(v, "") for v in range(lo, hi + 1)]


def _json_read(path: Path):
    """The file's JSON, or an EmotionBenchImportError naming the file and what is wrong with it."""
    try:
        return json_read(Path(path).read_bytes())
    except OSError as exc:
        raise EmotionBenchImportError(f"{path}: cannot read: {exc}") from exc
    except CorpusImportError as exc:
        raise EmotionBenchImportError(f"{path}: {'; '.join(str(p) for p in exc.problems)}") from None


def instruments_parse_file(*, path: Path) -> list[InstrumentSpec]:
    data = _json_read(path)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise EmotionBenchImportError(f"{path}: expected a list of instrument objects")
    specs = [instrument_spec_parse(obj=obj, where=f"{Path(path).name}: $[{i}]") for i, obj in enumerate(data)]
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise EmotionBenchImportError(f"{path}: instrument names appear twice: {dupes}")
    return specs


@transaction.atomic
def instruments_import(*, path: Path) -> ImportSummary:
    """Import every instrument of a questionnaires.json file, all or nothing.

    Instruments are matched by name; a re-import of the same file changes nothing, a changed file updates
    items, reverse flags and categories in place (answers refer to item numbers, so they stay valid).
    """
    specs = instruments_parse_file(path=path)
    summary = ImportSummary()
    for spec in specs:
        summary.notes.extend(spec.notes)
        fields = {
            "scale_min": spec.scale_min,
            "scale_max": spec.scale_max,
            "anchors": spec.anchors,
            "compute_mode": spec.compute_mode,
            "llm_prompt": spec.llm_prompt,
            "llm_system_prompt": spec.llm_system_prompt,
        }
        instrument = Instrument.objects.filter(name=spec.name).first()
        created = changed = False
        if instrument is None:
            instrument = Instrument.objects.create(name=spec.name, title=spec.name, **fields)
            created = changed = True
        else:
            diff = [k for k, v in fields.items() if getattr(instrument, k) != v]
            if diff:
                for k in diff:
                    setattr(instrument, k, fields[k])
                instrument.save(update_fields=diff)
                changed = True
        existing_items = {i.number: i for i in instrument.items.all()}
        for number, text in spec.items.items():
            reverse = number in spec.reverse
            item = existing_items.pop(number, None)
            if item is None:
                InstrumentItem.objects.create(
                    instrument=instrument, number=number, text=text, reverse_scored=reverse
                )
                changed = True
            elif item.text != text or item.reverse_scored != reverse:
                item.text, item.reverse_scored = text, reverse
                item.save(update_fields=["text", "reverse_scored"])
                changed = True
        if existing_items:
            InstrumentItem.objects.filter(pk__in=[i.pk for i in existing_items.values()]).delete()
            changed = True
        existing_cats = {c.name: c for c in instrument.categories.all()}
        wanted = dict(spec.categories)
        if list(existing_cats) != list(wanted) or any(
            existing_cats[n].item_numbers != wanted[n] for n in wanted
        ):
            instrument.categories.all().delete()
            InstrumentCategory.objects.bulk_create(
                [
                    InstrumentCategory(instrument=instrument, name=n, item_numbers=nums)
                    for n, nums in spec.categories
                ]
            )
            changed = True
        if created:
            summary.created += 1
        elif changed:
            summary.updated += 1
        else:
            summary.unchanged += 1
    return summary


# --- Situations -----------------------------------------------------------------------------------------


@dataclass
class SituationSpec:
    emotion: str
    factor_index: int
    factor_name: str
    index: int
    text: str


def situations_parse_file(*, path: Path) -> list[SituationSpec]:
    """Validate a situations.json file: `{"emotions": [{"name", "factors": [{"name", "scenarios": [...]}]}]}`.

    Guarantees: every emotion is one of EMOTIONS (an unknown one is an error naming its JSON path), appears
    once, and every factor has a name and at least one non-empty situation.
    """
    name = Path(path).name
    data = _json_read(path)
    emotions = data.get("emotions") if isinstance(data, dict) else None
    if not isinstance(emotions, list) or not emotions:
        raise EmotionBenchImportError(f"{name}: $.emotions: expected a non-empty list")
    specs: list[SituationSpec] = []
    seen: set[str] = set()
    for e, emotion in enumerate(emotions):
        ewhere = f"{name}: $.emotions[{e}]"
        if not isinstance(emotion, dict):
            raise EmotionBenchImportError(f"{ewhere}: expected an object")
        raw_name = emotion.get("name")
        canonical = emotion_canonical(name=raw_name) if isinstance(raw_name, str) else None
        if canonical is None:
            raise EmotionBenchImportError(
                f"{ewhere}.name: unknown emotion {raw_name!r}; expected one of {', '.join(EMOTIONS)}"
            )
        if canonical in seen:
            raise EmotionBenchImportError(f"{ewhere}.name: {canonical!r} appears twice")
        seen.add(canonical)
        factors = emotion.get("factors")
        if not isinstance(factors, list) or not factors:
            raise EmotionBenchImportError(f"{ewhere}.factors: expected a non-empty list")
        for f, factor in enumerate(factors):
            fwhere = f"{ewhere}.factors[{f}]"
            if (
                not isinstance(factor, dict)
                or not isinstance(factor.get("name"), str)
                or not factor["name"].strip()
            ):
                raise EmotionBenchImportError(f"{fwhere}.name: missing or empty")
            scenarios = factor.get("scenarios")
            if not isinstance(scenarios, list) or not scenarios:
                raise EmotionBenchImportError(f"{fwhere}.scenarios: expected a non-empty list")
            for s, text in enumerate(scenarios):
                if not isinstance(text, str) or not text.strip():
                    raise EmotionBenchImportError(f"{fwhere}.scenarios[{s}]: empty situation")
                specs.append(
                    SituationSpec(
                        emotion=canonical,
                        factor_index=f + 1,
                        factor_name=factor["name"].strip(),
                        index=s + 1,
                        text=text.strip(),
                    )
                )
    return specs


@transaction.atomic
def situations_import(*, path: Path) -> ImportSummary:
    """Import the situation pool, all or nothing; situations are keyed by (emotion, factor, position).

    A re-import of the same file changes nothing; changed texts or factor names are updated in place.
    Situations in the database but not in the file are kept (runs may refer to them) and counted.
    """
    specs = situations_parse_file(path=path)
    summary = ImportSummary()
    existing = {(s.emotion, s.factor_index, s.index): s for s in Situation.objects.all()}
    to_create: list[Situation] = []
    for spec in specs:
        current = existing.pop((spec.emotion, spec.factor_index, spec.index), None)
        if current is None:
            to_create.append(
                Situation(
                    emotion=spec.emotion,
                    factor_index=spec.factor_index,
                    factor_name=spec.factor_name,
                    index=spec.index,
                    text=spec.text,
                )
            )
        elif current.text != spec.text or current.factor_name != spec.factor_name:
            current.text, current.factor_name = spec.text, spec.factor_name
            current.save(update_fields=["text", "factor_name"])
            summary.updated += 1
        else:
            summary.unchanged += 1
    Situation.objects.bulk_create(to_create)
    summary.created = len(to_create)
    emotions = {s.emotion for s in specs}
    factors = {(s.emotion, s.factor_index) for s in specs}
    summary.notes.append(
        f"{len(specs)} situations, {len(factors)} factors, {len(emotions)} emotions in the file"
    )
    if existing:
        summary.notes.append(f"{len(existing)} situations in the database are not in the file (kept)")
    return summary
