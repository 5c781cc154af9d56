"""What a study kind provides: the one declared interface every kind implements (see registry.py).

The spine (studies/) owns what every kind shares: the study and its lifecycle, conditions, participants and
their lifecycle (enrol → steps → complete / return / time out / screen out, studies/participants.py), the
entry and consent pages, recruiting-platform handling and exactly-once answers. A kind supplies the rest:

* **participant steps** — `steps(study)`: the kind's steps between consent and done, in order, and `pages`:
  for each step, the dotted path of the page that shows and answers it (a `studies.pages.StepPage`, resolved
  when first needed, so studies/ never imports the app that serves pages);
* **assignment policy** — `enrollable` (which conditions can take a newcomer at all) and
  `assignments_create` (the pages a new participant gets, balanced by live counts, see studies/balancing.py);
* **launch checks** — `launch_problems`, and `launch_panel`: the dotted path of a callable (study, query) → HTML
  shown on the launch page and the quotas step, `query` holding what the researcher typed in it (the rating kind's: power before launch, from analysis);
* **status counts** — `status_columns`, `status_counts`, `status_totals` and `status_summary` (per-condition
  numbers and a design summary for the live status page and the `study_status` command);
* **analysis entry** — `analysis`: the dotted path of an object with `analyze(study, options)` and
  `report_write(study, options, out_dir)` (see kinds/rating/entry.py), and `analysis_page`: the URL name of the
  analysts' page of a study of this kind (the dashboard's studies are analysed ahead, analysis/snapshots.py);
* **admin pieces** — `settings_model` (the kind's own settings, one-to-one with Study), `admin_fieldsets` (the
  Study fields only this kind reads), `traps` (the authenticity traps its studies offer: the admin shows them in
  one fieldset) and `admin_inlines` (shown on the study's admin page) and `generation_admin_view` (the kind's page under Generation, when its models
  answer in their own way), as dotted paths resolved by the admin;
* **what researchers read** — `analysis_plan` (the primary and secondary tests its analysis runs: the
  pre-registration prints them, the analysis reports the primary as primary), `prereg_procedure` (its lines of
  the pre-registration's procedure: question, scale or choices, checks), `setup_texts` (the setup's and the
  welcome page's words) and `worked_example_form` with `example_answers` (how its worked examples are written);
* **capabilities** — what the kind's studies offer beyond the spine, each left out by a kind that does not
  offer it: `corpus_import` (prompts and responses from a corpus file), `judged` (LLM judges answer its
  items, asked and read by its `judge_format`), `exclusion_flags` (each participant's flags under the declared exclusion rules, while it runs),
  `power_planner` (power before launch), `answers_export` (its own answers export), `further_exports` (its exports beside the spine's), `bundle` (its part of the open-science bundle), `wave_keeps_conditions` (what a wave copies), `questionnaire(study)` (questionnaire runs: an
  instrument answered before and after a situation, by people and models).

A new kind is one subclass and one `registry.register(...)` call; nothing else branches on `study.kind`: code
outside studies/kinds/ asks the kind (`kind_of(study).judged`), and tests/test_architecture.py fails on a
comparison with a kind.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from django.db.models import Q
from django.forms.models import model_to_dict
from django.urls import reverse
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from studies.models import Assignment, Condition, Participant, QuestionnaireSettings, Study

CONSENT = "consent"
DONE = "done"
INSTRUCTIONS = "instructions"
# The spine's own steps: shared by every kind (entry, outcome and return pages need no step); a kind whose
# participants read the study's instructions puts INSTRUCTIONS among its steps and gets the shared page. Their
# pages belong to the participant front, which registers them when it starts (`spine_page_register`).
SPINE_STEPS = (CONSENT, INSTRUCTIONS)
SPINE_PAGES: dict[str, object] = {}
SPINE_STEP_LABELS = {CONSENT: "Consent", DONE: "Done"}

# The researcher's setup steps (studies/admin_setup.py, the "New study" path), in order. A launch problem names
# the step that fixes it; a kind's problem given as plain text belongs to MATERIAL.
MATERIAL = "material"  # what participants are shown: a corpus, an instrument and situations, ...
CONDITIONS = "conditions"  # conditions, their models and their responses
TEXTS = "texts"  # consent, instructions and what the kind shows with them
CHECKS = "checks"  # attention checks and exclusion rules
QUOTAS = "quotas"  # quotas against power and coverage
PREVIEW = "preview"
LAUNCH = "launch"  # recruiting platform, outcome codes, launch
SETUP_STEPS = (MATERIAL, CONDITIONS, TEXTS, CHECKS, QUOTAS, PREVIEW, LAUNCH)

# The authenticity traps' settings (fields of Study, studies/authenticity_models.py), in the order the admin shows
# them in one fieldset; each kind says which its studies offer (`StudyKind.traps`). The hidden instruction is on
# the spine's consent page, so every kind offers it; the consistency pairs and the picture check are placed among
# a kind's items (`authenticity.traps_place`), by the kinds that place them.
TRAP_HIDDEN_INSTRUCTION = "trap_hidden_instruction"
TRAP_FIELDS = (TRAP_HIDDEN_INSTRUCTION, "trap_repeat_items", "trap_picture")


class LaunchProblem(NamedTuple):
    """What stops a launch, and the setup step that fixes it."""

    step: str
    text: str


def corpus_coverage_problems(study: Study, conditions: list[Condition], *, asks: str) -> list[LaunchProblem]:
    """The launch checks of a kind that shows a corpus' prompts and every condition's replies to them: at least
    `items_per_participant` prompts (`asks`: what each participant does with that many, for the message), and
    every condition a reply (sample 0) to every prompt. `conditions` carry `with_response` (prompts with a
    sample-0 response)."""
    problems = []
    prompts = study.prompts.count()
    if prompts < study.items_per_participant:
        problems.append(
            LaunchProblem(
                MATERIAL,
                f"the study has {prompts} prompts but each participant {asks}: import a corpus or lower items "
                "per participant",
            )
        )
    for condition in conditions:
        missing = prompts - condition.with_response
        if missing:
            problems.append(
                LaunchProblem(
                    CONDITIONS,
                    f"condition '{condition.name}' has no response for {missing} of {prompts} prompts "
                    "(generate or import them)",
                )
            )
    return problems


def instructions_problems(study: Study, *, what: str) -> list[LaunchProblem]:
    """Empty instructions stop a launch of a kind whose participants read them (`what`: what they are told)."""
    if study.instructions_text.strip():
        return []
    return [LaunchProblem(TEXTS, f"the instructions are empty: say {what}")]


def spine_page_register(step: str, page) -> None:
    """The participant front's page of a spine step (SPINE_STEPS), registered by its app's `ready()`."""
    if step not in SPINE_STEPS:
        raise ValueError(f"{step!r} is not a spine step (one of {SPINE_STEPS})")
    SPINE_PAGES[step] = page


def resolved(capability):
    """A kind's capability given as the object itself, or as the dotted path of one inside the kind's own package
    (resolved when first asked: a kind's heavier parts, its analysis, load only when used)."""
    return import_string(capability) if isinstance(capability, str) else capability


class PlannedTest(NamedTuple):
    """One test of a kind's planned analysis: `key`, what the kind's analysis calls it (it reports the test under
    this key); `name`, the test in words (the pre-registration and the analysis page print it)."""

    key: str
    name: str


class AnalysisPlan(NamedTuple):
    """What a kind's analysis runs: the one primary test (the one that decides, reported first as primary) and the
    secondary tests. The pre-registration declares it and the kind's analysis reads it (studies/design.py
    `analysis_plan_of`: as frozen at launch), so the two cannot name different tests."""

    primary: PlannedTest
    secondary: tuple[PlannedTest, ...] = ()

    def as_json(self) -> dict:
        return {
            "primary": self.primary._asdict(),
            "secondary": [test._asdict() for test in self.secondary],
        }

    @classmethod
    def from_json(cls, value: dict) -> AnalysisPlan:
        return cls(
            primary=PlannedTest(**value["primary"]),
            secondary=tuple(PlannedTest(**test) for test in value.get("secondary", [])),
        )


class SetupTexts(NamedTuple):
    """What the researcher's setup and the participant's first page say about a kind's task, in its words."""

    answers: str  # the setup's texts step: what participants answer, e.g. "the scale and the worked examples"
    items: str  # what one participant's items are called, plural: "items", "pairs"
    welcome: str  # the welcome page's sentence; {n} is the items per participant


class WorkedExampleForm(NamedTuple):
    """How a kind's worked examples are written in the setup (studies/admin_forms.py) and shown with the
    instructions: the texts of an example in the order participants read them ((key, label) each; "explanation",
    the why, always comes last, after the answer), those it cannot do without, and its answer: the key it is
    stored under and what it is called (its choices: `StudyKind.example_answers`)."""

    texts: tuple[tuple[str, str], ...]
    required: tuple[str, ...]
    answer_key: str
    answer_label: str
    help_text: str

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key of a stored example, in order."""
        return (*(key for key, _ in self.texts), self.answer_key, "explanation")


# The rating kind's examples (and any kind's that does not declare its own): a reply rated on the study's scale.
SCALE_EXAMPLES = WorkedExampleForm(
    texts=(
        ("emotion", "Emotion"),
        ("situation", "Situation"),
        ("speaker_utterance", "Speaker 1 says"),
        ("response", "Speaker 2 replies"),
    ),
    required=("situation", "speaker_utterance", "response"),
    answer_key="rating",
    answer_label="Its rating",
    help_text="Shown with the instructions. Leave an example's texts blank to remove it; each is rated by one of "
    "the scale's labels (as saved: change the scale first, save, then rate the examples).",
)


class StudyKind(ABC):
    """One kind of study. Subclass, fill in the class attributes, implement the abstract methods (the others have
    defaults), register once."""

    name: ClassVar[str]  # the value stored in Study.kind, and the kind's one name in code
    label: ClassVar[str]  # shown in the admin's kind menu
    # Every step this kind can put a participant on (its own, not consent/done), with a label for the admin.
    step_labels: ClassVar[dict[str, str]] = {}
    # step -> dotted path of the page object (get/post) that serves it.
    pages: ClassVar[dict[str, str]] = {}
    # The model of the kind's settings (one-to-one with Study, related name `<name>_settings`).
    settings_model: ClassVar[type | None] = None
    # (key, table header) of the per-condition numbers `status_counts` returns, in table order.
    status_columns: ClassVar[list[tuple[str, str]]] = []
    analysis: ClassVar[str | None] = None
    admin_fieldsets: ClassVar[list[tuple[str, dict]]] = []  # the kind's own fields of Study, in the admin
    # The authenticity traps its studies offer, among TRAP_FIELDS: by default the hidden instruction alone.
    traps: ClassVar[tuple[str, ...]] = (TRAP_HIDDEN_INSTRUCTION,)
    admin_inlines: ClassVar[list[str]] = []
    generation_admin_view: ClassVar[str | None] = None  # (model_admin, request, study) -> HttpResponse
    launch_panel: ClassVar[str | None] = (
        None  # (study, query) -> safe HTML for the launch page, e.g. power before launch on typed shares
    )

    # --- capabilities (generic code asks them; a kind that lacks one leaves the default) ----------------
    # The URL name (taking the study's slug) of the analysts' page; the admin links it. None: no page.
    analysis_page: ClassVar[str | None] = None
    # Dotted path of (request, study) -> HttpResponse: the kind's analysts' page served at /analysis/<slug>/ itself
    # (analysis/views.py `study_page`, which has checked the analyst), from analyses computed ahead
    # (analysis/snapshots.py, which then asks the kind's analysis entry for `page_render`). None: that address
    # redirects to `analysis_page`.
    analysis_view: ClassVar[str | None] = None
    # The URL patterns of the kind's own analysis pages (a list, or the dotted path of one in the kind's package),
    # added to the analysis app's (analysis/urls.py), so `analysis_page` may name one of them.
    analysis_urls: ClassVar[list | str | None] = None
    # (study, file name) -> HttpResponse: one output file of the kind's analysis, served by the API (Http404 when
    # there is no such file); None: the kind writes none.
    analysis_file: ClassVar[str | None] = None
    # () -> Study: the kind's live demo study, created when missing (`manage.py seed_demo`, `make run`).
    demo: ClassVar[str | None] = None
    # The demo study's staff pages `make run` prints beside its participant link: (what it is, its path with
    # `{slug}` for the demo study's slug), e.g. a page where staff take part in the demo.
    demo_staff_pages: ClassVar[tuple[tuple[str, str], ...]] = ()
    # () -> Study: a closed study of the kind with answers, for the analysis dashboard (`seed_demo`'s published
    # sample); None: the kind has none.
    demo_closed: ClassVar[str | None] = None
    # Prompts and responses come from a corpus file (studies/importers/corpus.py, the admin's "Import corpus").
    corpus_import: ClassVar[bool] = False
    # LLM judges answer the study's items (generation's Judge), asked and read by `judge_format`: one of
    # generation's judge formats (what a judge is sent, how its reply is read, which units it answers); a judged
    # kind that names none (None) has its responses rated on its scale, as the rating kind's are.
    judged: ClassVar[bool] = False
    judge_format: ClassVar[object | None] = None
    # Dotted path of (study) -> {participant id: the declared exclusion rules that exclude them, in words}: the
    # analysis's own computation, shown on the live status page and the participant list while the study runs.
    exclusion_flags: ClassVar[str | None] = None
    # Dotted path of (*, study, **options) -> the power plan before launch (analysis/study_power.py).
    power_planner: ClassVar[str | None] = None
    # Dotted path of (study, rules) -> (header, records): the study's answers export (analysis/exports.py serves it
    # as the `ratings` export). None: the kind's studies offer no answers export.
    answers_export: ClassVar[str | None] = None
    # Dotted path of (study, rules, *, pseudonymise) -> the same export already written as CSV lines (a
    # `CsvStream`: the rating kind's, by PostgreSQL), or None where it cannot serve `rules` (then `answers_export`).
    answers_export_lines: ClassVar[str | None] = None
    # Dotted path of (*, study) -> a small value that changes whenever the study's counted answers do (their count
    # and latest id): part of the fingerprint the analysis is cached and computed ahead under (analysis/services.py).
    answers_stamp: ClassVar[str | None] = None
    # Dotted path of (*, study) -> the study's counted answers on its scale, one row per answer (columns
    # value, participant_id, response_id, condition, emotion, valence and the exclusion rules' inputs): what a
    # judge rating on the scale is calibrated against (analysis/judge_report.py). A judged kind without a
    # `judge_format` names one.
    scale_answers: ClassVar[str | None] = None
    # Its further exports beside the spine's (name -> dotted path of (study, rules) -> (header, records)), served
    # by analysis/exports.py under their names like the spine's (e.g. the chat kind's turn-by-turn transcript).
    further_exports: ClassVar[dict[str, str]] = {}
    # Dotted path of (participant) -> (timed, judged), what the authenticity score reads of a finished
    # participant's answers (studies/authenticity_answers.py): (words on the page, ms from shown to answered) per
    # answered page, (their answer, the study's judges' answer) per item a judge answered. None: not read.
    answer_review: ClassVar[str | None] = None
    # A follow-up wave (studies/waves.py `study_extend`) keeps every parent condition with its replies, the new
    # conditions compared with them inside the wave, instead of a re-rating copy of the parent's baseline.
    wave_keeps_conditions: ClassVar[bool] = False
    # Attention checks are mixed into its pages (the study's AttentionCheck rows, expected answers on its scale).
    attention_checks: ClassVar[bool] = False
    # What the researcher's setup calls the material participants are shown (its first step).
    material_title: ClassVar[str] = "Study material"
    # The kind's part of the open-science bundle (analysis/bundle.py; the object or its dotted path, `resolved`):
    # its answers table and its own tables (`tables`), materials, its answers to the pre-registration's design
    # questions, the script that re-runs its headline analysis from the bundle alone (`script`, `requirements`,
    # `parameters`) and that headline as the platform computes it (`results`). None: no bundle.
    bundle: ClassVar[object | str | None] = None

    # The planned analysis: its primary and secondary tests (the pre-registration prints them, the analysis
    # reports the primary as primary). None: the kind has no analysis to declare.
    analysis_plan: ClassVar[AnalysisPlan | None] = None
    # What the setup and the welcome page say about the task, and how its worked examples are written.
    setup_texts: ClassVar[SetupTexts] = SetupTexts(
        answers="the settings of what they answer (e.g. the scale and worked examples)",
        items="items",
        welcome="You will read {n} short conversations and say how empathetic one of the answers is.",
    )
    worked_example_form: ClassVar[WorkedExampleForm] = SCALE_EXAMPLES

    # --- participant steps ---------------------------------------------------------------------------

    @abstractmethod
    def steps(self, study: Study) -> list[str]:
        """The kind's steps between consent and done, in order, for this study's settings."""

    def picture_options(self, study: Study) -> list[dict] | None:
        """The answers the picture check asks among (`{"value", "label"}` each, as the kind's page shows them;
        studies/authenticity_picture.py), or None: the kind offers no picture check (`trap_picture` is then
        not among its `traps`)."""
        return None

    # --- assignment policy ---------------------------------------------------------------------------

    def enrollable(self) -> Q:
        """Whether a condition (among the enrolling ones) has something to show a newcomer: a filter on
        Condition, asked by enrolment's choice (studies/balancing.py `condition_choose`). Every condition, by
        default."""
        return Q()

    @abstractmethod
    def assignments_create(
        self, participant: Participant, *, rng: random.Random, now: datetime
    ) -> list[Assignment]:
        """Creates the new participant's pages (in the enrolment's transaction, the study's row locked)."""

    # --- launch, status ------------------------------------------------------------------------------

    def launch_problems(self, study: Study, conditions: list[Condition]) -> list[str | LaunchProblem]:
        """What stops this study from launching, beyond the spine's checks (empty: nothing): each a
        LaunchProblem naming the setup step that fixes it, or plain text (the MATERIAL step's)."""
        return []

    def coverage_problems(self, study: Study, conditions: list[Condition]) -> list[str]:
        """Warnings (not launch problems) when the quotas cannot give the data the design asks for, e.g. too
        few participants to rate every response as often as planned. Empty by default."""
        return []

    def status_counts(self, study: Study, conditions: list[Condition]) -> dict[int, dict]:
        """Per condition id (every one of `conditions`), the numbers named by `status_columns`; a fixed
        number of queries."""
        return {}

    def status_totals(self, study: Study, per_condition: dict[int, dict]) -> dict:
        """Study-wide totals of the kind's numbers (shown under the table)."""
        return {}

    def status_summary(self, study: Study, status: dict) -> list[str]:
        """Short phrases describing the study's design, shown above the status table."""
        return []

    def status_notices(self, study: Study, status: dict) -> list[str]:
        """Warnings for the live status page and `study_status`, from the status figures (e.g. a condition whose
        quota has filled with responses still unrated). None by default."""
        return []

    # --- capabilities ----------------------------------------------------------------------------------

    def analysis_url(self, study: Study) -> str | None:
        """The address of the study's analysts' page (`analysis_page`); None for a kind without one."""
        return reverse(self.analysis_page, args=[study.slug]) if self.analysis_page else None

    def bundle_url(self, study: Study) -> str | None:
        """The address of the study's open-science bundle (a zip); None for a kind without one."""
        return reverse("analysis:bundle", args=[study.slug]) if self.bundle else None

    def checks(self, study: Study) -> tuple[int, str, str] | None:
        """The study's checks of careless answering, for the setup's checks step: (how many, what one is called,
        the anchor of their inline on the study's page); None for a kind without. The study's attention checks
        when the kind mixes them into its pages."""
        if not self.attention_checks:
            return None
        return study.attention_checks.count(), "attention check", "attention_checks-group"

    def example_answers(self, study: Study) -> list[tuple[object, str]]:
        """The answers a worked example can give, (stored value, label) each: the study's scale by default."""
        scale = study.scale if isinstance(study.scale, list) else []
        return [(o.get("value"), o.get("label", "")) for o in scale if isinstance(o, dict) and "value" in o]

    def prereg_procedure(self, study: Study, design: dict) -> list[str]:
        """The pre-registration's "Materials and procedure" lines of this kind (after the prompts line), from the
        design as frozen (`design["fields"]`, `design["kind_settings"]`, the checks): what participants are asked,
        on which scale or choices, how many items, which checks. None by default."""
        return []

    def questionnaire(self, study: Study) -> QuestionnaireSettings | None:
        """The study's questionnaire settings (instrument, item order, model runs, significance level) when its
        kind records questionnaire runs: an instrument answered before and after imagining a situation, by
        participants and by models (the EmotionBench design). None for a kind that records none."""
        return None

    # --- settings ------------------------------------------------------------------------------------

    def settings(self, study: Study):
        """The study's settings of this kind; a study that has none yet reads the defaults (an unsaved row:
        reading never writes). None for a kind without settings."""
        if self.settings_model is None:
            return None
        model = self.settings_model
        related = model._meta.get_field("study").remote_field.get_accessor_name()
        try:
            return getattr(study, related)
        except model.DoesNotExist:
            return model(study=study)

    def settings_values(self, study: Study) -> dict | None:
        """The study's settings of this kind as plain values, by field name in order (what the design freezes, the
        status and the API show); None for a kind without settings."""
        settings = self.settings(study)
        if settings is None:
            return None
        values = model_to_dict(settings, exclude=["id", "study"])
        return {key: values[key] for key in sorted(values)}

    def __repr__(self) -> str:
        return f"<study kind {self.name!r}>"
