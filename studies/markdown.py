"""What participants read (the consent and the instructions) written in Markdown: headings, emphasis, lists,
links. One rule for every page that shows it (the participant pages' `markdown` filter, ratings/templatetags):

* Parsed by markdown-it-py (CommonMark, a single line end kept as a line break, as plain text showed before) with
  raw HTML off: `<script>` or `<img onerror=...>` typed into the text is shown as text, never run.
* Then sanitised by nh3 (the Ammonia sanitiser) with an allow-list of tags and of attributes (a link's `href`
  and `title` only; http, https and mailto links only); every link gets `rel="noopener noreferrer"` and opens in
  a new tab, so following it does not lose the participant's place.
* Headings move one level down (`#` is an `<h2>`): the page's own `<h1>` is its title.

`CONSENT_TEMPLATE` is the consent a researcher starts from (the admin's consent field offers it). What the
pages record about how they are answered (the authenticity signals) is not in it: that paragraph is fixed, added
by the consent page after the researcher's text (templates/ratings/_signals_notice.html), and shown in the
participant preview."""

from __future__ import annotations

import re

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

TAGS = {
    "p", "br", "h2", "h3", "h4", "h5", "h6", "strong", "em", "ul", "ol", "li", "a", "blockquote", "code",
    "pre", "hr",
}  # fmt: skip
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}

_parser = MarkdownIt("commonmark", {"html": False, "breaks": True})


def markdown_html(text: str) -> SafeString:
    """`text` (Markdown) as sanitised HTML, safe to put in a page as it is."""
    tokens = _parser.parse(text or "")
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(int(token.tag[1]) + 1, 6)}"
    html = _parser.renderer.render(tokens, _parser.options, {})
    clean = nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )
    return mark_safe(clean)  # noqa: S308 - sanitised just above


HELP = (
    "Markdown: a blank line starts a paragraph; # Heading, **bold**, *italic*, - a list item, "
    "[the words shown](https://example.org) for a link. HTML typed here is shown as text, never run."
)

CONSENT_TEMPLATE = """# What this study is about
We are researchers at [your institution]. We study how people judge [the study's purpose, in one sentence].

# What you will do
You will read [number] short conversations and rate each reply. It takes about [minutes] minutes.

# What we record
Your answers, the time you spend on each page, and the anonymous id your recruiting platform gives us. We never
ask for your name or e-mail address. (How the pages record the way they are answered is said in the paragraph
the platform adds below this text.)

# Taking part is voluntary
You may stop at any time, without giving a reason, by closing the page or with the link at the bottom of each
page. To withdraw your answers after you finish, write to us with your platform id before [date].

# How your data are used
Answers are analysed in aggregate for research and published only in anonymous form. [Where the data are kept,
for how long, and who can see them.] This study was approved by [ethics committee, reference number].

# Contact
[Name], [e-mail address]. For concerns about the study: [the ethics committee's contact].
"""

#: The template's blanks ("[your institution]"; a Markdown link's "[words](url)" is not one).
_BLANK = re.compile(r"\[[^\]\n]+\](?!\()")
TEMPLATE_BLANKS = frozenset(_BLANK.findall(CONSENT_TEMPLATE))


def template_blanks(text: str) -> list[str]:
    """The consent template's blanks still in `text`, in order."""
    return [blank for blank in _BLANK.findall(text or "") if blank in TEMPLATE_BLANKS]
