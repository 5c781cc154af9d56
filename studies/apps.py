from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class StudiesConfig(AppConfig):
    name = "studies"
    verbose_name = "Studies"

    def ready(self):
        from . import design  # noqa: F401 (connects the frozen design's guards; the kinds' own: their apps)
        from .platforms import direct, mturk  # noqa: F401 (the built-in platforms; Prolific: recruiting/apps.py)


class ResearchAdminConfig(admin_apps.AdminConfig):
    """django.contrib.admin whose site is the researcher's home (studies/admin_home.py); it takes the place of
    "django.contrib.admin" in INSTALLED_APPS."""

    default = False  # named explicitly in INSTALLED_APPS; StudiesConfig is this module's default
    default_site = "studies.admin_home.ResearchAdminSite"
