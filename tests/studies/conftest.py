import pytest


@pytest.fixture
def staff_user(django_user_model):
    """A superuser without a password: force_login needs none, and hashing one costs a second per test."""
    return django_user_model.objects.create_user(
        username="staff", password=None, is_staff=True, is_superuser=True
    )
