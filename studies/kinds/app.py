"""The Django app a kind's package is: `KindConfig`, whose `ready()` imports the package's `kind` module (which
registers its StudyKind, registry.py) and freezes the kind's own settings with the design. A kind's `apps.py`
is one subclass naming its package (`class PairwiseConfig(app.KindConfig)`, the module imported, not the class, so
Django finds one app class there); `INSTALLED_APPS` lists the package, one line per kind."""

from __future__ import annotations

from importlib import import_module

from django.apps import AppConfig


class KindConfig(AppConfig):
    kind_module = "kind"  # the package's module that registers its StudyKind

    def ready(self) -> None:
        # Models load before any app is ready: the design (and the kind) are imported here, not above.
        from studies.design import kind_settings_guard_connect

        from .registry import registered_kinds

        import_module(f"{self.name}.{self.kind_module}")
        for kind in registered_kinds():
            if type(kind).__module__.startswith(f"{self.name}."):
                kind_settings_guard_connect(kind)
