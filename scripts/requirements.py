"""Print the pinned dependencies of pyproject.toml (runtime and dev), one per line, for pip -r."""

import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
for requirement in project["dependencies"] + project["optional-dependencies"]["dev"]:
    print(requirement)
