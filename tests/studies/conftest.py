import pytest


@pytest.fixture
def staff_user(django_user_model):
    """A superuser without a password: force_login needs none, and hashing one costs a second per test."""
    return django_user_model.objects.create_user(
        username="staff", password=None, is_staff=True, is_superuser=True
    )


@pytest.fixture(scope="session")
def sqlite_migrated(tmp_path_factory):
    """A fresh SQLite file migrated by `manage.py migrate` as `make run` runs it (DJANGO_ENV=local), once for the
    run: migrating every app from nothing takes 10–25 s here. Tests copy it (`sqlite_var`) and never write to it."""
    from .helpers import sqlite_manage

    var_dir = tmp_path_factory.mktemp("sqlite-migrated")
    sqlite_manage(var_dir)("migrate", "--noinput")
    return var_dir / "db.sqlite3"


@pytest.fixture
def sqlite_var(tmp_path, sqlite_migrated):
    """A VAR_DIR for `make run`'s settings holding its own copy of the freshly migrated SQLite file."""
    import shutil

    shutil.copyfile(sqlite_migrated, tmp_path / "db.sqlite3")
    return tmp_path
