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


_SHARED = {"SECRET_KEY": "s" * 60, "ALLOWED_HOSTS": "example.org"}


def _production_check(**extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in _production_env(**_SHARED).items() if k not in {"FILE_STORAGE", "SESSION_ENGINE"}}
    return _manage("check", env={**env, **extra})


def test_production_with_redis_and_no_local_files_starts():
    result = _production_check(REDIS_URL="redis://127.0.0.1:6379/0")
    assert result.returncode == 0, result.stderr


def test_production_refuses_a_process_local_cache():
    env = {k: v for k, v in _production_env(**_SHARED).items() if k != "REDIS_URL"}
    result = _manage("check", env=env)
    assert result.returncode != 0
    assert "the 'default' cache (LocMemCache) is local to one process" in result.stderr


def test_production_refuses_file_sessions():
    result = _production_check(
        REDIS_URL="redis://127.0.0.1:6379/0", SESSION_ENGINE="django.contrib.sessions.backends.file"
    )
    assert result.returncode != 0
    assert "sessions are files on one machine's disk" in result.stderr


def test_production_refuses_shared_files_on_the_local_disk():
    result = _production_check(REDIS_URL="redis://127.0.0.1:6379/0", FILE_STORAGE="local")
    assert result.returncode != 0
    assert "written to the local disk (FILE_STORAGE=local)" in result.stderr


def test_production_keeps_shared_files_in_an_s3_bucket():
    code = (
        "from django.core.files.storage import storages; s = storages['default']; "
        "print(type(s).__name__, s.bucket_name, s.endpoint_url)"
    )
    env = _production_env(
        **_SHARED,
        REDIS_URL="redis://127.0.0.1:6379/0",
        FILE_STORAGE="s3",
        AWS_STORAGE_BUCKET_NAME="empathy-files",
        AWS_S3_ENDPOINT_URL="https://s3.example.org",
    )
    result = _manage("shell", "-c", code, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].split() == ["S3Storage", "empathy-files", "https://s3.example.org"]


def test_without_file_storage_a_write_fails_loudly():
    env = _production_env(**_SHARED, REDIS_URL="redis://127.0.0.1:6379/0")
    env.pop("FILE_STORAGE", None)
    code = (
        "from django.core.files.base import ContentFile; from django.core.files.storage import default_storage; "
        "default_storage.save('report.csv', ContentFile(b'x'))"
    )
    result = _manage("shell", "-c", code, env=env)
    assert result.returncode != 0
    assert "No file storage is configured (FILE_STORAGE=none)" in result.stderr
