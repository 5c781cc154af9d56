"""The kinds' models and settings in their packages (studies/0018-0019, kinds/rating/0001-0002, kinds/pairwise/0001):
a database at the schema before them, holding studies of all three kinds with settings other than the defaults and
their answers, migrates to the new layout with every study's settings and every answer intact, and ends with the
schema of a fresh database. Migrated back, the rating settings are on Study again."""

import pytest
from django.apps import apps
from django.core.exceptions import FieldDoesNotExist
from django.db import connection
from django.db.migrations.autodetector import MigrationAutodetector
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.state import ProjectState

from tests.studies.test_migrations import latest, migrate, schema

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

# The schema before the kinds' packages had models: Rating, PairItem and PairwiseSettings in the studies app, the
# rating kind's settings on Study.
BEFORE = [("studies", "0017_authenticity_answers_and_sound")]
RATING_SETTINGS = ("scale_question", "ask_teq", "target_ratings_per_response")
# Non-default rating settings for the first rating study, the defaults (as stored) for the second.
CUSTOM = {"scale_question": "How kind is the reply?", "ask_teq": True, "target_ratings_per_response": 3}
SCALE = [{"value": 1, "label": "Kind"}, {"value": 2, "label": "Unkind"}]
PAIRWISE = {
    "question": "Which is kinder?",
    "focal_design": True,
    "adaptive_after": 40,
    "adaptive_max_share": 0.3,
}
QUESTIONNAIRE = {
    "ask_demographics": True,
    "randomise_item_order": False,
    "llm_default_runs": 7,
    "llm_evoked_runs": 3,
    "significance_level": 0.05,
}


def rows(model, *fields) -> list[tuple]:
    return list(model.objects.order_by("pk").values_list("pk", *fields))


def _rating_study(old, slug, prompt_id, **fields):
    study = old.get_model("studies", "Study").objects.create(slug=slug, title=slug, kind="rating", **fields)
    condition = old.get_model("studies", "Condition").objects.create(study=study, name="human", kind="human")
    emotion = old.get_model("studies", "Emotion").objects.first()
    prompt = old.get_model("studies", "Prompt").objects.create(
        study=study, emotion=emotion, dialogue_id=prompt_id, situation="s", speaker_utterance="u"
    )
    response = old.get_model("studies", "Response").objects.create(
        prompt=prompt, condition=condition, text="r"
    )
    participant = old.get_model("studies", "Participant").objects.create(
        study=study, condition=condition, external_id=f"{slug}-P1", seed=1
    )
    return study, condition, prompt, response, participant


def _seed(old) -> None:
    """Studies of the three kinds and their answers, written through the models of the schema BEFORE."""
    Assignment = old.get_model("studies", "Assignment")
    Rating = old.get_model("studies", "Rating")
    # Rating: one study with its own settings, traps and scale, one with the defaults as stored.
    custom, *_, response, participant = _rating_study(
        old, "rating-custom", "c1", scale=SCALE, trap_repeat_items=2, trap_picture=True, **CUSTOM
    )
    second = old.get_model("studies", "Participant").objects.create(
        study=custom, condition=participant.condition, external_id="rating-custom-P2", seed=2
    )
    for rater, value in ((participant, 1), (second, 2)):
        page = Assignment.objects.create(participant=rater, position=0, kind="response", response=response)
        Rating.objects.create(assignment=page, value=value, response_time_ms=1200 + value)
    plain, *_, response, participant = _rating_study(old, "rating-plain", "p1")
    page = Assignment.objects.create(participant=participant, position=0, kind="response", response=response)
    Rating.objects.create(assignment=page, value=3)

    # Pairwise: its settings, a known-answer pair and two answered pages (a pair and the known-answer pair).
    pairwise, condition, prompt, left, participant = _rating_study(old, "pairs", "q1")
    pairwise.kind = "pairwise"
    pairwise.save()
    right = old.get_model("studies", "Condition").objects.create(study=pairwise, name="gpt", kind="llm")
    right_reply = old.get_model("studies", "Response").objects.create(
        prompt=prompt, condition=right, text="r2"
    )
    old.get_model("studies", "PairwiseSettings").objects.create(study=pairwise, **PAIRWISE)
    check = old.get_model("studies", "PairAttentionCheck").objects.create(
        study=pairwise, emotion_label="sad", situation="s", speaker_utterance="u", good_reply="g", poor_reply="p",
        after_item=1,
    )  # fmt: skip
    PairItem = old.get_model("studies", "PairItem")
    PairItem.objects.create(
        participant=participant, position=0, prompt=prompt, left=left, right=right_reply, choice="right",
        both_inadequate=True, response_time_ms=900, shown_at="2026-01-01T10:00Z", answered_at="2026-01-01T10:01Z",
    )  # fmt: skip
    PairItem.objects.create(
        participant=participant, position=1, known_answer=check, good_on_left=False, choice="left",
        shown_at="2026-01-01T10:02Z", answered_at="2026-01-01T10:03Z",
    )  # fmt: skip

    # Questionnaire: its settings with an instrument, a situation, a participant's two runs and their answers.
    questionnaire = old.get_model("studies", "Study").objects.create(
        slug="feel", title="feel", kind="questionnaire"
    )
    condition = old.get_model("studies", "Condition").objects.create(
        study=questionnaire, name="human", kind="human"
    )
    instrument = old.get_model("studies", "Instrument").objects.create(
        name="PANAS-test", scale_min=1, scale_max=5
    )
    old.get_model("studies", "QuestionnaireSettings").objects.create(
        study=questionnaire, instrument=instrument, **QUESTIONNAIRE
    )
    situation = old.get_model("studies", "Situation").objects.create(
        emotion="Anger", factor_index=1, factor_name="f", index=1, text="t"
    )
    old.get_model("studies", "StudySituation").objects.create(study=questionnaire, situation=situation)
    participant = old.get_model("studies", "Participant").objects.create(
        study=questionnaire, condition=condition, external_id="feel-P1", seed=2
    )
    Run = old.get_model("studies", "QuestionnaireRun")
    for phase, where in (("default", None), ("evoked", situation)):
        run = Run.objects.create(
            study=questionnaire, condition=condition, participant=participant, subject_key="feel-P1", phase=phase,
            situation=where, item_order=[2, 1], source="participant",
        )  # fmt: skip
        for item, value in ((1, 4), (2, 2)):
            old.get_model("studies", "QuestionnaireAnswer").objects.create(
                run=run, item_number=item, value=value, position=item
            )


