"""The researcher's home (the admin index), "New study" and the guided setup: studies first with their state and
what they miss, one page per step saying what is missing and where it is done, for every kind."""

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from generation.models import GenerationItem
from kinds.rating.models import RatingSettings
from studies.models import Condition, Participant, Study
from tests.factories import (
    AttentionCheckFactory,
    ConditionFactory,
    ParticipantFactory,
    PromptFactory,
    ResponseFactory,
    StudyFactory,
)
from tests.studies.helpers import public_csv, public_rows

pytestmark = pytest.mark.django_db


def rating_study(slug: str, *, prompts: int = 4, **fields) -> Study:
    study = StudyFactory(slug=slug, items_per_participant=2, **fields)
    human = ConditionFactory(study=study, name="human", is_baseline=True)
    for _ in range(prompts):
        ResponseFactory(prompt=PromptFactory(study=study), condition=human)
    return study


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_home_shows_the_studies_first_with_their_state_and_what_they_miss(staff_client):
    rating_study("ready-one", title="Ready one")
    rating_study("no-texts", title="No texts", consent_text="", completion_code="")
    busy = rating_study("busy", title="Busy")
    gpt = ConditionFactory(study=busy, name="gpt", kind=Condition.Kind.LLM)
    GenerationItem.objects.create(condition=gpt, prompt=busy.prompts.first())
    live = rating_study("running", title="Running", state=Study.State.LIVE)
    ParticipantFactory(study=live, condition=live.conditions.first(), status=Participant.Status.COMPLETED)
    ParticipantFactory(study=live, condition=live.conditions.first(), is_preview=True)  # never counted

    page = staff_client.get(reverse("admin:index")).content.decode()
    text = text_of(page)
    assert text.index("New study") < text.index("Studies") < text.index("System")
    # Tokens, sign-in and lock-out records sit under "System", after the studies.
    assert text.index("Authentication and Authorization") > text.index("System")
    assert text.index("Axes") > text.index("System")
    assert f'href="{reverse("admin:studies_study_new")}"' in page
    rows = {slug: text[text.index(slug) - 40 : text.index(slug) + 200] for slug in ("ready-one", "no-texts")}
    assert "Ready" in rows["ready-one"] and "nothing" in rows["ready-one"]
    assert (
        "the consent text is empty" in rows["no-texts"]
        and "the completion code is not set" in rows["no-texts"]
    )
    assert "Generating" in text[text.index("busy") : text.index("busy") + 100]
    running = text[text.index("running") : text.index("running") + 80]
    assert "Live" in running and " 1 " in running


def test_new_study_creates_a_draft_and_opens_its_setup(staff_client):
    url = reverse("admin:studies_study_new")
    page = staff_client.get(url).content.decode()
    assert "Kind of study" in page and "Questionnaire study" in page
    response = staff_client.post(
        url, {"title": "My replication", "slug": "", "kind": "rating", "platform": "none"}
    )
    study = Study.objects.get(slug="my-replication")
    assert response.status_code == 302 and response["Location"] == reverse(
        "admin:studies_study_setup", args=[study.pk]
    )
    assert (study.state, study.kind, study.platform) == ("draft", "rating", "none")
    again = staff_client.post(
        url, {"title": "My replication", "slug": "", "kind": "rating", "platform": "none"}
    )
    assert again.status_code == 400 and "already exists" in again.content.decode()
    assert Study.objects.filter(slug="my-replication").count() == 1


def test_every_step_says_what_is_missing_and_links_to_where_it_is_done(staff_client):
    study = rating_study("steps", consent_text="", instructions_text="", completion_code="", prompts=1)
    ConditionFactory(study=study, name="gpt", kind=Condition.Kind.LLM)
    overview = text_of(
        staff_client.get(reverse("admin:studies_study_setup", args=[study.pk])).content.decode()
    )
    assert "things still stop its launch" in overview

    def step(key: str) -> str:
        response = staff_client.get(reverse("admin:studies_study_setup_step", args=[study.pk, key]))
        assert response.status_code == 200, key
        return response.content.decode()

    material = step("material")
    assert (
        "Corpus: prompts and responses" in material
        and "has 1 prompts but each participant rates 2" in material
    )
    assert reverse("admin:studies_study_import") + "?study=steps" in material
    conditions = step("conditions")
    gpt = study.conditions.get(name="gpt")
    assert "condition &#x27;gpt&#x27; has no response for 1 of 1 prompts" in conditions
    assert reverse("admin:generation_llmconditionconfig_add") + f"?condition={gpt.pk}" in conditions
    assert reverse("admin:generation_study", args=[study.pk]) in conditions
    texts = step("texts")
    assert "the consent text is empty" in texts and "the instructions are empty" in texts
    assert "no attention check yet" in step("checks")
    AttentionCheckFactory(study=study)
    assert "no attention check yet" not in step("checks")
    assert "Preview as participant" in step("preview")
    launch = text_of(step("launch"))
    assert "the completion code is not set" in launch and "missing in the steps above" in launch
    assert (
        staff_client.get(reverse("admin:studies_study_setup_step", args=[study.pk, "nope"])).status_code
        == 404
    )


