"""/healthz: can this web process reach the database and the broker? For load balancers and compose."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe


def _check_database() -> dict:
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any failure means unhealthy; the reason is reported, not raised
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True, "ms": round((time.perf_counter() - started) * 1000, 1)}


def _check_broker() -> dict:
    if not settings.REDIS_URL:
        return {"ok": True, "detail": "no broker configured (tasks run in-process)"}
    import redis

    started = time.perf_counter()
    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
    try:
        client.ping()
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}
    finally:
        client.close()
    return {"ok": True, "ms": round((time.perf_counter() - started) * 1000, 1)}


@never_cache
@require_safe
def healthz(request):
    """200 with {"status": "ok", ...} when the database and the broker answer, else 503 naming which failed.
    Says nothing about versions or hosts: it is public."""
    checks = {"database": _check_database(), "broker": _check_broker()}
    healthy = all(check["ok"] for check in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "unavailable", "checks": checks}, status=200 if healthy else 503
    )
