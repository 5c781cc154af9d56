"""Nothing process-local in production: with several web processes and replicas behind a load balancer
without stickiness, any state one process keeps for itself is lost on the next request that lands elsewhere.
`process_local_problems` names each such setting; the settings module refuses to start on any
(ImproperlyConfigured), so the mistake shows at deploy time, not as lost sessions mid-study."""

from __future__ import annotations

PROCESS_LOCAL_CACHES = {
    "django.core.cache.backends.locmem.LocMemCache",
    "django.core.cache.backends.filebased.FileBasedCache",
    "django.core.cache.backends.dummy.DummyCache",
}
# Caches that may stay in each process: their keys are a hash of what they hold (ratings/shared_pages.py
# keys a rendered consent page by its content), so no process can serve another's stale copy.
CONTENT_ADDRESSED_CACHES = {"participant-pages"}
FILE_SESSIONS = "django.contrib.sessions.backends.file"
CACHED_SESSIONS = {
    "django.contrib.sessions.backends.cache",
    "django.contrib.sessions.backends.cached_db",
    "config.sessions",
}
LOCAL_STORAGES = {"django.core.files.storage.FileSystemStorage", "django.core.files.storage.InMemoryStorage"}


def process_local_problems(*, caches: dict, session_engine: str, session_cache_alias: str, storages: dict):
    """What in these settings another replica could not see: a cache held in one process or on one disk, file
    sessions or sessions cached there, files stored on the local disk."""
    problems = []
    for alias, cache in caches.items():
        if cache["BACKEND"] in PROCESS_LOCAL_CACHES and alias not in CONTENT_ADDRESSED_CACHES:
            problems.append(
                f"the {alias!r} cache ({cache['BACKEND'].rsplit('.', 1)[-1]}) is local to one process: "
                "set REDIS_URL"
            )
    if session_engine == FILE_SESSIONS:
        problems.append(
            "sessions are files on one machine's disk (SESSION_ENGINE): use the database or Redis"
        )
    elif session_engine in CACHED_SESSIONS:
        backend = caches.get(session_cache_alias, {}).get("BACKEND")
        if backend in PROCESS_LOCAL_CACHES:
            problems.append(f"sessions are cached in a process-local cache ({session_cache_alias!r})")
    if storages["default"]["BACKEND"] in LOCAL_STORAGES:
        problems.append(
            "shared files (reports, exports, uploads) would be written to the local disk (FILE_STORAGE=local): "
            "use FILE_STORAGE=s3 or none"
        )
    return problems
