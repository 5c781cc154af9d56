from django.apps import AppConfig


class RatingsConfig(AppConfig):
    name = "ratings"
    verbose_name = "Ratings"

    def ready(self):
        # The spine's steps every kind shares are served by this app's pages (studies/kinds/base.py).
        from studies.kinds.base import CONSENT, INSTRUCTIONS, spine_page_register

        from .views import CONSENT_PAGE, INSTRUCTIONS_PAGE

        spine_page_register(CONSENT, CONSENT_PAGE)
        spine_page_register(INSTRUCTIONS, INSTRUCTIONS_PAGE)
