"""The chat kind's exports (analysis/exports.py serves them; the dashboard's links, `manage.py export --what …`
and the API):

* `ratings` (the kind's `answers_export`): one row per conversation — both factors (the source, i.e. the
  condition, and the label shown), the opening, how it ended, its tokens and cost, and the rating: every PETS item
  (0–100, columns `pets_E1`…`pets_U4`), the order they were shown in, the factor scores and the total, the study's
  scale (value and label), the free text. Conversations without a rating are listed too (rated_at blank), so the
  export accounts for every participant who opened one.
* `transcript` (a further export): one row per turn, in order, with all its provenance — role, status, text,
  who answered (the source or the fallback, a responder's account), the sent / first-token / complete / shown
  times, the model, its settings, the full prompt, the seed, tokens, cost, finish reason, the safety result and
  the live call.

`chat_frame` is the analysis' one-row-per-conversation frame of the same rows (kinds/chat/analysis.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pandas as pd
from django.db.models import Count

from analysis.exclusions import ExclusionRules
from studies.models import Participant, Study

from .models import ChatRating, ChatSettings, Conversation, Turn
from .pets import KEYS as PETS_KEYS

CONVERSATION_HEADER = [
    "participant", "participant_status", "conversation", "source", "source_kind", "label", "opening_source",
    "situation", "opening_text", "state", "fallback_used", "crisis_shown_at", "crisis_count", "closed_by", "turns",
    "tokens_used", "cost", "created_at", "ended_at",
    *(f"pets_{key}" for key in PETS_KEYS),
    "pets_order", "pets_er", "pets_ut", "pets", "scale_value", "scale_label", "free_text", "response_time_ms",
    "rated_at",
]  # fmt: skip
TURN_HEADER = [
    "participant", "conversation", "source", "label", "index", "role", "status", "text", "answered_by",
    "fallback", "responder", "attempts", "sent_at", "first_token_at", "completed_at", "shown_at", "model",
    "settings", "prompt", "seed", "input_tokens", "output_tokens", "cost", "finish_reason", "safety",
    "live_call", "error",
]  # fmt: skip


def _json(value) -> str:
    return "" if value in (None, {}, []) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def scale_labels(study: Study) -> dict[int, str]:
    """{value: label} of the study's own scale."""
    try:
        scale = study.chat_settings.scale
    except ChatSettings.DoesNotExist:
        scale = ChatSettings(study=study).scale
    return {int(entry["value"]): str(entry["label"]) for entry in scale}


def conversation_records(study: Study, rules: ExclusionRules | None = None) -> Iterator[list]:
    """The `ratings` export's rows (module doc), in the order the conversations were created."""
    labels = scale_labels(study)
    conversations = (
        Conversation.objects.filter(participant__study=study, participant__is_preview=False)
        .select_related("participant", "condition", "rating")
        .order_by("created_at", "pk")
    )
    turn_counts = dict(
        Turn.objects.filter(conversation__participant__study=study)
        .order_by()
        .values_list("conversation_id")
        .annotate(n=Count("pk"))
    )
    for c in conversations.iterator(chunk_size=500):
        rating: ChatRating | None = getattr(c, "rating", None)
        items = [(rating.pets or {}).get(key, "") if rating else "" for key in PETS_KEYS]
        answered = [float(v) for v in items if v != ""]
        yield [
            c.participant.external_id, c.participant.status, c.pk, c.condition.name, c.condition.kind, c.label,
            c.opening_source, c.situation_id or "", c.opening_text, c.state, c.fallback_used,
            c.crisis_shown_at, c.crisis_count, c.closed_by, turn_counts.get(c.pk, 0), c.tokens_used, c.cost, c.created_at, c.ended_at,
            *items,
            " ".join(rating.pets_order) if rating else "",
            rating.pets_er if rating else "",
            rating.pets_ut if rating else "",
            sum(answered) / len(answered) if rating and len(answered) == len(PETS_KEYS) else "",
            rating.scale_value if rating else "",
            labels.get(rating.scale_value, "") if rating else "",
            rating.free_text if rating else "",
            rating.response_time_ms if rating else "",
            rating.created_at if rating else "",
        ]  # fmt: skip


def conversation_export(
    study: Study, rules: ExclusionRules | None = None
) -> tuple[list[str], Iterator[list]]:
    """The kind's `answers_export`: (header, records) of one row per conversation."""
    return list(CONVERSATION_HEADER), conversation_records(study, rules)


def turn_records(study: Study) -> Iterator[list]:
    """The transcript's rows (module doc): every stored turn, by conversation, then index."""
    turns = (
        Turn.objects.filter(
            conversation__participant__study=study, conversation__participant__is_preview=False
        )
        .select_related("conversation__participant", "conversation__condition", "condition", "responder")
        .order_by("conversation__created_at", "conversation_id", "index")
    )
    for t in turns.iterator(chunk_size=500):
        c = t.conversation
        yield [
            c.participant.external_id, c.pk, c.condition.name, c.label, t.index, t.role, t.status, t.text,
            t.condition.name if t.condition else "",
            bool(t.condition_id and t.condition_id != c.condition_id),
            t.responder.get_username() if t.responder else "",
            t.attempts, t.sent_at, t.first_token_at, t.completed_at, t.shown_at, t.model, _json(t.settings),
            _json(t.prompt), t.seed if t.seed is not None else "", t.input_tokens if t.input_tokens is not None else "",
            t.output_tokens if t.output_tokens is not None else "", t.cost, t.finish_reason, _json(t.safety),
            t.live_call_id or "", t.error,
        ]  # fmt: skip


def transcript_export(study: Study, rules: ExclusionRules | None = None) -> tuple[list[str], Iterator[list]]:
    """The kind's `transcript` export: (header, records) of one row per turn."""
    return list(TURN_HEADER), turn_records(study)


def chat_frame(study: Study) -> pd.DataFrame:
    """One row per rated conversation of a completed, non-preview participant: `participant`, `source` (the
    condition's name), `label`, `pets_1`…`pets_10` (E1…E6, U1…U4) and `scale` (the scale's label), the frame
    kinds/chat/stats.py analyses."""
    rows = (
        ChatRating.objects.filter(
            conversation__participant__study=study,
            conversation__participant__is_preview=False,
            conversation__participant__status=Participant.Status.COMPLETED,
        )
        .order_by("conversation__participant_id")
        .values_list(
            "conversation__participant_id",
            "conversation__condition__name",
            "conversation__label",
            "pets",
            "scale_value",
        )
    )
    labels = scale_labels(study)
    records = [
        {
            "participant": pid,
            "source": source,
            "label": label,
            **{f"pets_{i}": (pets or {}).get(key) for i, key in enumerate(PETS_KEYS, start=1)},
            "scale": labels.get(value),
        }
        for pid, source, label, pets, value in rows
    ]
    columns = [
        "participant",
        "source",
        "label",
        *(f"pets_{i}" for i in range(1, len(PETS_KEYS) + 1)),
        "scale",
    ]
    return pd.DataFrame.from_records(records, columns=columns)
