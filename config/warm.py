"""What a web server loads and computes before its first request, so that no researcher waits for it.

- The analysis modules (pandas, SciPy, statsmodels and matplotlib under them: seconds to import) that the lazy
  views (config/lazy_views.py) and the study kinds' dotted paths (launch panels, exclusion flags, power planners,
  analysis entries) name. Commands never import this (config/wsgi.py does), so they still load none of it; a
  server pays once at start, and under `gunicorn --preload` once for all its workers, which share the pages.
- The providers' SDKs (openai, anthropic: seconds of CPU to import): a live conversation's first reply would
  otherwise import them on an async worker's event loop, which serves nobody meanwhile (on a busy machine for
  longer than gunicorn's timeout, which then kills the worker, whose replacement starts cold again).
- Without a broker (`make run`: no beat either), what beat computes ahead every minute where there is one: the
  dashboards' analyses of the live and closed studies (analysis/snapshots.py) and the pairwise pages' files
  (kinds/pairwise/views.py), once, on the background thread; the server answers meanwhile.
"""

from __future__ import annotations

import logging
from importlib import import_module

from django.conf import settings
from django.db import DatabaseError
from django.urls import get_resolver
from django.utils.module_loading import import_string

from config.lazy_views import lazy_modules
from generation.providers.registry import adapter_sdk_modules
from studies.kinds import registered_kinds

logger = logging.getLogger(__name__)

#: The kinds' capabilities that name an analysis object by its dotted path (studies/kinds/base.py).
DOTTED_CAPABILITIES = ("analysis", "launch_panel", "exclusion_flags", "power_planner")
#: What beat runs every minute (config/settings.py), asked once at start without a broker, on the background
#: thread of analysis/snapshots.py: the pairwise pages' files, then the dashboards' analyses.
SNAPSHOTS_REFRESH = "analysis.snapshots.snapshots_refresh"
PAIRWISE_REFRESH = "kinds.pairwise.views.pairwise_pages_refresh"
LOCAL_SUBMIT = "analysis.snapshots.local_submit"


def warm_modules() -> list[str]:
    """The modules a server imports at start (Django set up): the lazy views' (the URLconf, loaded first,
    creates them) and the kinds' analysis paths."""
    get_resolver().url_patterns  # noqa: B018 - loaded for its side effect
    modules = set(lazy_modules())
    for kind in registered_kinds():
        for capability in DOTTED_CAPABILITIES:
            path = getattr(kind, capability, None)
            if isinstance(path, str) and "." in path:
                modules.add(path.rpartition(".")[0])
    modules.update(adapter_sdk_modules())
    return sorted(modules)


def server_warm() -> None:
    for module in warm_modules():
        import_module(module)
    if settings.CELERY_TASK_ALWAYS_EAGER and settings.DJANGO_ENV == "local":
        # The pairwise pages first: they have no progress indicator, where the dashboards show theirs.
        import_string(LOCAL_SUBMIT)(import_string(PAIRWISE_REFRESH))
        try:
            import_string(SNAPSHOTS_REFRESH)()
        except DatabaseError:  # not migrated yet: the first views ask instead
            logger.warning("warm: the analyses were not asked for ahead", exc_info=True)


def server_preload() -> None:
    """What config/wsgi.py and config/asgi.py do once their application exists: the URLconf (and every view module
    it imports) loaded now rather than on each worker's first request — under gunicorn --preload once in the
    master, before the workers fork, so they share those pages — then `server_warm`."""
    get_resolver().url_patterns  # noqa: B018 - loaded for its side effect
    server_warm()
