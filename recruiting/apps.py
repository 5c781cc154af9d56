from django.apps import AppConfig


class RecruitingConfig(AppConfig):
    name = "recruiting"
    verbose_name = "Recruiting (Prolific)"
