"""A package's names loaded from their homes on first use (PEP 562), so that importing the package imports
none of them: `__getattr__, __dir__ = lazy.exports(__name__, globals(), LAZY)`, where LAZY maps each name to
its module (".stats"). tests/layering.py reads a package's LAZY to follow these imports. A leaf: every layer
may use it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, namespace: dict[str, Any],
            table: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's `__getattr__` (a name of `table` imported from its module, then a plain attribute) and
    `__dir__` (its own names and the lazy ones)."""

    def __getattr__(name: str) -> Any:
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(table[name], package), name)
        namespace[name] = value  # once loaded, a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__
