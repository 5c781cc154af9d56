"""The consent and instructions in Markdown: headings, links, lists; raw HTML shown as text; the sanitiser's
allow-list; the consent template's blanks stop a launch."""

from html.parser import HTMLParser

import pytest

from studies.markdown import CONSENT_TEMPLATE, markdown_html, template_blanks
from studies.services import study_launch_problems
from tests.factories import StudyFactory


def _elements(html: str) -> list[tuple[str, dict]]:
    """The elements of `html` as a browser's parser sees them: (tag, attributes)."""
    found = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, dict(attrs)))

    Parser().feed(html)
    return found


def test_markdown_renders_headings_one_level_down_links_and_lists():
    html = markdown_html(
        "# Purpose\nWe study **empathy**.\n\n- one\n- two\n\n[Our lab](https://example.org/lab)"
    )
    assert "<h2>Purpose</h2>" in html and "<strong>empathy</strong>" in html and "<li>one</li>" in html
    assert '<a href="https://example.org/lab" target="_blank" rel="noopener noreferrer">Our lab</a>' in html
    assert "We study" in html and "<br>" not in markdown_html("one paragraph")


@pytest.mark.parametrize(
    "planted",
    [
        "<script>alert(1)</script>",
        '<img src="x" onerror="alert(1)">',
        "[click](javascript:alert(1))",
        '<a href="https://example.org" onclick="alert(1)">x</a>',
    ],
)
def test_raw_html_and_script_links_stay_inert(planted):
    html = markdown_html(f"Before.\n\n{planted}\n\nAfter.")
    elements = _elements(html)
    assert {tag for tag, _ in elements} <= {"p", "a"}
    for _, attrs in elements:
        assert not any(name.startswith("on") for name in attrs) and "javascript" not in attrs.get("href", "")
    assert "Before." in html and "After." in html


def test_html_typed_as_text_is_shown_as_text():
    assert "&lt;script&gt;" in markdown_html("<script>alert(1)</script>")


@pytest.mark.django_db
def test_the_template_s_blanks_stop_a_launch_until_filled():
    study = StudyFactory(consent_text=CONSENT_TEMPLATE)
    blanks = template_blanks(study.consent_text)
    assert "[your institution]" in blanks and template_blanks("See [our page](https://example.org).") == []
    assert any(
        "template's blanks" in p and "[your institution]" in p for p in study_launch_problems(study=study)
    )
    study.consent_text = "We are at Example University. [Our page](https://example.org)."
    assert not any("template's blanks" in p for p in study_launch_problems(study=study))
