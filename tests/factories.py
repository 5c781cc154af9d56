"""factory_boy factories for the domain; every app's tests build their data through these."""

import factory

from kinds.pairwise.models import PairwiseSettings
from kinds.rating.models import RatingSettings
from studies import models


class EmotionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Emotion
        django_get_or_create = ("name",)

    name = factory.Iterator(["joyful", "sad", "proud", "afraid"])
    valence = factory.LazyAttribute(
        lambda o: models.Valence.POSITIVE if o.name in {"joyful", "proud"} else models.Valence.NEGATIVE
    )


RATING_SETTINGS = [f.name for f in RatingSettings._meta.concrete_fields if f.name not in ("id", "study")]


class StudyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Study

    slug = factory.Sequence(lambda n: f"study-{n}")
    title = factory.Sequence(lambda n: f"Study {n}")
    consent_text = "You are invited to rate responses in short conversations."
    instructions_text = "Rate how empathetic each response is."
    completion_code = "C0MPLETE"
    screened_out_code = "SCREENED"
    failed_checks_code = "FAILEDCK"
    items_per_participant = 3
    quota_per_condition = 10

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        """The rating kind's own settings given with the study's fields (RATING_SETTINGS: ask_teq,
        scale_question, target_ratings_per_response) go to its RatingSettings row."""
        own = {name: kwargs.pop(name) for name in RATING_SETTINGS if name in kwargs}
        study = super()._create(model_class, *args, **kwargs)
        if own:
            RatingSettings.objects.create(study=study, **own)
        return study


class ConditionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Condition

    study = factory.SubFactory(StudyFactory)
    name = factory.Sequence(lambda n: f"cond{n}")
    label = factory.LazyAttribute(lambda o: o.name)


class PromptFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Prompt

    study = factory.SubFactory(StudyFactory)
    dialogue_id = factory.Sequence(lambda n: f"hit:{n}_conv:{n}")
    emotion = factory.SubFactory(EmotionFactory)
    situation = factory.Faker("sentence")
    speaker_utterance = factory.Faker("sentence")


class ResponseFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Response

    prompt = factory.SubFactory(PromptFactory)
    condition = factory.SubFactory(ConditionFactory, study=factory.SelfAttribute("..prompt.study"))
    text = factory.Faker("sentence")


class ParticipantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Participant

    study = factory.SubFactory(StudyFactory)
    external_id = factory.Sequence(lambda n: f"pid{n:05d}")


# --- Assignment and the participant flow ---------------------------------------------------------------


class AttentionCheckFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.AttentionCheck

    study = factory.SubFactory(StudyFactory)
    situation = "This page checks that you are reading carefully."
    speaker_utterance = "Please read the response below."
    response_text = "To show you are paying attention, please choose Okay for this one."
    expected_value = 2
    after_item = 1


class SituationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Situation

    emotion = "Anger"
    factor_index = 1
    factor_name = "Blaming"
    index = factory.Sequence(lambda n: n + 1)
    text = factory.Faker("sentence")


def rating_study_build(
    *, conditions: int = 2, prompts: int = 12, state: str = models.Study.State.LIVE, **study_fields
) -> models.Study:
    """A rating study with `conditions` conditions, each answering the same `prompts` prompts."""
    study = StudyFactory(state=state, **study_fields)
    arms = [ConditionFactory(study=study, name=f"arm{i}", position=i) for i in range(conditions)]
    for _ in range(prompts):
        prompt = PromptFactory(study=study)
        for arm in arms:
            ResponseFactory(prompt=prompt, condition=arm)
    return study


QUESTIONNAIRE_SETTINGS = [
    f.name for f in models.QuestionnaireSettings._meta.concrete_fields if f.name not in ("id", "study")
]


def questionnaire_study_create(**fields) -> models.Study:
    """A questionnaire study: the Study row from the study's fields, its QuestionnaireSettings from the kind's
    own (QUESTIONNAIRE_SETTINGS: instrument, ask_demographics, randomise_item_order, ...)."""
    own = {name: fields.pop(name) for name in QUESTIONNAIRE_SETTINGS if name in fields}
    fields.setdefault("kind", models.Study.Kind.QUESTIONNAIRE)
    study = models.Study.objects.create(**fields)
    models.QuestionnaireSettings.objects.create(study=study, **own)
    return study


def pairwise_study_build(
    *,
    conditions: int = 3,
    prompts: int = 12,
    focal_design: bool = False,
    known_answers: tuple[int, ...] = (),
    state: str = models.Study.State.LIVE,
    **study_fields,
) -> models.Study:
    """A pairwise study: `conditions` conditions (arm0 the baseline) answering the same `prompts` prompts, its
    PairwiseSettings, and a known-answer pair after each number of regular pairs in `known_answers`."""
    study = rating_study_build(
        conditions=conditions, prompts=prompts, state=state, kind=models.Study.Kind.PAIRWISE, **study_fields
    )
    study.conditions.filter(name="arm0").update(is_baseline=True)
    PairwiseSettings.objects.create(study=study, focal_design=focal_design)
    for after in known_answers:
        models.PairAttentionCheck.objects.create(
            study=study,
            emotion_label="anxious",
            situation="I have a job interview tomorrow.",
            speaker_utterance="I cannot sleep.",
            good_reply="That sounds stressful; it shows how much this matters to you.",
            poor_reply="Whatever.",
            after_item=after,
        )
    return study
