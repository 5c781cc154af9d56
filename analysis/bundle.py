"""A study's open-science bundle: the data release a journal, a reviewer or a replicator checks
(`manage.py export_bundle`, and the download on the study's admin and analysis pages; docs/analysis.md says what
it holds).

    dataset_description.json   Psych-DS (schema.org JSON-LD), `variableMeasured`: the codebook of every column
    datapackage.json           Frictionless: a Table Schema per data file (types, enums, ranges, required, keys)
    croissant.json             Croissant 1.0: the files with their SHA-256, record sets, Responsible-AI fields
    data/                      study-<slug>_description-<table>_data.csv: answers (by kind), participants, the
                               kind's other tables (items, situations), the generation log
    materials/                 consent, instructions, the scale or choices, worked examples, attention checks,
                               the generation and judge prompts
    documentation/             the pre-registration in the OSF template's sections (Markdown and JSON), design.json
                               and its hash, the amendments as deviations, a wave's parent, CITATION.cff
    analysis/                  reproduce.py (reads only the bundle) with its pinned requirements and parameters
    results/                   headline.json: what reproduce.py computes, as the platform computed it
    MANIFEST.sha256            every other file's SHA-256

What differs by kind (the answers table and its codebook, the kind's own tables and materials, the analysis
script and its headline) comes from the kind's bundle part (`StudyKind.bundle`: kinds/<kind>/bundle.py, its script kinds/<kind>/bundle_script.py); the
rest is shared. The same study state gives the same bytes (no clock is read; every JSON is written sorted).
Private by default: participants under their pseudonyms (analysis.pseudonyms), free text only when asked for,
no e-mail address in the documents. Written into a temporary directory beside the target and renamed into place
when complete: a failure leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

from django.db import connection, transaction

from analysis.bundle_metadata import (
    Description,
    citation_cff,
    croissant,
    datapackage,
    dataset_description,
    json_text,
)
from analysis.bundle_tables import Table, email_redact, generation_log_table, items_table, participants_table
from generation.selectors import judges_of
from studies.design import canonical_json, design_build, design_current
from studies.kinds import kind_of, resolved
from studies.models import Study
from studies.prereg import prereg_osf, prereg_osf_markdown
from studies.waves import family_members

ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # every zip entry's time: the archive's bytes depend on its files alone
DEFAULT_LICENCE = "CC-BY-4.0"
PRIVACY = (
    "Participants appear only under pseudonyms (HMAC-SHA256 of the study and their platform id, keyed by the "
    "platform: stable within the study, different in every study, not reversible without the key); no platform "
    "id, name, e-mail or postal or network address is included."
)


class BundleError(Exception):
    """The bundle cannot be made as asked (no such wave, a kind without a bundle, a target that exists)."""


@dataclass(frozen=True)
class BundleOptions:
    include_free_text: bool = False
    licence: str = DEFAULT_LICENCE
    authors: tuple[str, ...] = ()
    url: str = ""


def bundle_study(study: Study, wave: int | None) -> Study:
    """`study`, or its family's wave number `wave` (1: the first wave)."""
    if wave is None:
        return study
    members = family_members(study)
    if not 1 <= wave < len(members):
        raise BundleError(f"study '{study.slug}' has {len(members) - 1} wave(s): there is no wave {wave}")
    return members[wave]


def kind_bundle(study: Study):
    path = kind_of(study).bundle
    if path is None:
        raise BundleError(f"studies of kind '{study.kind}' have no bundle")
    return resolved(path)


def data_path(study: Study, key: str) -> str:
    """A data file's Psych-DS name: key-value parts (values letters and digits only), then `_data.csv`."""
    slug = re.sub(r"[^a-zA-Z0-9]", "", study.slug)
    return f"data/study-{slug}_description-{key}_data.csv"


