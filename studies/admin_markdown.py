"""The consent and instructions fields of the study's admin form: Markdown, said in the help text; the consent
field offers the consent template (studies/markdown.py) to start from, put in the box by a button
(static/studies/markdown_field.js) or copied by hand, and says that the paragraph on what the pages record is
added after the text, fixed."""

from __future__ import annotations

from django import forms

from .markdown import CONSENT_TEMPLATE, HELP

CONSENT_HELP = (
    f"{HELP} The platform adds a fixed paragraph after your text saying what the pages record about how they "
    "are answered (the authenticity signals); see it with “Preview as participant”. Empty: a short default "
    "consent is shown, and the study cannot launch."
)
MARKDOWN_FIELDS = {"consent_text": CONSENT_HELP, "instructions_text": HELP}


class MarkdownTextarea(forms.Textarea):
    """A textarea, and with `template` a "Start from a template" disclosure holding it."""

    template_name = "studies/widgets/markdown.html"

    class Media:
        js = ["studies/markdown_field.js"]

    def __init__(self, *, template: str = "", attrs=None):
        self.template = template
        super().__init__(attrs={"rows": 12, **(attrs or {})})

    def get_context(self, name, value, attrs):
        context = super().get_context(name, value, attrs)
        context["widget"]["template"] = self.template
        return context


def markdown_formfield(db_field, **kwargs) -> forms.Field | None:
    """The form field of a Markdown text field (None: `db_field` is not one)."""
    if db_field.name not in MARKDOWN_FIELDS:
        return None
    template = CONSENT_TEMPLATE if db_field.name == "consent_text" else ""
    return db_field.formfield(
        widget=MarkdownTextarea(template=template), help_text=MARKDOWN_FIELDS[db_field.name], **kwargs
    )
