"""python manage.py seed_test_model: the provider "test-model" of kind "Test model (replies generated locally)",
if no provider has that name yet, so a local site (`make run` calls this after seed_demo) can generate, review
and launch a dry run with no key and no network (generation/providers/placeholder.py). Running it again changes
nothing."""

from django.core.management.base import BaseCommand

from generation.models import Provider
from generation.providers.placeholder import PlaceholderAdapter

NAME = "test-model"


class Command(BaseCommand):
    help = "Create the test model's provider (placeholder replies made locally) if it is missing."

    def handle(self, *args, **options):
        _, created = Provider.objects.get_or_create(
            name=NAME, defaults={"kind": PlaceholderAdapter.kind, "requests_per_minute": 6000}
        )
        if created:
            self.stdout.write(
                f"Provider {NAME}: the test model (placeholder replies made here; no key, no network). Choose it "
                "for an LLM condition to try the whole path; a study on it launches only as a dry run."
            )
