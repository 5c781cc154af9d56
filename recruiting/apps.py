from django.apps import AppConfig


class RecruitingConfig(AppConfig):
    name = "recruiting"
    verbose_name = "Recruiting (Prolific)"

    def ready(self):
        from . import platform  # noqa: F401 (registers Prolific as a recruiting platform)
