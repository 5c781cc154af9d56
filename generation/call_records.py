"""What every record of one call to a provider keeps about whom it asked and what came back (a generated
response's provenance, a live call of a conversation): the provider, its kind and endpoint, the model asked for and
the one that answered, the provider's fingerprint and response id, why the reply ended. Abstract; kept apart from
the models so generation/models.py and generation/live_models.py share it without importing each other."""

from django.db import models


class ProviderCallRecord(models.Model):
    provider_name = models.CharField(max_length=64)
    provider_kind = models.CharField(max_length=16)
    base_url = models.CharField(max_length=300, blank=True)
    model_requested = models.CharField(max_length=200)
    model_returned = models.CharField(max_length=200, blank=True)
    system_fingerprint = models.CharField(max_length=200, blank=True)
    provider_response_id = models.CharField(max_length=200, blank=True)
    finish_reason = models.CharField(max_length=64, blank=True)

    class Meta:
        abstract = True

    @staticmethod
    def asked(provider, model: str) -> dict:
        """The fields that say whom a call asked: `provider` (a Provider) for `model`."""
        return {
            "provider_name": provider.name,
            "provider_kind": provider.kind,
            "base_url": provider.base_url,
            "model_requested": model,
        }
