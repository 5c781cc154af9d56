"""Shared by the migrations that derive a PostgreSQL function from an earlier migration's text.

Not a migration (Django's loader skips modules whose name starts with an underscore).
"""


def rewritten(text: str, *changes: tuple[str, str]) -> str:
    """`text` with each change's old part replaced by its new one, in order; each old part must occur exactly
    once in the text as it stands when its change is made, so a function whose text has drifted from what a
    migration expects fails the migration instead of being rewritten wrongly."""
    for old, new in changes:
        found = text.count(old)
        if found != 1:
            raise ValueError(f"expected one occurrence, found {found}: {old!r}")
        text = text.replace(old, new)
    return text
