"""Commands and pages that run no analysis never load the analysis libraries (pandas, NumPy, SciPy, statsmodels,
matplotlib) nor the provider SDKs (openai, anthropic): together they take seconds to import, which every
`manage.py` command would pay. Checked in a fresh interpreter, through what a command does at start-up: set up
Django (every app and admin module), run `manage.py help` and `manage.py check` (which loads every URLconf)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("pandas", "numpy", "scipy", "statsmodels", "matplotlib", "krippendorff", "openai", "anthropic")

PROBE = f"""
import io, json, os, sys
from contextlib import redirect_stdout, redirect_stderr
sys.argv = ["manage.py", "help"]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
from django.core.management import call_command, execute_from_command_line
with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
    execute_from_command_line(["manage.py", "help"])
    call_command("check")
    from django.urls import reverse
    reverse("analysis:dashboard", args=["demo"]), reverse("api:study-list")
print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))
"""


def test_commands_and_the_url_configuration_load_no_analysis_library_and_no_provider_sdk():
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_the_probe_sees_an_analysis_module_load_its_libraries():
    """The check above can fail: importing an analysis module (as its first request does) loads pandas."""
    probe = PROBE.replace('call_command("check")', 'call_command("check"); import analysis.views')
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "pandas" in json.loads(result.stdout.strip().splitlines()[-1])