def test_the_quotas_step_warns_when_participants_cannot_rate_every_response_as_planned(staff_client):
    study = rating_study("thin", prompts=20, quota_per_condition=3, target_ratings_per_response=2)
    study.items_per_participant = 5
    study.save()
    page = text_of(
        staff_client.get(
            reverse("admin:studies_study_setup_step", args=[study.pk, "quotas"])
        ).content.decode()
    )
    assert (
        "3 participants × 5 items = 15 ratings, fewer than its 20 responses × 2 planned ratings = 40" in page
    )
    assert "raise the quota to 8" in page
    study.quota_per_condition = 8
    study.save()
    page = staff_client.get(
        reverse("admin:studies_study_setup_step", args=[study.pk, "quotas"])
    ).content.decode()
    assert "fewer than its" not in page


def test_a_questionnaire_study_gets_its_own_material_step_and_no_corpus_or_check_step(staff_client):
    study = StudyFactory(slug="feelings", kind=Study.Kind.QUESTIONNAIRE)
    ConditionFactory(study=study, name="human")
    material = staff_client.get(reverse("admin:studies_study_setup_step", args=[study.pk, "material"]))
    text = material.content.decode()
    assert "Instrument and situations" in text and "a questionnaire study needs an instrument" in text
    assert reverse("admin:studies_study_import") not in text
    checks = staff_client.get(reverse("admin:studies_study_setup_step", args=[study.pk, "checks"])).content
    assert b"attention check" not in checks.lower().replace(b"attention checks and", b"")


def test_a_filled_study_with_unrated_responses_shows_a_shortfall(staff_client):
    from django.core.management import call_command

    from kinds.rating.models import Rating
    from studies.balance_counts import counts_rebuild
    from studies.models import Assignment

    study = rating_study("short", prompts=4, state=Study.State.LIVE, quota_per_condition=1)
    RatingSettings.objects.create(study=study, target_ratings_per_response=2)
    human = study.conditions.get()
    url = reverse("admin:studies_study_status", args=[study.pk])
    assert "Shortfall" not in staff_client.get(url).content.decode()  # not filled yet
    person = ParticipantFactory(study=study, condition=human, status=Participant.Status.COMPLETED)
    for position, response in enumerate(human.responses.order_by("id")[:2]):
        Rating.objects.create(
            assignment=Assignment.objects.create(participant=person, position=position, response=response),
            value=3,
        )
    counts_rebuild(study)  # rows written here, not by enrolment: the running totals counted from them
    text = text_of(staff_client.get(url).content.decode())
    expected = (
        "condition 'human' has filled its quota (1 participants) but 2 responses have no rating and 6 ratings "
        "are missing against the target of 2 per response: raise its quota by 3"
    )
    assert "Shortfall" in text and expected.replace("'", "&#x27;") in text
    import io

    out = io.StringIO()
    call_command("study_status", "short", stdout=out)
    assert f"shortfall: {expected}" in out.getvalue()


def test_the_steps_say_done_only_when_done_and_a_direct_link_needs_no_code(staff_client):
    study = rating_study("truthful", completion_code="", platform=Study.Platform.NONE)

    def statuses() -> dict[str, str]:
        page = staff_client.get(reverse("admin:studies_study_setup", args=[study.pk])).content.decode()
        found = re.findall(r'setup/(\w+)/"[^>]*>[^<]*</a>\s*<span class="setup-status">([^<]*)<', page)
        return dict(found)

    before = statuses()
    assert before["checks"] == "to check" and before["preview"] == "to do"
    assert before["launch"] == "ready to launch"  # a direct link: no completion code to set
    AttentionCheckFactory(study=study)
    ParticipantFactory(study=study, condition=study.conditions.get(), is_preview=True)
    after = statuses()
    assert after["checks"] == "done" and after["preview"] == "done"
    study.platform = Study.Platform.PROLIFIC
    study.save()
    assert statuses()["launch"] == "1 missing"


def test_a_corpus_imported_from_the_setup_returns_to_the_setup(staff_client):
    material = staff_client.get(
        reverse("admin:studies_study_setup_step", args=[StudyFactory(slug="fresh").pk, "material"])
    ).content.decode()
    link = re.search(r'href="([^"]*/import/\?[^"]*)"', material).group(1).replace("&amp;", "&")
    page = staff_client.get(link).content.decode()
    assert 'value="fresh"' in page
    response = staff_client.post(
        link,
        {"file": SimpleUploadedFile("c.csv", public_csv(public_rows(4)), content_type="text/csv"),
         "study_slug": "imported", "seed": "0"},
    )  # fmt: skip
    study = Study.objects.get(slug="imported")
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:studies_study_setup", args=[study.pk])
    change = text_of(
        staff_client.get(reverse("admin:studies_study_change", args=[study.pk])).content.decode()
    )
    assert (
        "Checks and completion" in change and "Always" not in change
    )  # the rules' box: each can be unticked