def test_a_database_of_all_three_kinds_migrates_to_the_kinds_packages_with_its_settings_and_answers():
    fresh = schema()
    old = migrate(BEFORE)
    _seed(old)
    Study = old.get_model("studies", "Study")
    settings_before = {
        slug: values for slug, *values in Study.objects.values_list("slug", *RATING_SETTINGS, "scale")
    }
    traps_before = list(Study.objects.order_by("pk").values_list("pk", "trap_repeat_items", "trap_picture"))
    ratings = rows(
        old.get_model("studies", "Rating"), "assignment_id", "value", "response_time_ms", "created_at"
    )
    pair_items = rows(
        old.get_model("studies", "PairItem"),
        "participant_id", "position", "prompt_id", "left_id", "right_id", "known_answer_id", "good_on_left",
        "choice", "both_inadequate", "response_time_ms", "shown_at", "answered_at",
    )  # fmt: skip
    pairwise = rows(old.get_model("studies", "PairwiseSettings"), "study_id", *PAIRWISE)
    questionnaire = rows(
        old.get_model("studies", "QuestionnaireSettings"), "study_id", "instrument_id", *QUESTIONNAIRE
    )
    answers = rows(
        old.get_model("studies", "QuestionnaireAnswer"), "run__phase", "item_number", "value", "position"
    )

    new = migrate(latest())

    assert schema() == fresh  # the state-only moves left the tables as a fresh database has them
    Study = new.get_model("studies", "Study")
    RatingSettings = new.get_model("rating", "RatingSettings")
    # Every rating study has its settings row with its own values; no other kind's study has one.
    assert {
        slug: [*values, scale]
        for slug, scale, *values in RatingSettings.objects.values_list(
            "study__slug", "study__scale", *RATING_SETTINGS
        )
    } == {slug: values for slug, values in settings_before.items() if slug.startswith("rating-")}
    assert settings_before["rating-custom"] == [*CUSTOM.values(), SCALE]
    assert (
        list(Study.objects.order_by("pk").values_list("pk", "trap_repeat_items", "trap_picture"))
        == traps_before
    )
    for field in RATING_SETTINGS:
        with pytest.raises(FieldDoesNotExist):
            Study._meta.get_field(field)
    # The answers, row for row, in the kinds' models.
    Rating = new.get_model("rating", "Rating")
    assert (
        rows(Rating, "assignment_id", "value", "response_time_ms", "created_at") == ratings
        and len(ratings) == 3
    )
    assert Rating.objects.get(pk=ratings[0][0]).assignment.participant.study.slug == "rating-custom"
    assert rows(
        new.get_model("pairwise", "PairItem"),
        "participant_id", "position", "prompt_id", "left_id", "right_id", "known_answer_id", "good_on_left",
        "choice", "both_inadequate", "response_time_ms", "shown_at", "answered_at",
    ) == pair_items and len(pair_items) == 2  # fmt: skip
    assert rows(new.get_model("pairwise", "PairwiseSettings"), "study_id", *PAIRWISE) == pairwise
    assert pairwise[0][2:] == tuple(PAIRWISE.values())
    assert rows(
        new.get_model("studies", "QuestionnaireSettings"), "study_id", "instrument_id", *QUESTIONNAIRE
    ) == (questionnaire)
    assert (
        rows(
            new.get_model("studies", "QuestionnaireAnswer"), "run__phase", "item_number", "value", "position"
        )
        == (answers)
        and len(answers) == 4
    )

    # And back: the settings return to Study's columns.
    old = migrate(BEFORE)
    assert {
        slug: values
        for slug, *values in old.get_model("studies", "Study").objects.values_list(
            "slug", *RATING_SETTINGS, "scale"
        )
    } == settings_before
    migrate(latest())


def test_the_models_as_declared_are_the_migrations_state():
    """Nothing left to migrate after the moves (what `makemigrations --check` says)."""
    loader = MigrationExecutor(connection).loader
    changes = MigrationAutodetector(loader.project_state(), ProjectState.from_apps(apps)).changes(
        graph=loader.graph
    )
    assert changes == {}
