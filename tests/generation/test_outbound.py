"""The outbound policy for provider URLs: public addresses only unless the operator allow-listed the host, checked when
a provider is saved and again on every connection (every resolved address, the socket opened to a checked one), and
the target's error body never shown on the admin's pages."""

import html
import socket

import pytest
from django.urls import reverse

from generation.models import Provider
from generation.providers import PermanentProviderError, provider_complete

from .conftest import make_provider, openai_body
from .test_key_env import provider_form

pytestmark = pytest.mark.django_db

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/v1",
        "http://0.0.0.0:8000/v1",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://2852039166/v1",  # 169.254.169.254 written as one decimal number
        "http://0xa9fea9fe/v1",  # … and in hex
        "http://0251.0376.0251.0376/v1",  # … and in octal (Django's URL check refuses this one first)
        "http://10.0.0.7:8000/v1",
        "http://192.168.1.20/v1",
        "http://[::ffff:10.0.0.7]/v1",
        "http://127.0.0.1:8000/v1",  # loopback, once the allow-list is production's (empty)
        "http://localhost:8000/v1",  # a name that resolves to loopback
    ],
)
def test_the_admin_refuses_an_internal_address_with_the_rule(staff_client, settings, url):
    settings.PROVIDER_URL_ALLOWLIST = []
    response = staff_client.post(
        reverse("admin:generation_provider_add"),
        provider_form(base_url=url, api_key_env="LOCAL_API_KEY"),
    )
    page = html.unescape(response.content.decode())
    assert response.status_code == 400, url  # refused: the form again, with the reason
    assert "Refused by the outbound policy" in page or "Enter a valid URL" in page, url
    if "0x" in url or "2852039166" in url:  # checked as typed, not as the one-label host it also is
        assert "169.254.169.254, a link-local, metadata" in page, url
    assert "is not bound to" not in page  # one reason, the URL's
    assert not Provider.objects.exists()


def test_metadata_addresses_are_refused_even_when_allow_listed(staff_client, settings):
    settings.PROVIDER_URL_ALLOWLIST = ["169.254.0.0/16", "metadata.google.internal"]
    for url in ("http://169.254.169.254/v1", "http://metadata.google.internal/v1"):
        response = staff_client.post(
            reverse("admin:generation_provider_add"), provider_form(base_url=url, api_key_env="LOCAL_API_KEY")
        )
        assert "Refused by the outbound policy" in html.unescape(response.content.decode()), url
    assert not Provider.objects.exists()


def test_a_row_written_around_the_form_is_refused_at_connection_time(httpserver, api_key, settings):
    """localhost resolves to 127.0.0.1; with production's empty allow-list the connection is never opened."""
    httpserver.expect_request("/v1/chat/completions").respond_with_json(openai_body())
    provider = make_provider(httpserver, kind="openai")
    settings.PROVIDER_URL_ALLOWLIST = []
    settings.PROVIDER_KEY_HOSTS = [
        *settings.PROVIDER_KEY_HOSTS,
        "TEST_GEN_API_KEY=localhost",
        "TEST_GEN_API_KEY=127.0.0.1",
    ]
    for host in ("127.0.0.1", "localhost"):
        Provider.objects.filter(pk=provider.pk).update(
            base_url=httpserver.url_for("/v1").replace("localhost", host)
        )
        provider.refresh_from_db()
        with pytest.raises(PermanentProviderError, match="outbound policy") as caught:
            provider_complete(provider=provider, model="m", messages=MESSAGES, rate_limit=False)
        assert caught.value.kind == "blocked_address"
    assert len(httpserver.log) == 0


def test_the_socket_goes_to_the_address_that_was_checked_not_to_a_second_answer(
    httpserver, api_key, settings, monkeypatch
):
    """DNS rebinding: the name answers 127.0.0.1 (allow-listed) when checked, then 10.0.0.7. The connection is
    opened to the checked address, so the second answer is never asked for, let alone dialled."""
    real = socket.getaddrinfo
    answers = iter(["127.0.0.1", "10.0.0.7", "10.0.0.7"])
    asked = []

    def rebinding(host, port, *args, **kwargs):
        if host == "rebind.example":
            asked.append(host)
            return real(next(answers), port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    settings.PROVIDER_URL_ALLOWLIST = ["127.0.0.0/8"]
    settings.PROVIDER_KEY_HOSTS = [*settings.PROVIDER_KEY_HOSTS, "TEST_GEN_API_KEY=rebind.example"]
    httpserver.expect_request("/v1/chat/completions").respond_with_json(openai_body())
    provider = make_provider(
        httpserver, kind="openai", base_url=f"http://rebind.example:{httpserver.port}/v1"
    )
    completion = provider_complete(provider=provider, model="m", messages=MESSAGES, rate_limit=False)
    assert completion.text and asked == ["rebind.example"]


def test_the_connection_test_shows_a_status_and_our_words_never_the_targets_body(
    staff_client, api_key, httpserver
):
    provider = make_provider(httpserver, kind="openai")
    httpserver.expect_request("/v1/chat/completions").respond_with_data(
        "INTERNAL-ONLY: ami-id=ami-0abc; token=xyz", status=400
    )
    page = html.unescape(
        staff_client.post(
            reverse("admin:generation_provider_test", args=[provider.pk]), {"model": "m"}
        ).content.decode()
    )
    assert "HTTP 400" in page and "refused the request" in page
    assert "INTERNAL-ONLY" not in page and "ami-0abc" not in page
