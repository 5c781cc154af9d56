"""Request ids and the access log; the Content-Security-Policy and Permissions-Policy headers; signing idle
accounts out."""

from __future__ import annotations

import http.client
import logging
import re
import time
import uuid

from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.middleware import CheckableLazyObject, CSPMiddleware
from django.conf import settings
from django.contrib.auth import SESSION_KEY, logout
from django.core.signals import setting_changed
from django.dispatch import receiver

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


class HealthCheckMiddleware:
    """Answers /healthz ahead of host validation and the HTTPS redirect.

    The container's health check and a load balancer call it by IP over plain HTTP: under a real
    ALLOWED_HOSTS that would be a 400, under SECURE_SSL_REDIRECT a 301, so the process would always look
    unhealthy. It says nothing about hosts or versions, so answering it for any Host header is safe."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path_info == "/healthz":
            from .health import healthz

            return healthz(request)
        return self.get_response(request)


class RequestBodyLimitMiddleware:
    """Refuses (413, a friendly page) a request whose declared body is larger than REQUEST_BODY_MAX_BYTES —
    REQUEST_BODY_MAX_IMPORT_BYTES on the admin's corpus import — from its Content-Length, before anything
    reads the body. Django's own DATA_UPLOAD_MAX_MEMORY_SIZE spares file parts, so a multipart body of any
    size used to be streamed to a temporary file first. A body without Content-Length (chunked) is not read
    by Django at all; nginx in front enforces the same limits on those while they stream."""

    def __init__(self, get_response):
        from django.conf import settings

        self.get_response = get_response
        self.large_paths = [re.compile(pattern) for pattern in settings.REQUEST_BODY_LARGE_PATHS]

    def limit_for(self, request) -> int:
        from django.conf import settings

        if any(pattern.match(request.path_info) for pattern in self.large_paths):
            return settings.REQUEST_BODY_MAX_IMPORT_BYTES
        return settings.REQUEST_BODY_MAX_BYTES

    def __call__(self, request):
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0  # Django reads no body without a valid length
        limit = self.limit_for(request)
        if declared > limit:
            from django.http import HttpResponse
            from django.template.loader import render_to_string

            access_log.warning(
                "request body too large", extra={"path": request.path, "declared": declared, "limit": limit}
            )
            response = HttpResponse(
                render_to_string("errors/413.html", {"limit_mb": max(1, limit // (1024 * 1024))}),
                status=413,
            )
            return response
        return self.get_response(request)


# What a view or a template may change in the policy of one response (django-csp's decorators and nonce).
_CSP_PER_RESPONSE = (
    "_csp_config",
    "_csp_update",
    "_csp_replace",
    "_csp_config_ro",
    "_csp_update_ro",
    "_csp_replace_ro",
)
_csp_built: dict[str, tuple[str, tuple[str, ...]]] = {}


@receiver(setting_changed)
def _csp_settings_changed(*, setting, **kwargs) -> None:
    if setting.startswith("CONTENT_SECURITY_POLICY"):
        _csp_built.clear()


def _csp_header(header: str) -> tuple[str, tuple[str, ...]]:
    """The policy the settings give (built once per process, rebuilt when the settings change in tests)
    and the path prefixes it does not apply to."""
    built = _csp_built.get(header)
    if built is None:
        from csp.utils import build_policy

        report_only = header == HEADER_REPORT_ONLY
        name = "CONTENT_SECURITY_POLICY_REPORT_ONLY" if report_only else "CONTENT_SECURITY_POLICY"
        policy = getattr(settings, name, None) or {}
        prefixes = tuple(policy.get("EXCLUDE_URL_PREFIXES", None) or ())
        built = _csp_built[header] = (build_policy(report_only=report_only), prefixes)
    return built


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """django-csp's middleware, with the policy built once instead of on every response; it also sets
    settings.PERMISSIONS_POLICY on every response that has none.

    django-csp rebuilds the header from the settings for each response (~0.1 ms of CPU: copying and
    sorting every directive, twice, for the policy and the report-only one), although it only ever changes
    when a view asks for a different one (django-csp's decorators) or a page uses a nonce: those
    responses go through django-csp's own code unchanged; every other one gets the same header, built
    once, under the same rules (not over one already set, not on an exempt response or an excluded path,
    not on Django's debug error pages)."""

    def process_response(self, request, response):
        if "Permissions-Policy" not in response:
            response["Permissions-Policy"] = settings.PERMISSIONS_POLICY
        if getattr(request, "_csp_nonce", None) is not None or any(
            hasattr(response, name) for name in _CSP_PER_RESPONSE
        ):
            return super().process_response(request, response)
        debug_page = response.status_code in (http.client.INTERNAL_SERVER_ERROR, http.client.NOT_FOUND)
        if debug_page and settings.DEBUG:
            return response
        for header, exempt in ((HEADER, "_csp_exempt"), (HEADER_REPORT_ONLY, "_csp_exempt_ro")):
            policy, prefixes = _csp_header(header)
            if (
                policy
                and header not in response
                and not getattr(response, exempt, False)
                and not request.path_info.startswith(prefixes)
            ):
                response[header] = policy
        # As django-csp does: a nonce asked for after the header is written is an error, not a silent gap.
        request.csp_nonce = CheckableLazyObject(self._csp_nonce_post_response)
        return response


class AccountIdleTimeoutMiddleware:
    """Signs a signed-in account (staff, analysts) out after settings.ACCOUNT_IDLE_TIMEOUT_SECONDS without a
    request, or settings.ACCOUNT_SESSION_MAX_SECONDS after it signed in. The next page then asks for the
    password again. Only the accounts' pages are looked at (ACCOUNT_PATHS): a participant page never loads
    its session here (the rate limiter fetches it in its own round trip, config/ratelimit.py); the last-seen
    time is written at most once a minute."""

    SEEN, SINCE = "_account_seen", "_account_since"
    ACCOUNT_PATHS = ("/admin/", "/analysis/", "/api/")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        session = getattr(request, "session", None)
        if (
            session is not None
            and request.path_info.startswith(self.ACCOUNT_PATHS)
            and SESSION_KEY in session
        ):
            now = int(time.time())
            seen, since = session.get(self.SEEN), session.get(self.SINCE)
            if (seen and now - seen > settings.ACCOUNT_IDLE_TIMEOUT_SECONDS) or (
                since and now - since > settings.ACCOUNT_SESSION_MAX_SECONDS
            ):
                logout(request)
            else:
                if not since:
                    session[self.SINCE] = now
                if not seen or now - seen >= 60:
                    session[self.SEEN] = now
        return self.get_response(request)


class AdminFormRefusalMiddleware:
    """An admin form posted and refused — shown again with the reasons, nothing saved — answers 400 Bad Request,
    not 200: a script (or a probe) posting a provider with another service's key, an internal address or an
    11-character password learns from the status alone that nothing was stored. Browsers show the page the
    same way. The sign-in page is left as it is (django-axes counts its failures)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_template_response(self, request, response):
        if request.method == "POST" and response.status_code == 200:
            context = response.context_data or {}
            form = context.get("adminform") or context.get("adminForm")
            if form is not None and (form.form.errors or context.get("errors")):
                response.status_code = 400
        return response
