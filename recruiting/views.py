"""Prolific's webhook endpoint: check, store, enqueue, answer. The work happens in a Celery task, so the
answer is fast (Prolific redelivers on timeouts) and a redelivery is only counted."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from .models import ProlificStudy
from .tasks import process_webhook_event
from .webhooks import WebhookRejected, webhook_event_ingest


@csrf_exempt  # Prolific cannot send a CSRF token; the HMAC signature authenticates the request instead
@require_POST
def prolific_webhook(request: HttpRequest, slug: str) -> JsonResponse:
    link = get_object_or_404(ProlificStudy.objects.select_related("study"), study__slug=slug)
    try:
        ingested = webhook_event_ingest(link=link, headers=request.headers, body=request.body)
    except WebhookRejected as exc:
        return JsonResponse({"error": str(exc)}, status=exc.status)
    if ingested.new:
        process_webhook_event.delay_on_commit(ingested.event.pk)
    return JsonResponse({"received": ingested.event.event_id, "duplicate": not ingested.new})
