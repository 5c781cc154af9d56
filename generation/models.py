"""Pre-generating the responses of a study's LLM conditions.

* Provider: an endpoint (OpenAI-compatible or Anthropic) with its limits and prices. Its key is typed in the admin
  (stored encrypted with the host it may go to: studies.sealed), or read from the environment variable it
  names, or there is none (a local endpoint).
* LLMConditionConfig: what an LLM condition asks of which model (one-to-one with studies.Condition, kind llm).
* GenerationItem: one unit of work per (prompt, condition, sample). Its status is the database's record of what is
  done; studies.Response's unique (prompt, condition, sample_index) makes a second stored response impossible.
* GenerationAttempt: every call made for an item, successful or not.
* ResponseProvenance: how a stored response was produced (exact request, raw reply, usage, cost, latency).
* ResponseEdit: the audit trail of an admin's edits to a generated response.
"""

import re
from urllib.parse import urlsplit, urlunsplit

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, URLValidator
from django.db import models
from django.db.models import Q

from generation.batch_records import BatchRecord
from generation.call_records import ProviderCallRecord
from generation.keys import key_env_problem, key_host_problem, provider_host
from generation.outbound import url_problem
from generation.placeholders import placeholders_validate
from generation.providers.registry import adapter_choices
from studies.fields import PlainTextField
from studies.models import Condition, Prompt, Response

#: The fields of a prompt a template may use.
TEMPLATE_PLACEHOLDERS = ("situation", "speaker_utterance", "emotion")

# The seed study's instruction, in our own words: what empathy is, then the task with its length targets.
DEFAULT_PROMPT_TEMPLATE = (
    "Empathy has three sides: understanding what another person feels and why (cognitive empathy), "
    "feeling along with them (affective empathy), and caring enough to want to help (compassionate empathy).\n\n"
    "You are having a conversation with a person. Read the situation they describe and what they said, then "
    "reply to them with empathy. Keep your reply to about 28 words on average, and never longer than 97 words.\n\n"
    "Situation: {situation}\n"
    "What they said: {speaker_utterance}\n"
    "Your reply:"
)


def template_validate(template: str, *, what: str = "the template") -> None:
    """Raise ValidationError naming every placeholder a template uses that a prompt does not have.

    Placeholders are Python format fields ({situation}); write {{ and }} for literal braces."""
    placeholders_validate(template, allowed=TEMPLATE_PLACEHOLDERS, what=what)


def system_prompt_validate(text: str) -> None:
    """The system prompt is filled like the prompt template (the same placeholders, {{ and }} for braces)."""
    template_validate(text, what="the system prompt")


def env_var_name_validate(value: str) -> None:
    """A provider's key variable: an API-key-like name, never one of the site's secrets nor another service's
    credential (generation.keys)."""
    problem = key_env_problem(value)
    if problem:
        raise ValidationError(problem)


_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?", re.IGNORECASE)


def endpoint_url_validate(value: str) -> None:
    """An http(s) URL, as URLValidator checks it, except that a host of one label is allowed too: a Docker
    Compose service (http://vllm:8000/v1) or a machine on the local network is named that way."""
    parts, checked = urlsplit(value), value
    host = parts.hostname or ""
    if host and "." not in host and ":" not in host and _LABEL.fullmatch(host):
        netloc = parts.netloc.replace(host, "localhost", 1) if "@" not in parts.netloc else parts.netloc
        checked = urlunsplit(parts._replace(netloc=netloc))
    URLValidator(schemes=["http", "https"])(checked)
    problem = url_problem(value)  # the host as typed (a decimal address is one label too)
    if problem:
        raise ValidationError(problem)


class EndpointFormField(forms.URLField):
    default_validators = [endpoint_url_validate]


class EndpointURLField(models.URLField):
    """A provider's base URL (see `endpoint_url_validate`). Deconstructs as a URLField: same column, no migration."""

    default_validators = [endpoint_url_validate]

    def formfield(self, **kwargs):
        return super().formfield(**{"form_class": EndpointFormField, **kwargs})

    def deconstruct(self):
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.URLField", args, kwargs


