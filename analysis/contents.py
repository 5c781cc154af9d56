"""The table of contents of an analysis page: every level-two heading with an id, listed as links right after
the page's title (`<nav aria-label="Contents">`). Built from the rendered page itself, so a section a study does
not have (no judges, no waves) is never listed, and a new section is listed without touching this module."""

from __future__ import annotations

import html
import re

from django.http import HttpResponse
from django.utils.html import format_html, format_html_join, strip_tags

_H2 = re.compile(r'<h2 id="([^"]+)"[^>]*>(.*?)</h2>', re.DOTALL)
MIN_SECTIONS = 3  # fewer: the page is short enough without one


def contents_insert(page: str) -> str:
    """`page` with its table of contents after its `<h1>` (unchanged without an `<h1>` or with few sections)."""
    sections, seen = [], set()
    for anchor, inner in _H2.findall(page):
        if anchor not in seen:
            seen.add(anchor)
            sections.append((anchor, html.unescape(strip_tags(inner)).strip()))
    end = page.find("</h1>")
    if end < 0 or len(sections) < MIN_SECTIONS:
        return page
    end += len("</h1>")
    nav = format_html(
        '<nav class="toc" aria-label="Contents"><p class="toc-title">Contents</p><ol>{}</ol></nav>',
        format_html_join("", '<li><a href="#{}">{}</a></li>', sections),
    )
    return page[:end] + nav + page[end:]


def with_contents(response: HttpResponse) -> HttpResponse:
    """A rendered analysis page with its table of contents."""
    if response.status_code == 200 and response["Content-Type"].startswith("text/html"):
        response.content = contents_insert(response.content.decode()).encode()
    return response
