"""Views named by their dotted path and imported on their first request.

The analysis pages and API import pandas, SciPy, statsmodels and matplotlib (4–6 s on the development machine).
A URLconf that imported their modules made every management command that runs Django's checks (they load the
URLconf), and every process's first page, pay for them; with `lazy_view` only a request that runs analysis
does (bench/researcher.py measures it; tests/test_import_time.py keeps it so).

`lazy_view("analysis.views.index")` for a function view, `lazy_view("analysis.api.StudyList").as_view()` for a
class-based view (the class's `as_view()` is called on first use); `LazyViews("analysis.views")` stands for the
module in a URLconf. URL resolving and reversing never import the module:
the object answers the names Django's resolver asks for (`__module__`, `__qualname__`, `__name__`); anything
else (DRF's `cls`, `csrf_exempt`, drf-spectacular's introspection) imports the view and is forwarded to it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.utils.module_loading import import_string

#: Attributes asked while URLs are resolved (URLPattern.lookup_str asks for view_class; its answer without it,
#: module + qualname, is the same string), answered "absent" instead of importing the view.
ANSWERED_WITHOUT_IMPORT = frozenset({"view_class"})


#: The modules every lazy view made so far names: what a server imports at start (config/warm.py).
_MODULES: set[str] = set()


def lazy_modules() -> set[str]:
    return set(_MODULES)


class LazyView:
    def __init__(self, dotted: str, *, as_view: bool = False, **initkwargs) -> None:
        _MODULES.add(dotted.rpartition(".")[0])
        self._dotted = dotted
        self._as_view = as_view
        self._initkwargs = initkwargs
        self._view: Callable | None = None
        self._lock = threading.Lock()
        module, _, name = dotted.rpartition(".")
        # What URLPattern.lookup_str and the checks read: answered without importing.
        self.__module__ = module
        self.__qualname__ = self.__name__ = name

    def _load(self) -> Callable:
        if self._view is None:
            with self._lock:
                if self._view is None:
                    target = import_string(self._dotted)
                    self._view = target.as_view(**self._initkwargs) if self._as_view else target
        return self._view

    def as_view(self, **initkwargs) -> LazyView:
        """A class-based view: `as_view(**initkwargs)` of the class, called on first use."""
        return LazyView(self._dotted, as_view=True, **initkwargs)

    def __call__(self, request, *args, **kwargs):
        return self._load()(request, *args, **kwargs)

    def __getattr__(self, name: str):
        # Only for attributes this object lacks (cls, initkwargs, csrf_exempt, view_class, …): the real view's.
        if name.startswith("_") or name in ANSWERED_WITHOUT_IMPORT:
            raise AttributeError(name)
        return getattr(self._load(), name)

    def __repr__(self) -> str:
        return f"<lazy view {self._dotted}>"


def lazy_view(dotted: str) -> LazyView:
    """The view at `dotted`, imported on its first request (a class: `lazy_view(...).as_view()`)."""
    return LazyView(dotted)


class LazyViews:
    """A views module seen through lazy views: `LazyViews("analysis.views").dashboard` is
    `lazy_view("analysis.views.index")`, so a URLconf reads as if it had imported the module."""

    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, name: str) -> LazyView:
        if name.startswith("_"):
            raise AttributeError(name)
        return lazy_view(f"{self._module}.{name}")
