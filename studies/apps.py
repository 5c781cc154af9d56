import importlib

from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps

# The built-in study kinds, each registering itself once (studies/kinds/registry.py).
BUILT_IN_KINDS = ["studies.kinds.rating", "studies.kinds.questionnaire", "studies.kinds.pairwise"]


class StudiesConfig(AppConfig):
    name = "studies"
    verbose_name = "Studies"

    def ready(self):
        for module in BUILT_IN_KINDS:
            importlib.import_module(module)
        design = importlib.import_module("studies.design")  # connects the frozen design's guards
        design.kind_settings_guards_connect()


class ResearchAdminConfig(admin_apps.AdminConfig):
    """django.contrib.admin whose site is the researcher's home (studies/admin_home.py); it takes the place of
    "django.contrib.admin" in INSTALLED_APPS."""

    default = False  # named explicitly in INSTALLED_APPS; StudiesConfig is this module's default
    default_site = "studies.admin_home.ResearchAdminSite"
