"""Screenshots of the browser tests, for a person to look at: taken only when SCREENSHOTS names a directory.

A screenshot checks nothing, and the browser tests' 54 took 8.8 s on the shared development machine (29 of them on
the researcher's path through the admin), so the suite takes them only when asked: `SCREENSHOTS=/tmp/shots make
test`, or the same before one browser test's pytest command."""

import os
from pathlib import Path


def screenshot(page, name: str, *, full_page: bool = True) -> None:
    """`page` as SCREENSHOTS/<name>.png when SCREENSHOTS is set; nothing otherwise."""
    directory = os.environ.get("SCREENSHOTS")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(directory) / f"{name}.png"), full_page=full_page)
