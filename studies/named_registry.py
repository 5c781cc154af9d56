"""The rules every registry of named things in the spine keeps (study kinds, recruiting platforms): one thing a
name, registered at import of the module that defines it."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def named_add(registry: dict[str, T], item: T, what: str) -> T:
    """Adds `item` under `item.name`. Registering the same class again is a no-op; another class under a taken
    name is a bug."""
    existing = registry.get(item.name)
    if existing is not None and type(existing) is not type(item):
        raise ValueError(f"{what} {item.name!r} is already registered by {type(existing).__name__}")
    registry[item.name] = item
    return item


def named_get(registry: dict[str, T], name: str, missing: type[LookupError], what: str) -> T:
    """The thing registered under `name`; `missing`, naming the known ones, when there is none."""
    try:
        return registry[name]
    except KeyError:
        raise missing(f"no {what} {name!r} is registered (known: {sorted(registry)})") from None
