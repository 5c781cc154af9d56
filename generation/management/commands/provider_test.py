"""Test a provider from the terminal, as the admin's Test connection does: one call of a few tokens.

    python manage.py provider_test <provider-name> [--model MODEL]

Without --model it asks the model of the first condition configured with the provider. Prints the model that
answered and the latency, or what to check; exits with an error when the provider does not work. Never prints the
key."""

from django.core.management.base import BaseCommand, CommandError

from generation.models import LLMConditionConfig, Provider
from generation.services.connection import provider_connection_test


class Command(BaseCommand):
    help = (
        "Ask a provider's model for a few tokens and say whether it works (model, latency) or what to check."
    )

    def add_arguments(self, parser):
        parser.add_argument("provider", help="The provider's name.")
        parser.add_argument("--model", default="", help="The model to ask (default: one configured with it).")

    def handle(self, *args, **options):
        provider = Provider.objects.filter(name=options["provider"]).first()
        if provider is None:
            names = ", ".join(Provider.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"No provider named {options['provider']!r} (there are: {names}).")
        model = options["model"] or (
            LLMConditionConfig.objects.filter(provider=provider).values_list("model", flat=True).first() or ""
        )
        result = provider_connection_test(provider=provider, model=model)
        if not result.ok:
            raise CommandError(result.message)
        self.stdout.write(result.message)
