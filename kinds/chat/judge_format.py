"""The chat kind's judge format (`StudyKind.judge_format`): an LLM judge rates a whole conversation on the study's
own scale (ChatSettings.scale, Good / Okay / Bad by default), as its participant did after it. The judge's
machinery (rows, claims, retries, spend, batches, run pages; generation/services/judging.py) rates responses, so
each rated conversation is judged through one response that holds its transcript: `transcript_responses` writes,
once per conversation, a prompt `chat:<conversation id>` (its opening situation and first message) and a response
of the conversation's source whose text is the transcript ("Person: …" / "Partner: …" lines; the judge is not
told the label shown nor who answered), its source `judge_input`: no participant is shown it, so the study's
`responses` export leaves it out. The calibration against the participants' own answers is
kinds/chat/judge_analysis.py, on the analysts' page.
"""

from __future__ import annotations

from django.db import transaction

from generation.judge_formats import ScaleFormat, reply_value, scale_labels_problem
from studies.models import Emotion, Participant, Prompt, Response, Study

from .models import Conversation, Turn
from .turns import chat_settings

DIALOGUE_PREFIX = "chat:"
UNSPECIFIED = "unspecified"  # the emotion of a conversation's prompt: a conversation names none

DEFAULT_TRANSCRIPT_RUBRIC = (
    "You rate how empathetic a conversation partner was in a short written conversation.\n\n"
    "A person talked about a situation that stirred their emotions. Read the whole conversation and rate the "
    "partner's replies taken together:\n"
    "- Good: the partner understood what the person felt and why, and responded with care that fits the "
    "situation.\n"
    "- Okay: relevant and not unkind, but generic, shallow, or only partly acknowledging the feelings.\n"
    "- Bad: misread or ignored the feelings, dismissive, off-topic, inappropriate or incoherent.\n\n"
    "The situation: {situation}\n\n"
    "The conversation:\n{transcript}\n\n"
    "Answer with exactly one word, one of: {scale}."
)


def transcript_text(turns: list[Turn]) -> str:
    """The conversation as the judge reads it: one line per completed turn, the person's and the partner's (the
    platform's closing row, no one's words, left out)."""
    return "\n".join(
        f"{'Person' if t.role == Turn.Role.PARTICIPANT else 'Partner'}: {t.text.strip()}"
        for t in turns
        if t.status == Turn.Status.COMPLETE and not t.closes_conversation
    )


def transcript_responses(study: Study) -> dict[int, int]:
    """{conversation id: response id}: the response holding each rated conversation of a completed participant,
    written on first call for conversations that have none (module doc). Idempotent: a conversation's prompt is
    unique in the study by its dialogue id."""
    done = Conversation.objects.filter(
        participant__study=study,
        participant__is_preview=False,
        participant__status=Participant.Status.COMPLETED,
        rating__isnull=False,
    ).select_related("condition")
    have = dict(
        Response.objects.filter(
            prompt__study=study, prompt__dialogue_id__startswith=DIALOGUE_PREFIX
        ).values_list("prompt__dialogue_id", "pk")
    )
    out: dict[int, int] = {}
    missing = []
    for conversation in done.order_by("pk"):
        key = f"{DIALOGUE_PREFIX}{conversation.pk}"
        if key in have:
            out[conversation.pk] = have[key]
        else:
            missing.append(conversation)
    if missing:
        emotion, _ = Emotion.objects.get_or_create(name=UNSPECIFIED)
        for conversation in missing:
            turns = list(conversation.turns.order_by("index"))
            first = next((t.text for t in turns if t.role == Turn.Role.PARTICIPANT), "")
            with transaction.atomic():
                prompt, created = Prompt.objects.get_or_create(
                    study=study,
                    dialogue_id=f"{DIALOGUE_PREFIX}{conversation.pk}",
                    defaults={
                        "emotion": emotion,
                        "situation": conversation.opening_text or first,
                        "speaker_utterance": first,
                    },
                )
                response = (
                    Response.objects.create(
                        prompt=prompt,
                        condition=conversation.condition,
                        text=transcript_text(turns),
                        source=Response.Source.JUDGE_INPUT,
                    )
                    if created
                    else Response.objects.filter(prompt=prompt).first()
                )
            out[conversation.pk] = response.pk
    return out


class TranscriptFormat(ScaleFormat):
    """A conversation's transcript rated on the chat study's own scale."""

    placeholders = ("situation", "transcript", "scale")
    default_rubric = DEFAULT_TRANSCRIPT_RUBRIC
    answers = "each rated conversation's transcript on the study's scale"
    rates_scale = False  # calibrated against the participants' own answers by kinds/chat/judge_analysis.py

    def problems(self, study: Study) -> list[str]:
        problem = scale_labels_problem(chat_settings(study).scale)
        return [problem] if problem else []

    def fields(self, *, study: Study, response: Response, versus: Response | None) -> dict[str, str]:
        scale = chat_settings(study).scale
        return {"transcript": response.text, "scale": ", ".join(str(o["label"]) for o in scale)}

    def read(self, text: str, *, study: Study) -> tuple[int, bool | None]:
        return reply_value(text, scale=chat_settings(study).scale), None

    def responses_of(self, study: Study):
        """Every rated conversation's transcript response (written when missing)."""
        return Response.objects.filter(pk__in=set(transcript_responses(study).values()))


TRANSCRIPTS = TranscriptFormat()