class Provider(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    # The wire format: one choice per registered adapter (generation.providers.registry).
    kind = models.CharField(max_length=16, choices=adapter_choices, default="openai")
    base_url = EndpointURLField(
        max_length=300,
        blank=True,
        help_text="Blank: the vendor's own endpoint. E.g. http://vllm:8000/v1 (a Compose service), http://localhost:11434/v1 (Ollama), "
        "https://api.together.xyz/v1, https://generativelanguage.googleapis.com/v1beta/openai/.",
    )
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        validators=[env_var_name_validate],
        verbose_name="API key environment variable",
        help_text="Or: the name of an environment variable of the server that holds the key (e.g. OPENAI_API_KEY). "
        "Used when no key is entered above. Leave both blank for an endpoint that needs no key.",
    )
    # A key typed in the admin: encrypted with its host (studies.sealed), never shown again.
    api_key_sealed = models.TextField(blank=True, editable=False)
    max_concurrency = models.PositiveIntegerField(default=8, validators=[MinValueValidator(1)])
    requests_per_minute = models.PositiveIntegerField(default=500, validators=[MinValueValidator(1)])
    tokens_per_minute = models.PositiveIntegerField(
        default=200_000, validators=[MinValueValidator(1)], help_text="Input plus output tokens."
    )
    price_input_per_million = models.DecimalField(max_digits=10, decimal_places=4, default=0)
    price_output_per_million = models.DecimalField(max_digits=10, decimal_places=4, default=0)
    timeout_seconds = models.FloatField(default=60.0, validators=[MinValueValidator(0.01)])
    max_attempts = models.PositiveSmallIntegerField(
        default=6,
        validators=[MinValueValidator(1), MaxValueValidator(50)],
        help_text="Calls per item before a transient error (timeout, 429, 5xx, malformed reply) fails it.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean_fields(self, exclude=None):
        """The fields, then: the key goes only to a host it is bound to (generation.keys) — checked once the key
        variable, the kind and the URL are each valid (a form leaves out the fields it already refused)."""
        super().clean_fields(exclude=exclude)
        if set(exclude or ()) & {"api_key_env", "kind", "base_url"} or not self.api_key_env:
            return
        problem = key_host_problem(self.api_key_env, provider_host(kind=self.kind, base_url=self.base_url))
        if problem:
            raise ValidationError({"api_key_env": problem})


class LLMConditionConfig(models.Model):
    condition = models.OneToOneField(
        Condition,
        on_delete=models.CASCADE,
        related_name="llm_config",
        limit_choices_to={"kind": Condition.Kind.LLM},
    )
    provider = models.ForeignKey(Provider, on_delete=models.PROTECT, related_name="configs")
    model = models.CharField(max_length=200, help_text="As the endpoint names it, e.g. gpt-4o-2024-08-06.")
    temperature = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0), MaxValueValidator(2)]
    )
    top_p = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0), MaxValueValidator(1)])
    max_tokens = models.PositiveIntegerField(default=256, validators=[MinValueValidator(1)])
    seed = models.BigIntegerField(null=True, blank=True, help_text="Sent where the endpoint supports it.")
    n_samples = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1)], help_text="Responses per prompt (sample 0, 1, …)."
    )
    system_prompt = PlainTextField(
        blank=True,
        validators=[system_prompt_validate],
        help_text="Filled like the prompt template: {situation}, {speaker_utterance}, {emotion} are replaced. "
        "Write {{ and }} for literal braces.",
    )
    prompt_template = PlainTextField(
        default=DEFAULT_PROMPT_TEMPLATE,
        validators=[template_validate],
        help_text="Placeholders: {situation}, {speaker_utterance}, {emotion}. Write {{ and }} for literal braces.",
    )

    class Meta:
        verbose_name = "LLM condition configuration"

    def __str__(self) -> str:
        return f"{self.condition} → {self.provider.name}/{self.model}"

    def clean(self):
        super().clean()
        if self.condition_id and self.condition.kind != Condition.Kind.LLM:
            raise ValidationError({"condition": "Only a condition of kind LLM can be generated."})


