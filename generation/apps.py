import importlib

from django.apps import AppConfig


class GenerationConfig(AppConfig):
    name = "generation"
    verbose_name = "Generation"

    def ready(self):
        # What generation adds to a study's frozen design, copies and waves (studies/design.py's hooks).
        importlib.import_module("generation.design").register()
