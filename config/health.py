"""/healthz: can this web process reach the database and the broker? For load balancers, compose and alerts.

A participant page needs only the database (sessions fall back to it, the rate limiter fails open), so the
plain check answers 200 while the database answers — "degraded" when the broker is down, so a Redis outage is
visible without taking every web process out of rotation. `?strict=1` answers 503 when either is down: for
monitoring and alerting."""

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
    """{"status": "ok" | "degraded" | "unavailable", "checks": {...}}: 200 while the database answers (503
    when it does not); with ?strict=1, 503 unless the broker answers too. Names the failing check; says
    nothing about versions or hosts: it is public."""
    checks = {"database": _check_database(), "broker": _check_broker()}
    if all(check["ok"] for check in checks.values()):
        status = "ok"
    elif checks["database"]["ok"]:
        status = "degraded"
    else:
        status = "unavailable"
    strict = request.GET.get("strict", "").lower() in {"1", "true", "yes"}
    serving = status == "ok" or (status == "degraded" and not strict)
    return JsonResponse({"status": status, "checks": checks}, status=200 if serving else 503)