class GenerationJob(models.Model):
    """One start of generation for a condition (the log of who started what, its cancellation, and why it was
    stopped when the same permanent failure kept repeating)."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        CANCELLED = "cancelled", "Cancelled"
        STOPPED = "stopped", "Stopped after repeated failures"

    condition = models.ForeignKey(Condition, on_delete=models.CASCADE, related_name="generation_jobs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_by = models.CharField(max_length=150, blank=True)
    via = models.CharField(max_length=16, default="command")
    created_at = models.DateTimeField(auto_now_add=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    stopped_reason = models.TextField(
        blank=True, help_text="Why generation stopped by itself (the repeated failure and what to check)."
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.condition} ({self.status}, {self.created_at:%Y-%m-%d %H:%M})"


class GenerationBatch(BatchRecord):
    """One submission of a condition's pending items to OpenAI's Batch API (results within 24 h, half price).

    While a batch is open its items are held by it (running, claimed until the batch window ends), so no
    worker calls them one by one; when the batch ends each item is stored, failed with its reason, or given
    back to the ordinary generation."""

    condition = models.ForeignKey(Condition, on_delete=models.CASCADE, related_name="generation_batches")
    items_total = models.PositiveIntegerField(default=0)
    items_stored = models.PositiveIntegerField(default=0)
    items_failed = models.PositiveIntegerField(default=0)
    items_returned = models.PositiveIntegerField(
        default=0, help_text="Given back to ordinary generation (transient errors, missing from the output)."
    )
    checked_at = models.DateTimeField(null=True, blank=True)

    class Meta(BatchRecord.Meta):
        pass

    def __str__(self) -> str:
        return f"{self.condition} batch {self.provider_batch_id or self.pk} ({self.status})"

    @property
    def claim_token(self) -> str:
        return f"batch-{self.pk}"


class GenerationItem(models.Model):
    """One (prompt, condition, sample) to generate. Claimed with a conditional UPDATE (status + claim token)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    condition = models.ForeignKey(Condition, on_delete=models.CASCADE, related_name="generation_items")
    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="generation_items")
    sample_index = models.PositiveSmallIntegerField(default=0)
    job = models.ForeignKey(
        GenerationJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="items"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    regenerate = models.BooleanField(
        default=False, help_text="Replace the stored response when this run succeeds."
    )
    attempts = models.PositiveIntegerField(default=0, help_text="Provider calls made in the current run.")
    claim_token = models.CharField(max_length=36, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    error_kind = models.CharField(max_length=32, blank=True)
    response = models.OneToOneField(
        Response, null=True, blank=True, on_delete=models.SET_NULL, related_name="generation_item"
    )
    batch = models.ForeignKey(
        GenerationBatch, null=True, blank=True, on_delete=models.SET_NULL, related_name="items"
    )
    cost = models.DecimalField(
        max_digits=14, decimal_places=8, default=0, help_text="Spend on this item, USD."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["condition", "prompt", "sample_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["prompt", "condition", "sample_index"], name="generation_item_unique_slot"
            ),
        ]
        indexes = [models.Index(fields=["condition", "status"], name="generation_item_cond_status")]

    def __str__(self) -> str:
        return f"{self.condition}/{self.prompt.dialogue_id}#{self.sample_index} ({self.status})"


class GenerationAttempt(models.Model):
    """One provider call made for an item. Never holds a key: only the request body and the reply body."""

    class Outcome(models.TextChoices):
        STORED = "stored", "Stored"
        DISCARDED = "discarded", "Succeeded, but the slot was already filled"
        TRANSIENT = "transient", "Transient error (retried)"
        PERMANENT = "permanent", "Permanent error"

    item = models.ForeignKey(GenerationItem, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    error_kind = models.CharField(max_length=32, blank=True)
    error = models.TextField(blank=True)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    retry_after = models.FloatField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()

    class Meta:
        ordering = ["item", "started_at"]

    def __str__(self) -> str:
        return f"attempt {self.number}: {self.outcome} {self.error_kind}".strip()


class ResponseProvenance(ProviderCallRecord):
    """How a generated response was produced. A regenerated response keeps its older provenance rows
    (superseded_at set); exactly one row per response is current."""

    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="provenance")
    item = models.ForeignKey(GenerationItem, null=True, on_delete=models.SET_NULL, related_name="provenance")
    request = models.JSONField(help_text="The exact request body sent (no headers, so no key).")
    raw_response = models.JSONField(help_text="The provider's reply body as received.")
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost = models.DecimalField(
        max_digits=14, decimal_places=8, default=0, help_text="USD, at the provider's prices."
    )
    latency_ms = models.PositiveIntegerField()
    attempts = models.PositiveIntegerField()
    requested_at = models.DateTimeField()
    completed_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    superseded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["response", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["response"], condition=Q(superseded_at__isnull=True), name="provenance_one_current"
            )
        ]

    def __str__(self) -> str:
        return f"{self.provider_name}/{self.model_returned or self.model_requested} → response {self.response_id}"


class ResponseEdit(models.Model):
    """Audit trail: an admin changed a response's text (who, when, before, after)."""

    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="edits")
    editor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    editor_username = models.CharField(max_length=150)
    edited_at = models.DateTimeField(auto_now_add=True)
    before = models.TextField()
    after = models.TextField()
    note = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["response", "edited_at"]

    def __str__(self) -> str:
        return f"edit of response {self.response_id} by {self.editor_username}"


class GeneratedResponse(Response):
    """The admin's review queue: the study's responses seen from the generation side."""

    class Meta:
        proxy = True
        verbose_name = "generated response (review)"
        verbose_name_plural = "generated responses (review)"


from generation.budget import SpendReservation, StudyBudget  # noqa: E402, F401  (live calls' spending limits)
from generation.judge_models import Judge, JudgeBatch, JudgeRating  # noqa: E402, F401  (the LLM judge)
from generation.live_models import LiveCall  # noqa: E402, F401  ("respond now" calls)
from generation.questionnaire_models import QuestionnaireExchange  # noqa: E402, F401  (EmotionBench LLM subjects)
