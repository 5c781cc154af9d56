"""A small client for Prolific's public API (v1): the calls this app makes, nothing more.

Transient failures (connection errors, timeouts, 429 honouring Retry-After, 5xx) are retried with
exponential backoff and jitter; anything else (400, 401, 404...) raises `ProlificError` at once. Lists are
read through every page (`next` links), never only the first.

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
        """A client with the token from the environment variable the linked study names."""
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
            delay = min(hint, self.backoff_cap)
        else:
            delay = min(self.backoff_cap, self.backoff_base * 2**attempt)
            delay += random.uniform(0, delay / 2)
        time.sleep(delay)

    def request(self, method: str, path: str, *, json=None, params=None, retry: bool = True) -> dict:
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
                if last:
                    raise ProlificError(
                        f"{method} {path}: HTTP {response.status_code} after {attempts} attempts",
                        status=response.status_code,
                        transient=True,
                    )
                self._sleep(attempt, _retry_after(response))
                continue
            if response.status_code >= 400:
                raise ProlificError(
                    f"{method} {path}: HTTP {response.status_code}: {response.text[:300]}",
                    status=response.status_code,
                )
            if not response.content:
                return {}
            try:
                return response.json()
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
        return self.request(
            "POST",
            "submissions/bulk-approve/",
            json={"study_id": study_id, "participant_ids": participant_ids},
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
        return self.request("GET", f"bulk-bonus-payments/{bulk_id}/")
