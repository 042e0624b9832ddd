"""Old public names kept importable for one release, warning on every access.

Layer: import plumbing (imports nothing from mcpgym). A package whose name moved binds
`__getattr__ = deprecated_names(__name__, {...})`: Python calls a module's `__getattr__` only for
a name the module does not have, so the old name resolves to the new object with a
`DeprecationWarning`, stays out of `__all__` and `dir()` (and so out of `from mcpgym import *`
and the API docs), and costs nothing to any other attribute access.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping

REMOVED_IN = "0.2"


def deprecated_names(
    module: str, renamed: Mapping[str, tuple[str, str]], lazy: Mapping[str, str] | None = None
) -> Callable[[str], object]:
    """A module `__getattr__` resolving each old name in `renamed` to `(new name, why)`.

    The new name is looked up in the same module when the old one is used (never copied at
    import time), so the alias is always the very object the new name is bound to. A name in
    `lazy` is imported from the module it maps to on first use and bound in `module` from then
    on (so `import mcpgym` need not load what only some of its names use).
    """
    lazy = lazy or {}

    def __getattr__(name: str) -> object:
        if name in lazy:
            value = getattr(importlib.import_module(lazy[name]), name)
            setattr(sys.modules[module], name, value)  # later reads are plain attribute reads
            return value
        if name not in renamed:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new, why = renamed[name]
        value = getattr(sys.modules[module], new)
        if sys._getframe(1).f_code.co_name == "_handle_fromlist":
            # `from package import Old` asks twice: the import system's hasattr, then the
            # statement itself. Warn once, for the statement.
            return value
        warnings.warn(
            f"{module}.{name} is deprecated and will be removed in mcpgym {REMOVED_IN}: use {module}.{new} ({why})",
            DeprecationWarning,
            stacklevel=2,
        )
        return value

    return __getattr__
