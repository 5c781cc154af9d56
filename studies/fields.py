"""Text fields whose line breaks are stored one way.

Browsers submit a textarea's line breaks as CRLF, spreadsheets write CSV cells with CRLF or a lone CR: the same
prompt entered twice would otherwise be sent to a model and shown to participants in two spellings.
`PlainTextField` stores every line break as LF, whichever way the row is written (save, bulk_create, update)."""

from __future__ import annotations

from django.db import models


def newlines_normalise(text):
    """`text` with every CRLF and lone CR turned into LF (anything that is not a str is returned unchanged)."""
    if not isinstance(text, str) or "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


class PlainTextField(models.TextField):
    """A TextField that stores line breaks as LF. Deconstructs as a plain TextField: no migration, same column."""

    def pre_save(self, model_instance, add):
        value = newlines_normalise(super().pre_save(model_instance, add))
        setattr(model_instance, self.attname, value)
        return value

    def get_prep_value(self, value):
        return newlines_normalise(super().get_prep_value(value))

    def to_python(self, value):
        return newlines_normalise(super().to_python(value))

    def deconstruct(self):
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.TextField", args, kwargs
