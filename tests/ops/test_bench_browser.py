"""The benchmarks' simulated browser (bench/lib/browser.py) reads a page's forms from their own markup only:
the same forms, fields and buttons as parsing the whole page."""

import pytest

from bench.lib.browser import FormParser, parse_forms
from tests.factories import rating_study_build
from tests.ratings.helpers import consent_and_instructions, enter, step_url


def _whole(html: str):
    parser = FormParser()
    parser.feed(html)
    return parser.forms


@pytest.mark.django_db
def test_the_forms_read_from_their_markup_are_the_whole_pages_forms(client):
    study = rating_study_build(conditions=1, prompts=3, items_per_participant=2)
    pages = [enter(client, study, "PID1").content.decode()]
    consent_and_instructions(client, study)
    pages.append(client.get(step_url(study)).content.decode())
    for page in pages:
        forms = parse_forms(page)
        assert forms and forms == _whole(page)
        assert any(form.inputs and form.buttons for form in forms)


def test_a_page_whose_form_is_not_closed_is_read_whole():
    page = '<p>x</p><form method="post"><input name="a" value="1"><button>Next</button>'
    assert parse_forms(page) == _whole(page) != []
    assert parse_forms(page)[0].inputs[0]["name"] == "a"
