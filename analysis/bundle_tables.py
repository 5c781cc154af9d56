"""The data files of a study's open-science bundle (analysis/bundle.py) as typed tables: each column once, with its
type, its constraints and its meaning, from which the bundle writes the CSV, the Frictionless Table Schema, the
Croissant record set and the Psych-DS codebook (`variableMeasured`), so the four never disagree.

The tables every kind shares live here: the participants (pseudonymised as in the analysts' exports), the items
(prompts and replies, with each reply's condition, model and settings) and the generation log. What differs by
kind (the answers, and any table of the kind's own) comes from the kind's bundle part (`StudyKind.bundle`).

Cells go through the analysts' exports' own writer (`analysis.exports.csv_lines`: text a spreadsheet would run as
a formula gets a leading apostrophe), so a bundle's CSV reads like the exports it is made from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from analysis import exports
from analysis.exclusions import RULE_NAMES
from analysis.pseudonyms import pseudonym
from generation.selectors import provenance_rows
from studies.models import Participant, Study

# Table Schema type -> (Croissant dataType, schema.org type of a PropertyValue's value)
TYPES = {
    "string": "sc:Text",
    "integer": "sc:Integer",
    "number": "sc:Float",
    "boolean": "sc:Boolean",
    "datetime": "sc:Date",
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # a Table Schema type (TYPES)
    description: str
    required: bool = False
    enum: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None
    unique: bool = False

    def schema(self) -> dict:
        """The column as a Table Schema field."""
        out: dict = {"name": self.name, "type": self.type, "description": self.description}
        constraints: dict = {}
        if self.required:
            constraints["required"] = True
        if self.unique:
            constraints["unique"] = True
        if self.enum is not None:
            constraints["enum"] = list(self.enum)
        if self.minimum is not None:
            constraints["minimum"] = self.minimum
        if self.maximum is not None:
            constraints["maximum"] = self.maximum
        if self.type == "datetime":
            out["format"] = "any"  # ISO 8601 with the UTC offset, as datetime.isoformat() writes it
        if constraints:
            out["constraints"] = constraints
        return out


def row_id_column(what: str) -> Column:
    return Column(
        "row_id", "integer", f"The {what}'s number in this file (1, 2, …).", True, minimum=1, unique=True
    )


@dataclass
class Table:
    """One data file: its key (the Psych-DS `description-<key>` of its name, the Frictionless resource's name),
    columns, rows (lists in column order, `row_id` first) and keys."""

    key: str
    title: str
    description: str
    columns: list[Column]
    rows: Iterable[list]
    primary_key: list[str] = field(default_factory=lambda: ["row_id"])
    # (fields here, the referenced table's key, fields there)
    foreign_keys: list[tuple[list[str], str, list[str]]] = field(default_factory=list)

    def lines(self) -> Iterator[str]:
        numbered = ([i, *row] for i, row in enumerate(self.rows, start=1))
        return exports.csv_lines([c.name for c in self.columns], numbered)

    def schema(self) -> dict:
        out: dict = {"fields": [c.schema() for c in self.columns], "primaryKey": self.primary_key}
        if self.foreign_keys:
            out["foreignKeys"] = [
                {"fields": mine, "reference": {"resource": other, "fields": theirs}}
                for mine, other, theirs in self.foreign_keys
            ]
        return out


def project(header: list[str], records: Iterable, keep: list[str], *, map_cells: Callable | None = None):
    """The `keep` columns of `records` (rows under `header`), in that order."""
    at = [header.index(name) for name in keep]
    for record in records:
        record = list(record)
        if map_cells is not None:
            record = map_cells(record)
        yield [record[i] for i in at]


def pseudonymised(header: list[str], records: Iterable, *, study: Study, column: str = "participant"):
    """`records` with the platform id in `column` replaced by its pseudonym (analysis.pseudonyms)."""
    i = header.index(column)
    for record in records:
        record = list(record)
        record[i] = pseudonym(study_id=study.pk, platform_id=record[i])
        yield record


def exclusion_columns() -> list[Column]:
    """The exclusion flags of an answers table, as the analysts' exports write them."""
    return [
        Column("excluded", "boolean", "The study's declared exclusion rules exclude this participant.", True),
        *(
            Column(f"excluded_{rule}", "boolean", f"Excluded by the rule '{rule}'.", True)
            for rule in RULE_NAMES
        ),
    ]


# --- the tables every kind shares ------------------------------------------------------------------------------

PARTICIPANT_COLUMNS = [
    "participant", "condition", "platform", "status", "step", "flagged_for_exclusion", "exclusion_reasons",
    "attention_failures", "teq_score", "started_at", "finished_at", "authenticity_score", "authenticity_flagged",
    "authenticity_reasons", "authenticity_review",
]  # fmt: skip
FREE_TEXT_PARTICIPANT_COLUMNS = ["demographics"]


EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
EMAIL_REMOVED = "[e-mail removed]"


def email_redact(text: str) -> str:
    """`text` with every e-mail address replaced: none goes into a bundle."""
    return EMAIL.sub(EMAIL_REMOVED, text)


def participants_table(study: Study, *, include_free_text: bool) -> Table:
    """The study's participants (previews left out), under their pseudonyms: status, exclusion and authenticity
    flags and their reasons, times. What they wrote about themselves (demographics) only when included, with any
    e-mail address in it removed."""
    header = exports.participant_export_header()
    keep = PARTICIPANT_COLUMNS + (FREE_TEXT_PARTICIPANT_COLUMNS if include_free_text else [])
    records = pseudonymised(header, exports.participant_export_records(study=study), study=study)
    i_free = [header.index(name) for name in FREE_TEXT_PARTICIPANT_COLUMNS]

    def redacted(record: list) -> list:
        for i in i_free:
            if record[i] not in (None, "", {}):
                record[i] = email_redact(json.dumps(record[i], ensure_ascii=False, sort_keys=True))
        return record

    conditions = tuple(study.conditions.order_by("position", "name").values_list("name", flat=True))
    columns = [
        row_id_column("participant"),
        Column("participant", "string", "The participant's pseudonym (stable within this study).", True, unique=True),
        Column("condition", "string", "The condition the participant was assigned to.", enum=conditions or None),
        Column("platform", "string", "The recruiting platform.", True),
        Column("status", "string", "Where the participant's session ended.", True,
               enum=tuple(Participant.Status.values)),
        Column("step", "string", "The participant's last step.", True),
        Column("flagged_for_exclusion", "boolean", "Flagged by the attention checks.", True),
        Column("exclusion_reasons", "string", "Why the participant was flagged (JSON list)."),
        Column("attention_failures", "integer", "Attention checks answered wrongly.", True, minimum=0),
        Column("teq_score", "integer", "Toronto Empathy Questionnaire score, when asked.", minimum=0, maximum=64),
        Column("started_at", "datetime", "When the participant entered (UTC).", True),
        Column("finished_at", "datetime", "When the participant finished, returned or timed out (UTC)."),
        Column("authenticity_score", "number", "The authenticity score (0: no doubt).", minimum=0),
        Column("authenticity_flagged", "boolean", "The authenticity score flags the participant."),
        Column("authenticity_reasons", "string", "The authenticity signals behind the flag (JSON list)."),
        Column("authenticity_review", "string", "The researcher's review of an authenticity flag."),
    ]  # fmt: skip
    if include_free_text:
        columns.append(Column("demographics", "string", "What the participant said about themselves (JSON)."))
    return Table(
        key="participants",
        title="Participants",
        description="One row per participant (staff previews left out), under a pseudonym.",
        columns=columns,
        rows=project(header, records, keep, map_cells=redacted),
        primary_key=["participant"],
    )


ITEM_COLUMNS = [
    "response_id", "condition", "dialogue_id", "emotion", "valence", "situation", "speaker_utterance",
    "sample_index", "text", "source", "provider", "model_requested", "model_returned", "finish_reason",
]  # fmt: skip


def items_table(study: Study, design: dict) -> Table:
    """Every reply of the study with its prompt, its condition, and for a generated reply the model and how it
    answered (the responses export's columns without the bulky request and reply bodies), and its condition's
    model settings as the frozen `design` records them."""
    header = exports.response_export_header()
    settings = {
        c["name"]: json.dumps(
            {k: c["llm"][k] for k in ("provider", "model", "decoding", "seed")},
            sort_keys=True,
            ensure_ascii=False,
        )
        for c in design["conditions"]
        if c.get("llm")
    }
    conditions = tuple(study.conditions.order_by("position", "name").values_list("name", flat=True))
    columns = [
        row_id_column("reply"),
        Column("response_id", "integer", "The reply's id (answers refer to it).", True, unique=True),
        Column("condition", "string", "The condition that wrote the reply.", True, enum=conditions or None),
        Column("dialogue_id", "string", "The prompt's id in its corpus.", True),
        Column("emotion", "string", "The emotion the speaker felt.", True),
        Column("valence", "string", "The emotion's valence group."),
        Column("situation", "string", "The situation the speaker described.", True),
        Column("speaker_utterance", "string", "What the speaker said first.", True),
        Column("sample_index", "integer", "Which sample of the condition's replies to this prompt (0: first).",
               True, minimum=0),
        Column("text", "string", "The reply.", True),
        Column("source", "string", "Where the reply comes from (imported, generated, written).", True),
        Column("provider", "string", "The LLM provider, for a generated reply."),
        Column("model_requested", "string", "The model asked for."),
        Column("model_returned", "string", "The model the provider says answered."),
        Column("finish_reason", "string", "Why the model stopped."),
        Column("settings", "string", "The condition's model and settings (provider, model, decoding, seed; "
               "JSON), for an LLM condition."),
    ]  # fmt: skip
    return Table(
        key="items",
        title="Items",
        description="The prompts and every condition's replies to them; a generated reply's model and settings "
        "are in the generation log and in documentation/design.json.",
        columns=columns,
        rows=(
            [*row, settings.get(record_condition)]
            for row, record_condition in (
                (row, row[ITEM_COLUMNS.index("condition")])
                for row in project(header, exports.response_export_records(study=study), ITEM_COLUMNS)
            )
        ),
        primary_key=["response_id"],
    )


GENERATION_COLUMNS = [
    "response_id", "provider", "provider_kind", "model_requested", "model_returned", "system_fingerprint",
    "finish_reason", "input_tokens", "output_tokens", "cost_usd", "latency_ms", "attempts", "requested_at",
    "completed_at", "edited",
]  # fmt: skip


def generation_log_table(study: Study) -> Table:
    """One row per generated reply: the call that produced it (generation.selectors' provenance)."""
    rows = sorted(provenance_rows(study=study), key=lambda row: int(row["response_id"]))
    columns = [
        row_id_column("generated reply"),
        Column("response_id", "integer", "The reply generated (items' response_id).", True, unique=True),
        Column("provider", "string", "The provider's name on the platform."),
        Column("provider_kind", "string", "The provider's wire format."),
        Column("model_requested", "string", "The model asked for."),
        Column("model_returned", "string", "The model the provider says answered."),
        Column("system_fingerprint", "string", "The provider's fingerprint of its serving system."),
        Column("finish_reason", "string", "Why the model stopped."),
        Column("input_tokens", "integer", "Tokens sent.", minimum=0),
        Column("output_tokens", "integer", "Tokens received.", minimum=0),
        Column("cost_usd", "number", "What the call cost, in US dollars.", minimum=0),
        Column("latency_ms", "integer", "How long the call took, in milliseconds.", minimum=0),
        Column("attempts", "integer", "Calls made until it succeeded.", minimum=0),
        Column("requested_at", "datetime", "When it was asked (UTC)."),
        Column("completed_at", "datetime", "When it answered (UTC)."),
        Column("edited", "boolean", "A researcher edited the reply after generation."),
    ]
    return Table(
        key="generationlog",
        title="Generation log",
        description="How each generated reply was produced (provider, model, tokens, cost, times).",
        columns=columns,
        rows=([row.get(c) for c in GENERATION_COLUMNS] for row in rows),
        primary_key=["response_id"],
        foreign_keys=[(["response_id"], "items", ["response_id"])],
    )
