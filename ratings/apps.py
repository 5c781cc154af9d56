import importlib
import importlib.util

from django.apps import AppConfig


class RatingsConfig(AppConfig):
    name = "ratings"
    verbose_name = "Ratings"

    def ready(self):
        # Register the participant flow's step handlers (see ratings/flow.py): the rating kind's, and those of
        # any other study kind that ships a module here.
        importlib.import_module("ratings.views")
        if importlib.util.find_spec("ratings.questionnaire") is not None:
            importlib.import_module("ratings.questionnaire")
