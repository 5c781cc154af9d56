"""What analysts see instead of a participant's platform id (PROLIFIC_PID, workerId) in exports.

A pseudonym is ``P`` and the first 16 hex digits of HMAC-SHA256(key, "<study id>:<platform id>"): stable (the same
participant has the same pseudonym in every export of the study, so exports join), different in every study (a
person who took part in two studies cannot be followed across them), and not reversible without the key.

The key is settings.EXPORT_PSEUDONYM_KEY, by default derived from SECRET_KEY (rotating SECRET_KEY changes every
pseudonym; set EXPORT_PSEUDONYM_KEY to keep them). Who sees raw platform ids is the exports' rule
(settings.EXPORT_RAW_IDS_FOR_STAFF, analysis.exports).

The ratings export is written by PostgreSQL (kinds/rating/export_sql.py), so the same HMAC is also written in SQL with
PostgreSQL's built-in sha256 (no extension): HMAC(K, m) = H((K ⊕ opad) ‖ H((K ⊕ ipad) ‖ m)).
"""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings

DIGITS = 16
BLOCK = 64  # SHA-256's block size in bytes


def _key() -> bytes:
    configured = settings.EXPORT_PSEUDONYM_KEY
    if configured:
        return hashlib.sha256(configured.encode()).digest()
    return hashlib.sha256(b"export-pseudonym:" + settings.SECRET_KEY.encode()).digest()


def pseudonym(*, study_id: int, platform_id: str) -> str:
    digest = hmac.new(_key(), f"{study_id}:{platform_id}".encode(), hashlib.sha256).hexdigest()
    return f"P{digest[:DIGITS]}"


def pseudonym_sql(*, study_id: int, column: str) -> tuple[str, list]:
    """The SQL expression of `pseudonym` over `column` (the platform id), and its parameters in order."""
    key = _key().ljust(BLOCK, b"\0")
    inner, outer = bytes(b ^ 0x36 for b in key), bytes(b ^ 0x5C for b in key)
    sql = (
        "'P' || substr(encode(sha256(%s::bytea || sha256(%s::bytea || "
        f"convert_to(%s || {column}, 'UTF8'))), 'hex'), 1, {DIGITS})"
    )
    return sql, [outer, inner, f"{study_id}:"]
