"""A small client for Prolific's public API (v1): the calls this app makes, nothing more.

Transient failures (connection errors, timeouts, 429, 5xx) are retried with exponential backoff and jitter,
or after exactly the Retry-After Prolific sent (a wait longer than PROLIFIC_RETRY_AFTER_MAX is not slept
through: the call fails as transient, saying when to try again); anything else (400, 401, 404...) raises
`ProlificError` at once. Its message is for the researcher: what Prolific said in words (its error's title
and detail, never its raw JSON) and what to do next. Lists are read through every page (`next` links).

Calls that are not idempotent on Prolific's side (paying a bulk bonus) are made with `retry=False`: the
caller keeps a local record and reconciles instead of calling again.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from urllib.parse import urljoin

import requests
from django.conf import settings

from studies.sealed import SealedKeyError, sealed_key_for_origin, url_origin


class ProlificError(Exception):
    """Prolific refused the call (or it never answered after the retries). `status` is the HTTP status, or
    None when there was no answer; `transient` says whether trying again later may help."""

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False):
        super().__init__(message)
        self.status = status
        self.transient = transient


class ProlificTokenMissing(ProlificError):
    pass


def _retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


#: What to do next, by HTTP status (the researcher reads it in the admin and the terminal).
NEXT_STEP = {
    400: "Check the study's settings here against Prolific's rules; nothing was changed on Prolific.",
    401: "Check the API token: the one typed on the study's Prolific page, or else the one in the environment "
    "variable it names (it may have been deleted or mistyped).",
    403: "The token's account may not do this: check its workspace role on Prolific.",
    404: "Prolific does not know this id: check that the study still exists on Prolific (and in this workspace).",
    409: "Prolific says the study or submission is not in a state that allows this: reconcile, then try again.",
    429: "Prolific is rate limiting: try again in a few minutes (the scheduled reconcile retries by itself).",
}
SERVER_ERROR_STEP = (
    "Prolific is having trouble: try again in a few minutes (the scheduled reconcile retries by itself)."
)


def _said(response: requests.Response) -> str:
    """What Prolific's error body says, in words: its title and detail (or the message), never the raw JSON."""
    try:
        body = response.json()
    except ValueError:
        return ""
    error = body.get("error", body) if isinstance(body, dict) else body
    if not isinstance(error, dict):
        return str(error)[:200] if isinstance(error, str) else ""
    parts = []
    for key in ("title", "detail", "message", "additional_information"):
        value = error.get(key)
        if isinstance(value, list):
            value = "; ".join(str(v) for v in value)
        elif isinstance(value, dict):
            value = "; ".join(f"{k}: {v}" for k, v in value.items())
        if value and str(value) not in parts:
            parts.append(str(value))
    return " — ".join(parts)[:300]


def refusal_message(action: str, response: requests.Response) -> str:
    said = _said(response)
    step = NEXT_STEP.get(response.status_code, SERVER_ERROR_STEP if response.status_code >= 500 else "")
    return f"Prolific refused {action} (HTTP {response.status_code}){': ' + said if said else ''}. {step}".strip()


