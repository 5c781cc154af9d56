"""Structured logs: one JSON object per line, each carrying the id of the request it belongs to.

The request id is set by `config.middleware.RequestIdMiddleware` in a context variable, so every log line
written while a request is handled (ours, Django's, a library's) carries it without being passed around.
Error reporting to Sentry (or any Sentry-compatible service) is switched on only when SENTRY_DSN is set.
"""

from __future__ import annotations

import contextvars
import json
import logging
from datetime import UTC, datetime

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)

# Attributes every LogRecord has; anything else on a record came from `extra=` and is logged as a field.
_RECORD_ATTRIBUTES = set(vars(logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None))) | {
    "message",
    "asctime",
    "request_id",
    "request",  # django.request's records carry the request object; its id is logged instead
}


class RequestIdFilter(logging.Filter):
    """Puts the current request's id on every record (None outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        # django.request logs 4xx/5xx after the middleware has returned: take the id from the request.
        record.request_id = request_id_var.get() or getattr(
            getattr(record, "request", None), "request_id", None
        )
        return True


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON: time, level, logger, message, request id and any extras."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or request_id_var.get(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and not key.startswith("_"):
                entry[key] = (
                    value if isinstance(value, str | int | float | bool | type(None)) else repr(value)
                )
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        # One line whatever the message holds: json.dumps escapes newlines inside strings.
        return json.dumps(entry, ensure_ascii=False, default=str)


def build_logging(*, level: str, fmt: str) -> dict:
    """The LOGGING dict: JSON lines (fmt="json") or plain text (fmt="plain") on stderr."""
    if fmt not in {"json", "plain"}:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"LOG_FORMAT={fmt!r}: use json or plain.")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "config.logging.RequestIdFilter"}},
        "formatters": {
            "json": {"()": "config.logging.JsonFormatter"},
            "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        },
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": fmt, "filters": ["request_id"]},
            # A logger without any handler would fall back to logging.lastResort (plain text on stderr).
            "discard": {"class": "logging.NullHandler"},
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # Django's default config gives the "django" logger a plain-text console handler of its own; its
            # records also reach the root's handler, so every warning was printed twice (text, then JSON).
            # Naming it here drops that handler: each line is written once, by the root.
            "django": {"handlers": [], "level": level},
            "django.db.backends": {"level": "WARNING"},
            # The access line is written by RequestIdMiddleware (with the request id and duration);
            # runserver's own access log (its 4xx/5xx lines too) would only repeat it.
            "django.server": {"handlers": ["discard"], "propagate": False},
        },
    }


def sentry_init(*, dsn: str, environment: str, traces_sample_rate: float = 0.0) -> bool:
    """Starts error reporting to the Sentry-compatible service at `dsn`; does nothing when dsn is empty.

    Participants' ids and answers are personal data: no request bodies, cookies or user details are sent
    (send_default_pii=False). Returns whether reporting is on.
    """
    if not dsn:
        return False
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.integrations.django import DjangoIntegration

    sentry_sdk.init(
        dsn=dsn,
        environment=environment,
        integrations=[DjangoIntegration(), CeleryIntegration()],
        send_default_pii=False,
        max_request_body_size="never",
        traces_sample_rate=traces_sample_rate,
    )
    return True
