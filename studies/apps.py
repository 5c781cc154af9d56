import importlib

from django.apps import AppConfig

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
