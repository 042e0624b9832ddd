"""Optional dependencies: an import that needs an extra names it when a module is missing.

Layer: bottom utility (standard library only). Every module that imports an optional
dependency does it inside `needs(EXTRA, FEATURE)`, so a missing module always reads

    mcpgym.pool.ray needs the ray extra: pip install 'mcpgym[ray]' (No module named 'ray')

instead of a bare `No module named 'ray'`. `MissingExtra` is a `ModuleNotFoundError` (with the
missing module's `name`), so code that catches import errors keeps working.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class MissingExtra(ModuleNotFoundError):
    """`feature` needs `pip install 'mcpgym[extra]'`; `name` is the module that was missing."""

    def __init__(self, feature: str, extra: str, module: str | None) -> None:
        missing = f"No module named {module!r}" if module else "a module is missing"
        super().__init__(f"{feature} needs the {extra} extra: {install(extra)} ({missing})", name=module)
        self.extra = extra


def install(extra: str) -> str:
    """The command that installs `extra`."""
    return f"pip install 'mcpgym[{extra}]'"


@contextlib.contextmanager
def needs(extra: str, feature: str) -> Iterator[None]:
    """A module missing while the block imports raises `MissingExtra` naming `extra`."""
    try:
        yield
    except MissingExtra:
        raise  # a nested feature already named its extra
    except ModuleNotFoundError as exc:
        raise MissingExtra(feature, extra, exc.name) from exc