def _tables(study: Study, part, options: BundleOptions, design: dict) -> list[Table]:
    own = part.tables(study, include_free_text=options.include_free_text)
    shared = [participants_table(study, include_free_text=options.include_free_text)]
    if study.prompts.exists():  # a study that shows replies: its items and how they were generated
        shared += [items_table(study, design), generation_log_table(study)]
    return [*own, *shared]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _table_write(table: Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        for line in table.lines():
            f.write(line)


def _parent(study: Study, part) -> dict | None:
    """A wave's parent, referenced by hash: its design's and its answers file's (as its own bundle writes it)."""
    parent = study.parent
    if parent is None:
        return None
    design = design_current(parent)
    answers = part.tables(parent, include_free_text=False)[0]
    digest = hashlib.sha256()
    for line in answers.lines():
        digest.update(line.encode("utf-8"))
    baseline = parent.conditions.filter(is_baseline=True).values_list("name", flat=True).first()
    return {
        "study": parent.slug,
        "design_sha256": design.sha256 if design else None,
        "baseline_condition": baseline,
        "answers": data_path(parent, answers.key),
        "answers_sha256": digest.hexdigest(),
    }


def _description(study: Study, part, options: BundleOptions, parent: dict | None) -> Description:
    design = design_current(study)
    sha = (
        design.sha256 if design else hashlib.sha256(canonical_json(design_build(study)).encode()).hexdigest()
    )
    first = study.designs.order_by("created_at", "id").first()
    created = (first.created_at if first else study.created_at).astimezone(UTC).replace(microsecond=0)
    kind = kind_of(study)
    free_text = (
        "Free text the participants wrote is included."
        if options.include_free_text
        else f"Free text the participants wrote is left out ({part.free_text})."
    )
    return Description(
        slug=study.slug,
        title=study.title,
        description=f"The data of the {kind.name} study '{study.title}' ({study.slug}): what "
        "participants answered, who they were under pseudonyms, what they were shown, and the analysis that "
        "re-runs its headline figures.",
        authors=options.authors or (f"The researchers of {study.slug}",),
        licence=options.licence,
        version=f"1.{study.amendments.count()}.0",
        design_sha256=sha,
        created=created.isoformat().replace("+00:00", "Z"),
        date=created.date().isoformat(),
        url=options.url or f"urn:empathy-study:{study.slug}",
        keywords=("empathy", "large language models", "crowdsourcing", f"{kind.name} study"),
        privacy=PRIVACY,
        free_text=free_text,
        uses="Research on how empathetic replies written by language models are judged, compared with replies "
        "written by people; checking and re-running the study's analysis.",
        limitations="Judgements by crowd workers recruited online, on a sample of written conversations; not a "
        "measure of any model's behaviour outside these prompts and settings.",
        biases="Position (the side or order a reply is shown in; pairwise studies randomise it and the analysis "
        "reports the left side's advantage) and length (longer replies tend to be judged more empathetic; the "
        "analysis reports a length-controlled fit where it applies). Raters self-select on the recruiting "
        "platform.",
        collection="Participants recruited on a crowdsourcing platform answered on the study's pages; replies "
        "were imported from a corpus or generated by the models named in documentation/design.json.",
        parent=parent,
    )


def _materials(study: Study, part, design: dict) -> dict[str, str]:
    prompts = {
        "conditions": [
            {"condition": c["name"], **{k: c["llm"][k] for k in ("model", "system_prompt", "prompt_template",
                                                                 "decoding", "seed")}}
            for c in design["conditions"]
            if c.get("llm")
        ],
        "judges": [
            {"name": j.name, "model": j.model, "system_prompt": j.system_prompt, "rubric": j.rubric,
             "temperature": j.temperature, "max_tokens": j.max_tokens, "seed": j.seed}
            for j in sorted(judges_of(study=study), key=lambda j: j.name)
        ],
    }  # fmt: skip
    files = {
        "materials/consent.md": study.consent_text.strip() + "\n",
        "materials/instructions.md": study.instructions_text.strip() + "\n",
        "materials/worked_examples.json": json_text(study.worked_examples or []),
        "materials/attention_checks.json": json_text(
            {
                "attention_checks": design["attention_checks"],
                "known_answer_pairs": design.get("known_answer_pairs", []),
            }
        ),
        "materials/prompts.json": json_text(prompts),
    }
    for name, value in part.materials(study).items():
        files[f"materials/{name}.json"] = json_text(value)
    return files


def _documentation(study: Study, part, about: Description, parent: dict | None) -> dict[str, str]:
    current = design_current(study)
    canonical = current.canonical if current else canonical_json(design_build(study))
    prereg = prereg_osf(study, answers=part.prereg_answers(study))
    files = {
        "documentation/preregistration.md": prereg_osf_markdown(prereg),
        "documentation/preregistration.json": json_text(prereg),
        "documentation/design.json": canonical,
        "documentation/design.sha256": f"{hashlib.sha256(canonical.encode('utf-8')).hexdigest()}  design.json\n",
        "documentation/deviations.json": json_text(
            [
                {
                    "at": a.created_at.isoformat(),
                    "field": a.field,
                    "from": a.old_value,
                    "to": a.new_value,
                    "reason": a.reason,
                    "design_sha256_before": a.sha256_before,
                    "design_sha256_after": a.sha256_after,
                }
                for a in study.amendments.order_by("created_at", "id")
            ]
        ),  # fmt: skip
        "documentation/CITATION.cff": citation_cff(about),
    }
    if parent is not None:
        files["documentation/parent.json"] = json_text(parent)
    return files


# Written as they are: what participants were shown (materials/) and the frozen design (its hash).
VERBATIM = ("materials/", "documentation/design.json", "analysis/")


def _files_write(root: Path, files: dict[str, str]) -> None:
    """The documents, e-mail addresses removed (an amendment's author may be one) except where a file must stay
    as it is."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            text if name.startswith(VERBATIM) else email_redact(text), encoding="utf-8", newline=""
        )


def bundle_write(study: Study, out_dir: Path, options: BundleOptions | None = None) -> list[str]:
    """Writes the bundle of `study` into `out_dir` (which must not exist yet); returns its files' names."""
    options = options or BundleOptions()
    out_dir = Path(out_dir)
    if out_dir.exists():
        raise BundleError(f"{out_dir} exists: the bundle goes into a new directory")
    part = kind_bundle(study)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    try:
        with _one_state():
            _bundle_fill(study, part, options, work)
        work.rename(out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("*") if p.is_file())


@contextmanager
def _one_state() -> Iterator[None]:
    """Every read of the bundle from one state of the study: on PostgreSQL a read-only REPEATABLE READ transaction
    (one snapshot for the data files, the results and the documents, while participants keep answering), opened
    here unless the caller's transaction already holds the reads together."""
    outermost = not transaction.get_connection().in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def _bundle_fill(study: Study, part, options: BundleOptions, root: Path) -> None:
    current = design_current(study)
    design = json.loads(current.canonical) if current else json.loads(canonical_json(design_build(study)))
    tables = _tables(study, part, options, design)
    paths = {table.key: data_path(study, table.key) for table in tables}
    for table in tables:
        _table_write(table, root / paths[table.key])
    hashes = {path: _sha256(root / path) for path in paths.values()}
    parent = _parent(study, part)
    about = _description(study, part, options, parent)
    files = {
        "dataset_description.json": json_text(dataset_description(about, tables)),
        "datapackage.json": json_text(datapackage(about, tables, paths)),
        "croissant.json": json_text(croissant(about, tables, paths, hashes)),
        "README.md": _readme(study, about, tables, paths),
        **_materials(study, part, design),
        **_documentation(study, part, about, parent),
        "analysis/reproduce.py": part.script.read_text(encoding="utf-8"),
        "analysis/requirements.txt": part.requirements,
        "analysis/parameters.json": json_text(part.parameters(study)),
        "results/headline.json": json_text(part.results(study)),
    }
    for name, source in part.extra_scripts.items():
        files[f"analysis/{name}"] = source.read_text(encoding="utf-8")
    _files_write(root, files)
    listed = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    manifest = "".join(f"{_sha256(root / name)}  {name}\n" for name in listed)
    (root / "MANIFEST.sha256").write_text(manifest, encoding="utf-8", newline="")


def _readme(study: Study, about: Description, tables: list[Table], paths: dict[str, str]) -> str:
    lines = [
        f"# {about.title}",
        "",
        about.description,
        "",
        f"{about.free_text} {about.privacy}",
        "",
        "## Files",
        "",
        *(f"- `{paths[t.key]}`: {t.description}" for t in tables),
        "- `dataset_description.json` (Psych-DS), `datapackage.json` (Frictionless), `croissant.json` (Croissant "
        "1.0): the same columns, typed and described",
        "- `materials/`: what participants were shown; `documentation/`: the pre-registration, the frozen design "
        "and its hash, the deviations from it, how to cite",
        "- `results/headline.json`: the headline figures as the platform computed them",
        "- `MANIFEST.sha256`: `sha256sum -c MANIFEST.sha256` checks every file",
        "",
        "## Re-running the analysis",
        "",
        "```",
        "python -m venv venv && venv/bin/pip install -r analysis/requirements.txt",
        "venv/bin/python analysis/reproduce.py --out rerun/",
        "```",
        "",
        "`rerun/headline.json` then holds the same figures as `results/headline.json`.",
    ]
    if about.parent:
        lines += [
            "",
            "## Parent study",
            "",
            f"A follow-up wave of `{about.parent['study']}`: its answers are `{about.parent['answers']}` in its "
            f"own bundle, SHA-256 `{about.parent['answers_sha256']}` (design `{about.parent['design_sha256']}`).",
        ]
    return "\n".join(lines) + "\n"


def bundle_zip(study: Study, target, options: BundleOptions | None = None) -> None:
    """The bundle as a zip archive written to `target` (a path or a binary file), under `<slug>-bundle/`, its
    entries sorted and dated alike so the same study state gives the same archive."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bundle"
        names = bundle_write(study, root, options)
        with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name in names:
                info = zipfile.ZipInfo(f"{study.slug}-bundle/{name}", date_time=ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, (root / name).read_bytes())
