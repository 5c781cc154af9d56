"""Re-encrypt the provider keys typed in the admin with the first PROVIDER_KEYS_SECRET (after adding a new one in
front to rotate); the old secret can then be removed.

    python manage.py provider_keys_reseal

Each key keeps the endpoint it is bound to. A key no listed secret can decrypt is named and left as it is."""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from generation.models import Provider
from studies.sealed import SealedKeyError, key_reseal, key_store_problem


class Command(BaseCommand):
    help = "Re-encrypt the provider keys stored in the database with the first PROVIDER_KEYS_SECRET."

    def handle(self, *args, **options):
        if problem := key_store_problem():
            raise CommandError(problem)
        resealed, unreadable = 0, []
        with transaction.atomic():
            for provider in Provider.objects.select_for_update().exclude(api_key_sealed=""):
                try:
                    provider.api_key_sealed = key_reseal(provider.api_key_sealed)
                except SealedKeyError:
                    unreadable.append(provider.name)
                    continue
                provider.save(update_fields=["api_key_sealed"])
                resealed += 1
        self.stdout.write(f"Re-encrypted {resealed} provider key(s).")
        if unreadable:
            raise CommandError(
                f"No secret in PROVIDER_KEYS_SECRET decrypts the key of: {', '.join(unreadable)}. Enter those keys "
                "again on the providers' pages."
            )
