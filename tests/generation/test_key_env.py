"""A provider's key variable must look like an API key variable and never be one of the site's own secrets: the
admin refuses it, and a row that got past the form is refused again at send time, before anything is sent."""

import html

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from generation.models import GenerationItem, Provider
from generation.providers import PermanentProviderError, provider_api_key, provider_complete
from generation.services.dispatch import generation_start
from generation.services.prompts import GenerationSetupError, generation_conditions
from generation.services.running import generation_item_run

from .conftest import make_provider, make_study, openai_body

pytestmark = pytest.mark.django_db

SITE_SECRET = "the-site-secret-key-0123456789-never-leaves-this-machine-abcdef"
MESSAGES = [{"role": "user", "content": "hi"}]


def provider_form(**overrides):
    data = {
        "name": "exfil",
        "kind": "openai",
        "base_url": "https://attacker.example/v1",
        "api_key_env": "OPENAI_API_KEY",
        "requests_per_minute": 500,
        "tokens_per_minute": 200000,
        "max_concurrency": 8,
        "timeout_seconds": 60,
        "max_attempts": 6,
        "price_input_per_million": 0,
        "price_output_per_million": 0,
    }
    return data | overrides


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("SECRET_KEY", "one of this site's own secrets"),
        ("DATABASE_URL", "one of this site's own secrets"),
        ("REDIS_URL", "one of this site's own secrets"),
        ("DJANGO_SUPERUSER_PASSWORD", "one of this site's own secrets"),
        ("DJANGO_API_KEY", "one of this site's own secrets"),
        ("HOME", "not an API key variable name"),
        ("openai_api_key", "not an API key variable name"),
        ("sk-proj-abc123", "not an API key variable name"),
    ],
)
def test_the_admin_refuses_a_key_variable_that_is_a_site_secret_or_not_a_key(staff_client, name, says):
    response = staff_client.post(reverse("admin:generation_provider_add"), provider_form(api_key_env=name))
    assert response.status_code == 400 and says in html.unescape(response.content.decode())
    assert not Provider.objects.exists()


def test_the_admin_takes_a_key_variable_sent_to_a_host_it_is_bound_to(staff_client, settings):
    settings.PROVIDER_KEY_HOSTS = [*settings.PROVIDER_KEY_HOSTS, "HF_TOKEN=api-inference.huggingface.co"]
    for name, url in (
        ("OPENAI_API_KEY", ""),  # the vendor's own endpoint
        ("HF_TOKEN", "https://api-inference.huggingface.co/v1"),
        ("TOGETHER_KEY", "http://localhost:8000/v1"),  # an allow-listed host of the operator's own
    ):
        response = staff_client.post(
            reverse("admin:generation_provider_add"),
            provider_form(name=name.lower().replace("_", "-"), api_key_env=name, base_url=url),
        )
        assert response.status_code == 302, name
    assert Provider.objects.count() == 3


@pytest.mark.parametrize(
    ("name", "url", "says"),
    [
        ("PROLIFIC_TOKEN", "https://api.openai.com/v1", "recruiting platform's credential"),
        ("PROLIFIC_WEBHOOK_SECRET_KEY", "https://api.openai.com/v1", "recruiting platform's credential"),
        ("OPENAI_API_KEY", "https://attacker.example/v1", "may be sent only to api.openai.com"),
        ("ANTHROPIC_API_KEY", "https://attacker.example/v1", "may be sent only to api.anthropic.com"),
        ("STRIPE_API_KEY", "https://attacker.example/v1", "is not bound to attacker.example"),
    ],
)
def test_a_key_is_refused_for_a_host_it_is_not_bound_to(staff_client, name, url, says):
    """Another service's credential, or a vendor's key pointed at a host of the staff user's choosing."""
    response = staff_client.post(
        reverse("admin:generation_provider_add"), provider_form(api_key_env=name, base_url=url)
    )
    assert response.status_code == 400 and says in html.unescape(response.content.decode())
    assert not Provider.objects.exists()


def test_a_row_pointing_a_bound_key_elsewhere_never_sends_it(httpserver, monkeypatch):
    """Written around the form: the key is bound to api.openai.com, so the loopback host never receives it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    httpserver.expect_request("/v1/chat/completions").respond_with_json(openai_body())
    provider = make_provider(httpserver, kind="openai", name="exfil", api_key_env="OPENAI_API_KEY")
    with pytest.raises(PermanentProviderError, match="may be sent only to api.openai.com") as caught:
        provider_complete(provider=provider, model="m", messages=MESSAGES, rate_limit=False)
    assert caught.value.kind == "unbound_key_host"
    Provider.objects.filter(pk=provider.pk).update(api_key_env="PROLIFIC_TOKEN")
    provider.refresh_from_db()
    monkeypatch.setenv("PROLIFIC_TOKEN", "the-token-that-pays")
    with pytest.raises(PermanentProviderError, match="recruiting platform"):
        provider_complete(provider=provider, model="m", messages=MESSAGES, rate_limit=False)
    assert len(httpserver.log) == 0


def test_names_added_to_the_deny_list_in_settings_are_refused(settings):
    settings.PROVIDER_KEY_ENV_DENYLIST = [*settings.PROVIDER_KEY_ENV_DENYLIST, "BACKUP_S3_KEY"]
    provider = Provider(name="p", api_key_env="BACKUP_S3_KEY")
    with pytest.raises(ValidationError, match="own secrets"):
        provider.full_clean()


def test_a_provider_row_naming_secret_key_never_sends_the_secret(httpserver, api_key, monkeypatch):
    """Written around the form (a shell, a fixture, an old row): refused at send time, nothing reaches the host."""
    monkeypatch.setenv("SECRET_KEY", SITE_SECRET)
    httpserver.expect_request("/v1/chat/completions").respond_with_json(openai_body())
    provider = make_provider(httpserver, kind="openai", name="exfil")
    Provider.objects.filter(pk=provider.pk).update(api_key_env="SECRET_KEY")  # no validation on this path
    provider.refresh_from_db()

    with pytest.raises(PermanentProviderError, match="own secrets") as caught:
        provider_complete(provider=provider, model="m", messages=MESSAGES, rate_limit=False)
    assert caught.value.kind == "forbidden_key_env" and SITE_SECRET not in str(caught.value)
    with pytest.raises(PermanentProviderError):
        provider_api_key(provider)

    study = make_study(provider=provider, n_prompts=2)
    conditions = generation_conditions(study=study)
    with pytest.raises(GenerationSetupError, match="SECRET_KEY holds one of this site's own secrets"):
        generation_start(study=study, conditions=conditions, dispatch=False)
    # Even an item created before the name was changed fails permanently, without a call.
    Provider.objects.filter(pk=provider.pk).update(api_key_env="TEST_GEN_API_KEY")
    result = generation_start(study=study, conditions=conditions, dispatch=False)
    Provider.objects.filter(pk=provider.pk).update(api_key_env="SECRET_KEY")
    outcomes = {generation_item_run(item_id=item_id).status for item_id in result.item_ids}
    assert outcomes == {"failed"}
    assert set(GenerationItem.objects.values_list("error_kind", flat=True)) == {"forbidden_key_env"}

    assert len(httpserver.log) == 0  # nothing was ever sent, so neither was the secret
