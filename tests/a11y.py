"""axe-core in the browser tests: inject the vendored copy into a Playwright page and list what it finds."""

from __future__ import annotations

from functools import cache
from pathlib import Path

AXE = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")


@cache
def _axe_source() -> str:
    return AXE.read_text()


def axe_violations(page, *, impacts: tuple[str, ...] = BLOCKING) -> list[str]:
    """The page's axe-core violations of the given impacts, one readable line each (rule, impact, where)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        # Evaluated through the DevTools protocol, not as a <script>: a Content-Security-Policy without
        # 'unsafe-inline' does not stop it.
        page.evaluate(_axe_source())
    results = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{page.url} {violation['id']} ({violation['impact']}): {violation['help']} at "
        + ", ".join(" ".join(node["target"]) for node in violation["nodes"][:5])
        for violation in results["violations"]
        if violation["impact"] in impacts
    ]
