import pytest

pytestmark = pytest.mark.browser


@pytest.mark.django_db(transaction=True)
def test_the_home_page_renders_in_chromium(live_server, page):
    page.goto(live_server.url + "/")
    assert page.locator("h1").inner_text() == "Empathy studies"