class ProlificClient:
    def __init__(
        self,
        *,
        token: str,
        base_url: str | None = None,
        timeout: float | None = None,
        max_attempts: int | None = None,
        backoff_base: float | None = None,
        backoff_cap: float | None = None,
    ):
        self.base_url = (base_url or settings.PROLIFIC_API_URL).rstrip("/") + "/"
        self.timeout = settings.PROLIFIC_TIMEOUT_SECONDS if timeout is None else timeout
        self.max_attempts = max_attempts or settings.PROLIFIC_MAX_ATTEMPTS
        self.backoff_base = settings.PROLIFIC_BACKOFF_BASE if backoff_base is None else backoff_base
        self.backoff_cap = settings.PROLIFIC_BACKOFF_CAP if backoff_cap is None else backoff_cap
        self.session = requests.Session()
        self.session.headers.update({"Authorization": f"Token {token}", "Accept": "application/json"})

    @classmethod
    def for_link(cls, link) -> ProlificClient:
        """A client with the token typed in the admin for the linked study (opened only for the Prolific API it
        was typed for), or else the one in the environment variable the study names."""
        if link.token_sealed:
            try:
                token = sealed_key_for_origin(link.token_sealed, origin=url_origin(settings.PROLIFIC_API_URL))
            except SealedKeyError as exc:
                raise ProlificTokenMissing(
                    f"The Prolific API token of study {link.study.slug}: {exc}"
                ) from exc
            return cls(token=token)
        token = os.environ.get(link.token_env, "")
        if not token:
            raise ProlificTokenMissing(
                f"The environment variable {link.token_env} (Prolific API token of study "
                f"{link.study.slug}) is not set."
            )
        return cls(token=token)

    # --- transport ------------------------------------------------------------------------------------

    def _sleep(self, attempt: int, hint: float | None) -> None:
        if hint is not None:
            delay = hint  # as Prolific asked (request() refuses to wait longer than the maximum)
        else:
            delay = min(self.backoff_cap, self.backoff_base * 2**attempt)
            delay += random.uniform(0, delay / 2)
        time.sleep(delay)

    def request(self, method: str, path: str, *, json=None, params=None, retry: bool = True) -> dict:
        return self.request_full(method, path, json=json, params=params, retry=retry)[0]

    def request_full(
        self, method: str, path: str, *, json=None, params=None, retry: bool = True
    ) -> tuple[dict, dict]:
        """The answer's JSON and its headers."""
        url = path if path.startswith("http") else urljoin(self.base_url, path.lstrip("/"))
        attempts = self.max_attempts if retry else 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = self.session.request(method, url, json=json, params=params, timeout=self.timeout)
            except (requests.ConnectionError, requests.Timeout) as exc:
                if last:
                    raise ProlificError(f"{method} {path}: no answer ({exc})", transient=True) from exc
                self._sleep(attempt, None)
                continue
            if response.status_code == 429 or response.status_code >= 500:
                wait = _retry_after(response)
                if last or (wait is not None and wait > settings.PROLIFIC_RETRY_AFTER_MAX):
                    later = f" Prolific asked to wait {wait:g} s." if wait else ""
                    raise ProlificError(
                        f"{refusal_message(f'{method} {path}', response)}{later}",
                        status=response.status_code,
                        transient=True,
                    )
                self._sleep(attempt, wait)
                continue
            if response.status_code >= 400:
                raise ProlificError(
                    refusal_message(f"{method} {path}", response), status=response.status_code
                )
            if not response.content:
                return {}, dict(response.headers)
            try:
                return response.json(), dict(response.headers)
            except ValueError as exc:
                raise ProlificError(f"{method} {path}: the answer is not JSON", transient=True) from exc
        raise AssertionError("unreachable")

    def paginate(self, path: str, *, params=None) -> Iterator[dict]:
        """Every result of a listed resource, following `next` links to the last page."""
        url, query = path, params
        while url:
            page = self.request("GET", url, params=query)
            yield from page.get("results", [])
            url = page.get("next") or page.get("_links", {}).get("next", {}).get("href")
            query = None  # a `next` link carries its own query

    # --- studies --------------------------------------------------------------------------------------

    def study_create(self, payload: dict) -> dict:
        return self.request("POST", "studies/", json=payload)

    def study_get(self, study_id: str) -> dict:
        return self.request("GET", f"studies/{study_id}/")

    def study_update(self, study_id: str, payload: dict) -> dict:
        return self.request("PATCH", f"studies/{study_id}/", json=payload)

    def study_transition(self, study_id: str, action: str) -> dict:
        return self.request("POST", f"studies/{study_id}/transition/", json={"action": action})

    # --- submissions ----------------------------------------------------------------------------------

    def submissions(self, study_id: str) -> Iterator[dict]:
        return self.paginate(f"studies/{study_id}/submissions/")

    def submission_get(self, submission_id: str) -> dict:
        return self.request("GET", f"submissions/{submission_id}/")

    def submissions_bulk_approve(self, study_id: str, participant_ids: list[str]) -> dict:
        # One attempt: Prolific does not document it as idempotent. The caller keeps the claims of an unknown
        # outcome and reconciles (recruiting.submissions).
        return self.request(
            "POST",
            "submissions/bulk-approve/",
            json={"study_id": study_id, "participant_ids": participant_ids},
            retry=False,
        )

    def submission_transition(self, submission_id: str, payload: dict) -> dict:
        return self.request("POST", f"submissions/{submission_id}/transition/", json=payload)

    # --- bonuses --------------------------------------------------------------------------------------

    def bonus_set_up(self, study_id: str, csv_bonuses: str) -> dict:
        return self.request(
            "POST", "submissions/bonus-payments/", json={"study_id": study_id, "csv_bonuses": csv_bonuses}
        )

    def bonus_pay(self, bulk_id: str) -> dict:
        # Not idempotent on Prolific: one attempt, the caller reconciles an unknown outcome.
        return self.request("POST", f"bulk-bonus-payments/{bulk_id}/pay/", retry=False)

    def bonus_get(self, bulk_id: str) -> dict:
        # Not in Prolific's public API reference: recruiting.bonuses treats any answer but a known status as
        # "Prolific does not say" and leaves the decision to the researcher.
        return self.request("GET", f"bulk-bonus-payments/{bulk_id}/")

    # --- webhook subscriptions (Prolific's hooks endpoints) ------------------------------------------

    def hook_subscriptions(self, workspace_id: str) -> list[dict]:
        answer = self.request("GET", "hooks/subscriptions/", params={"workspace_id": workspace_id})
        return list(answer.get("results", []))

    def hook_subscribe(self, workspace_id: str, event_type: str, target_url: str) -> tuple[dict, str]:
        """Creates a subscription; returns its body and the X-Hook-Secret header that confirms it."""
        body, headers = self.request_full(
            "POST",
            "hooks/subscriptions/",
            json={"workspace_id": workspace_id, "event_type": event_type, "target_url": target_url},
        )
        secret = next((v for k, v in headers.items() if k.lower() == "x-hook-secret"), "")
        return body, secret

    def hook_confirm(self, subscription_id: str, secret: str) -> dict:
        return self.request("POST", f"hooks/subscriptions/{subscription_id}/", json={"secret": secret})
