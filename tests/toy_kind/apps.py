from studies.kinds import app


class ToyConfig(app.KindConfig):
    """A fourth kind that exists only for the tests (tests/studies/test_toy_kind.py): one package, installed by
    one line of config/settings.py while DJANGO_ENV=test."""

    name = "tests.toy_kind"
    label = "toy_kind"
    verbose_name = "Toy studies (tests)"
