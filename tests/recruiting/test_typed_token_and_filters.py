"""The Prolific token typed in the admin (sealed, never shown again, the one Prolific receives) and the audience
filters typed on the same form (sent as Prolific's `filters` when the study is created)."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from recruiting.filters import filters_parse, filters_text
from recruiting.models import ProlificStudy

from .conftest import link_build

pytestmark = pytest.mark.django_db

TYPED = "prolific-typed-token-7f3a9c"


def _form(link, **changes):
    data = {
        "study": link.study_id,
        "token_env": link.token_env,
        "webhook_secret_env": link.webhook_secret_env,
        "site_url": link.site_url,
        "prolific_name": link.prolific_name,
        "prolific_description": link.prolific_description,
        "reward": link.reward,
        "estimated_minutes": link.estimated_minutes,
        "devices": list(link.devices),
        "workspace_id": "",
        "filters": "",
        "token": "",
    }
    data.update(changes)
    return data


def test_the_typed_token_is_sealed_sent_to_prolific_and_never_shown_again(prolific, admin_client):
    link = link_build(created=False)
    url = reverse("admin:recruiting_prolificstudy_change", args=[link.pk])
    audience = "age = 18..65\ncurrent-country-of-residence = 1, 2\n"
    response = admin_client.post(url, _form(link, token=f"  {TYPED} ", filters=audience))
    assert response.status_code == 302, response.content.decode()[:3000]
    link.refresh_from_db()
    assert link.token_sealed and TYPED not in link.token_sealed  # stored encrypted
    assert link.filters == [
        {"filter_id": "age", "selected_range": {"lower": 18, "upper": 65}},
        {"filter_id": "current-country-of-residence", "selected_values": ["1", "2"]},
    ]

    page = admin_client.get(url).content.decode()
    assert TYPED not in page and link.token_sealed not in page
    assert "A token is stored" in page and "age = 18..65" in page

    response = admin_client.post(
        reverse("admin:recruiting_prolificstudy_act", args=[link.pk, "create"]), follow=True
    )
    assert TYPED not in response.content.decode()
    link.refresh_from_db()
    assert link.prolific_study_id
    assert prolific.tokens_seen == {f"Token {TYPED}"}  # the typed token, not the environment's
    assert prolific.studies[link.prolific_study_id]["filters"] == link.filters

    # Saving the form again without typing keeps the token; ticking "remove" goes back to the variable.
    admin_client.post(url, _form(link, filters=audience))
    sealed = ProlificStudy.objects.get(pk=link.pk).token_sealed
    assert sealed == link.token_sealed
    admin_client.post(url, _form(link, filters=audience, token_remove="on"))
    assert ProlificStudy.objects.get(pk=link.pk).token_sealed == ""


def test_a_token_sealed_for_another_prolific_address_is_not_sent(prolific, admin_client, settings):
    link = link_build(created=False)
    url = reverse("admin:recruiting_prolificstudy_change", args=[link.pk])
    settings.PROLIFIC_API_URL = "https://elsewhere.example.org/api/v1/"
    admin_client.post(url, _form(link, token=TYPED))
    settings.PROLIFIC_API_URL = prolific.base_url
    response = admin_client.post(
        reverse("admin:recruiting_prolificstudy_act", args=[link.pk, "create"]), follow=True
    )
    assert "entered for https://elsewhere.example.org:443" in response.content.decode()
    assert not prolific.calls


def test_a_bad_filter_line_is_refused_and_nothing_is_saved(prolific, admin_client):
    link = link_build(created=False)
    url = reverse("admin:recruiting_prolificstudy_change", args=[link.pk])
    response = admin_client.post(url, _form(link, token=TYPED, filters="age = 18..65\nage is young"))
    assert response.status_code == 400  # the admin answers a refused form with 400 (config/middleware)
    assert "Line 2: write filter_id" in response.content.decode()
    link.refresh_from_db()
    assert link.filters == [] and link.token_sealed == ""


@pytest.mark.parametrize(
    "text",
    ["age = 65..18", "age = ..", "age = x..3", "age = 1,,2", "age = 1\nage = 2", "= 3", "age ="],
)
def test_malformed_filters_are_refused(text):
    with pytest.raises(ValidationError):
        filters_parse(text)


def test_filters_read_back_as_they_were_written():
    text = "age = 18..\nhours = ..2.5\nfluent-languages = 19, 20"
    assert filters_text(filters_parse(text)) == text
