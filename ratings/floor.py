"""The benchmark floor: a view that writes one row and answers, through the full middleware stack.

`bench/participants.py` hammers it at the same concurrency as the participant flow, so the flow's
throughput can be given as a fraction of what this server can do at all. Off (404) unless
BENCH_FLOOR_ENABLED=1: it takes unauthenticated writes.
"""

from django.conf import settings
from django.http import Http404, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from .models import FloorWrite


@csrf_exempt  # a benchmark target with no form; it exists only while BENCH_FLOOR_ENABLED=1
@require_POST
def floor_write(request):
    if not settings.BENCH_FLOOR_ENABLED:
        raise Http404
    row = FloorWrite.objects.create()
    return HttpResponse(str(row.pk), content_type="text/plain")
