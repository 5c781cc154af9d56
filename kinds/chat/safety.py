"""The safety check every participant message and every reply passes before it is shown or sent on.

`message_check(text, *, study, role)` -> the result stored on the Turn (`Turn.safety`):
{"ok": bool, "crisis": bool, "checks": [...]}. This module is the hook the conversation calls; the crisis-term
list and the provider's moderation fill it in."""

from __future__ import annotations


def message_check(text: str, *, study, role: str) -> dict:
    return {"ok": True, "crisis": False, "checks": []}
