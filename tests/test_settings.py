import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def _production_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"SECRET_KEY", "ALLOWED_HOSTS", "DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    }
    env.update({"DJANGO_ENV": "production", **extra})
    return env


def test_production_refuses_to_start_without_a_secret_key():
    result = _manage("check", env=_production_env(ALLOWED_HOSTS="example.org"))
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_a_malformed_boolean_is_refused_at_start_up():
    env = dict(os.environ, DEBUG="maybe")
    result = _manage("check", env=env)
    assert result.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in result.stderr


def test_check_deploy_is_clean_under_production_settings():
    env = _production_env(
        SECRET_KEY="x" * 20 + "-production-secret-for-the-deploy-check-" + "y" * 20,
        ALLOWED_HOSTS="example.org",
    )
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_defaults_are_the_strict_ones():
    """What production gets unless the operator says otherwise: no outbound allow-list (public provider
    addresses only), HSTS without subdomains or preload, 12-character passwords, idle accounts signed out."""
    env = _production_env(
        SECRET_KEY="x" * 20 + "-production-secret-for-the-deploy-check-" + "y" * 20,
        ALLOWED_HOSTS="example.org",
    )
    code = (
        "from django.conf import settings as s; "
        "print(s.PROVIDER_URL_ALLOWLIST, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD, "
        "s.AUTH_PASSWORD_VALIDATORS[1]['OPTIONS']['min_length'], s.ACCOUNT_IDLE_TIMEOUT_SECONDS, "
        "s.AXES_LOCKOUT_PARAMETERS)"
    )
    result = _manage("shell", "-c", code, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-2] == "[] False False 12 1800 config.login_throttle.lockout_parameters"


def test_a_malformed_provider_keys_secret_is_refused_at_start_up():
    env = dict(os.environ, PROVIDER_KEYS_SECRET="not-a-fernet-key")
    result = _manage("check", env=env)
    assert result.returncode != 0
    assert "PROVIDER_KEYS_SECRET must hold Fernet keys" in result.stderr
