"""Request ids and the access log."""

from __future__ import annotations

import logging
import re
import time
import uuid

from .logging import request_id_var

access_log = logging.getLogger("access")

# An id from a proxy (nginx $request_id, a load balancer) is kept if it looks like one; anything else
# (too long, odd characters that could forge log lines) is replaced by a fresh id.
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class RequestIdMiddleware:
    """Gives every request an id (the incoming X-Request-ID if valid, else a new one), echoes it in the
    X-Request-ID response header, and writes one access-log line with path, status and duration."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.headers.get("X-Request-ID", "")
        request_id = incoming if _VALID_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        request.request_id = request_id
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            response["X-Request-ID"] = request_id
            access_log.info(
                "%s %s %s",
                request.method,
                request.path,
                response.status_code,
                extra={
                    "method": request.method,
                    "path": request.path,
                    "status": response.status_code,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                },
            )
            return response
        finally:
            request_id_var.reset(token)
