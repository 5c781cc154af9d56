"""Provider keys typed in the admin: stored encrypted with the endpoint they are for, never shown again, used by
the next call without a restart, and never sent anywhere else; endpoints that need no key; the provider's own
list of models. Against loopback providers (pytest-httpserver) on two ports."""

import html
import json

import pytest
from cryptography.fernet import Fernet
from django.core.cache import cache
from django.urls import reverse

from generation.models import Provider
from generation.providers import PermanentProviderError, provider_api_key, provider_complete
from generation.services.connection import provider_connection_test, provider_models
from studies.sealed import SealedKeyError, key_reseal, key_seal, sealed_key_for_origin, sealed_origin
from tests.loopback_server import LoopbackServer

from .conftest import TEST_KEY, anthropic_body, make_provider, openai_body

CHAT = "/v1/chat/completions"
TYPED_KEY = "sk-typed-in-the-admin-9f8e7d6c5b4a"
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def no_cached_model_lists():
    """Each test asks its loopback provider afresh (model lists are cached, and the test database reuses ids)."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def other_server():
    """A second loopback provider, on another port of the same host."""
    server = LoopbackServer(host="localhost")
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


def provider_form(httpserver, **overrides):
    data = {
        "name": "typed",
        "kind": "openai",
        "base_url": httpserver.url_for("/v1"),
        "api_key": "",
        "api_key_env": "",
        "requests_per_minute": 60000,
        "tokens_per_minute": 10000000,
        "max_concurrency": 8,
        "timeout_seconds": 2,
        "max_attempts": 2,
        "price_input_per_million": 0,
        "price_output_per_million": 0,
    }
    return data | overrides


def authorization(server, index=-1) -> str:
    return server.log[index][0].headers.get("Authorization", "")


# --- the encryption ---------------------------------------------------------------------------------------------


def test_a_sealed_key_opens_only_for_its_endpoint_and_only_with_the_secret(settings):
    token = key_seal(key=TYPED_KEY, origin="http://localhost:8000")
    assert TYPED_KEY not in token
    assert sealed_origin(token) == "http://localhost:8000"
    assert sealed_key_for_origin(token, origin="http://localhost:8000") == TYPED_KEY
    with pytest.raises(SealedKeyError, match="entered for http://localhost:8000, and requests now go to"):
        sealed_key_for_origin(token, origin="http://localhost:9000")
    old_secret = settings.PROVIDER_KEYS_SECRET[0]
    settings.PROVIDER_KEYS_SECRET = [Fernet.generate_key().decode()]
    with pytest.raises(SealedKeyError, match="cannot be decrypted"):
        sealed_key_for_origin(token, origin="http://localhost:8000")
    # Rotation: a new secret first, the old one still listed; resealing moves the key to the new one.
    settings.PROVIDER_KEYS_SECRET = [settings.PROVIDER_KEYS_SECRET[0], old_secret]
    resealed = key_reseal(token)
    settings.PROVIDER_KEYS_SECRET = settings.PROVIDER_KEYS_SECRET[:1]
    assert sealed_key_for_origin(resealed, origin="http://localhost:8000") == TYPED_KEY


@pytest.mark.django_db
def test_without_the_servers_secret_a_typed_key_is_refused_with_a_clear_message(
    staff_client, settings, httpserver
):
    settings.PROVIDER_KEYS_SECRET = []
    response = staff_client.post(
        reverse("admin:generation_provider_add"), provider_form(httpserver, api_key=TYPED_KEY)
    )
    page = html.unescape(response.content.decode())
    assert response.status_code == 400
    assert (
        "This server cannot store typed keys or tokens: its operator has not set PROVIDER_KEYS_SECRET" in page
    )
    assert TYPED_KEY not in page and not Provider.objects.exists()


# --- the admin: write-only --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_key_typed_in_the_admin_is_stored_encrypted_and_never_shown_again(staff_client, httpserver):
    response = staff_client.post(
        reverse("admin:generation_provider_add"), provider_form(httpserver, api_key=TYPED_KEY)
    )
    assert response.status_code == 302
    provider = Provider.objects.get()
    assert provider.api_key_sealed and TYPED_KEY not in provider.api_key_sealed and not provider.api_key_env
    assert provider_api_key(provider) == TYPED_KEY

    page = staff_client.get(reverse("admin:generation_provider_change", args=[provider.pk])).content.decode()
    assert TYPED_KEY not in page and provider.api_key_sealed not in page
    assert "A key is set (entered here, sent only to http://localhost:" in page
    assert 'type="password" name="api_key"' in page and 'autocomplete="new-password"' in page
    assert "Remove the stored key" in page

    # Saving again without typing keeps the key; typing replaces it; removing removes it.
    change = reverse("admin:generation_provider_change", args=[provider.pk])
    assert staff_client.post(change, provider_form(httpserver)).status_code == 302
    provider.refresh_from_db()
    assert provider_api_key(provider) == TYPED_KEY
    staff_client.post(change, provider_form(httpserver, api_key="sk-replacement-key-000"))
    provider.refresh_from_db()
    assert provider_api_key(provider) == "sk-replacement-key-000"
    staff_client.post(change, provider_form(httpserver, api_key_clear="on"))
    provider.refresh_from_db()
    assert provider.api_key_sealed == "" and provider_api_key(provider) == ""


@pytest.mark.django_db
def test_a_key_and_a_key_variable_at_once_are_refused(staff_client, httpserver):
    response = staff_client.post(
        reverse("admin:generation_provider_add"),
        provider_form(httpserver, api_key=TYPED_KEY, api_key_env="TEST_GEN_API_KEY"),
    )
    assert response.status_code == 400
    assert "leave the environment variable blank" in html.unescape(response.content.decode())


# --- the binding: never sent elsewhere --------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_typed_key_is_never_sent_to_another_port_or_host(staff_client, httpserver, other_server):
    staff_client.post(reverse("admin:generation_provider_add"), provider_form(httpserver, api_key=TYPED_KEY))
    provider = Provider.objects.get()
    httpserver.expect_request(CHAT).respond_with_json(openai_body("Hello"))
    other_server.expect_request(CHAT).respond_with_json(openai_body("Hello"))
    provider_complete(provider=provider, model="m", messages=MESSAGES)
    assert authorization(httpserver) == f"Bearer {TYPED_KEY}"

    # Pointed elsewhere through the admin without typing the key again: refused, the key stays bound.
    change = reverse("admin:generation_provider_change", args=[provider.pk])
    moved = provider_form(other_server, base_url=other_server.url_for("/v1"))
    response = staff_client.post(change, moved)
    assert response.status_code == 400
    assert "type it again for the new address, or remove it" in html.unescape(response.content.decode())

    # Pointed elsewhere around the form (another port of the same host): refused before anything is sent.
    Provider.objects.filter(pk=provider.pk).update(base_url=other_server.url_for("/v1"))
    provider.refresh_from_db()
    with pytest.raises(PermanentProviderError) as caught:
        provider_complete(provider=provider, model="m", messages=MESSAGES)
    assert caught.value.kind == "unbound_key_host" and "Enter the key again" in caught.value.message
    assert other_server.log == []
    check = provider_connection_test(provider=provider, model="m")
    assert not check.ok and check.message.startswith("Provider typed: The stored key was entered for")
    assert other_server.log == []


# --- keyless endpoints ------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_endpoint_that_needs_no_key_is_called_without_any_key_of_the_environment(
    staff_client, httpserver, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-openai-must-not-leak")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env-anthropic-must-not-leak")
    assert (
        staff_client.post(reverse("admin:generation_provider_add"), provider_form(httpserver)).status_code
        == 302
    )
    provider = Provider.objects.get()
    httpserver.expect_request(CHAT).respond_with_json(openai_body("Hello there"))
    check = provider_connection_test(provider=provider, model="local-model")
    assert check.ok, check.message
    headers = httpserver.log[-1][0].headers
    assert "must-not-leak" not in str(headers) and headers.get("Authorization") == "Bearer no-key"

    anthropic = make_provider(
        httpserver, kind="anthropic", name="local-claude", api_key_env="", base_url=httpserver.url_for("")
    )
    httpserver.expect_request("/v1/messages").respond_with_json(anthropic_body("Hi"))
    assert provider_connection_test(provider=anthropic, model="claude-local").ok
    assert "must-not-leak" not in str(httpserver.log[-1][0].headers)


# --- test connection: at once, in sentences ---------------------------------------------------------------------


@pytest.mark.django_db
def test_test_connection_works_right_after_a_key_is_typed_with_no_restart(
    staff_client, httpserver, monkeypatch
):
    monkeypatch.delenv("TEST_GEN_API_KEY", raising=False)
    provider = make_provider(httpserver)  # names TEST_GEN_API_KEY, which this server's environment lacks
    httpserver.expect_request(CHAT).respond_with_json(openai_body("OK"))
    test_url = reverse("admin:generation_provider_test", args=[provider.pk])
    page = html.unescape(staff_client.post(test_url, {"model": "gpt-test"}).content.decode())
    assert "It does not work yet." in page
    assert (
        "The environment variable TEST_GEN_API_KEY (the API key of provider loop-openai) is not set" in page
    )
    assert "Enter the key on the provider's page instead (it is used at once)" in page

    staff_client.post(
        reverse("admin:generation_provider_change", args=[provider.pk]),
        provider_form(httpserver, name="loop-openai", api_key=TEST_KEY),
    )
    page = html.unescape(staff_client.post(test_url, {"model": "gpt-test"}).content.decode())
    assert "It works." in page and TEST_KEY not in page
    assert authorization(httpserver) == f"Bearer {TEST_KEY}"


@pytest.mark.django_db
def test_a_refused_typed_key_says_where_to_fix_it_in_a_sentence(httpserver):
    provider = make_provider(httpserver, api_key_env="")
    provider.api_key_sealed = key_seal(key=TYPED_KEY, origin=_origin(httpserver))
    provider.save()
    httpserver.expect_request(CHAT).respond_with_json(
        {"error": {"message": f"bad key {TYPED_KEY}"}}, status=401
    )
    check = provider_connection_test(provider=provider, model="m")
    assert check.message == (
        "The provider refused the key (HTTP 401). Check the key entered on the provider's page (type it again "
        "there to replace it)."
    )


def _origin(server) -> str:
    return f"http://localhost:{server.port}"


# --- the provider's own list of models --------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_models_are_listed_from_the_openai_compatible_endpoint(staff_client, httpserver, api_key):
    provider = make_provider(httpserver)
    httpserver.expect_request("/v1/models").respond_with_json(
        {
            "object": "list",
            "data": [{"id": n, "object": "model", "owned_by": "me"} for n in ("b-model", "a-model")],
        }
    )
    assert provider_models(provider=provider).models == ["a-model", "b-model"]
    assert authorization(httpserver) == f"Bearer {TEST_KEY}"
    reply = staff_client.get(reverse("admin:generation_provider_models", args=[provider.pk]))
    assert json.loads(reply.content) == {"models": ["a-model", "b-model"], "problem": ""}
    # The test page offers them to pick from (and the name can still be typed).
    page = staff_client.get(reverse("admin:generation_provider_test", args=[provider.pk])).content.decode()
    assert '<option value="a-model">' in page and 'list="id_model-models"' in page


@pytest.mark.django_db
def test_the_models_are_listed_from_anthropic(httpserver, api_key):
    provider = make_provider(httpserver, kind="anthropic", base_url=httpserver.url_for("").rstrip("/"))
    httpserver.expect_request("/v1/models").respond_with_json(
        {
            "data": [
                {"id": "claude-x", "type": "model", "display_name": "X", "created_at": "2025-01-01T00:00:00Z"}
            ],
            "has_more": False,
            "first_id": "claude-x",
            "last_id": "claude-x",
        }
    )
    assert provider_models(provider=provider).models == ["claude-x"]
    assert TEST_KEY in str(httpserver.log[-1][0].headers)  # sent the way this SDK version sends it


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("status", "says"),
    [
        (404, "does not list its models (HTTP 404): type the model's name"),
        (
            401,
            "The provider refused the key when asked for its models (HTTP 401). Check the key in the environment",
        ),
        (500, "(HTTP 500): type the model's name, and use Test connection"),
    ],
)
def test_when_the_list_cannot_be_fetched_the_page_says_why_and_a_name_can_be_typed(
    staff_client, httpserver, api_key, status, says
):
    provider = make_provider(httpserver)
    httpserver.expect_request("/v1/models").respond_with_json({"error": {"message": TEST_KEY}}, status=status)
    found = provider_models(provider=provider)
    assert found.models == [] and says in found.problem and TEST_KEY not in found.problem
    page = html.unescape(
        staff_client.get(reverse("admin:generation_provider_test", args=[provider.pk])).content.decode()
    )
    assert says in page and 'name="model"' in page and TEST_KEY not in page


@pytest.mark.django_db
def test_an_unreachable_endpoint_gives_a_reason_not_an_error(httpserver, api_key):
    provider = make_provider(httpserver, base_url="http://127.0.0.1:9/v1")
    found = provider_models(provider=provider)
    assert found.models == [] and found.problem.startswith(
        "Could not fetch the list of models from http://127.0.0.1:9/v1"
    )
