import importlib

from django.apps import AppConfig


class GenerationConfig(AppConfig):
    name = "generation"
    verbose_name = "Generation"

    def ready(self):
        # What generation adds to a study's frozen design, copies and waves (studies/design.py's hooks).
        importlib.import_module("generation.design").register()
        # A judge that screens new conditions rates each generated response as it is stored.
        running = importlib.import_module("generation.services.running")
        judging = importlib.import_module("generation.services.judging")
        running.response_stored_hook_register(judging.screening_enqueue)
        # A participant's request asks a model for a reply at once through the spine's port (studies/live.py).
        live = importlib.import_module("generation.live")
        importlib.import_module("studies.live").live_responder_register(
            live.condition_respond_now, asynchronous=live.condition_respond_now_async
        )
