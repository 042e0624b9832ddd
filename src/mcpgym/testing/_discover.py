"""Find the Environment classes a package defines, to run every check over all of them.

Layer: testing tools.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

from mcpgym._episode.environment import Environment


def environments_in(package: str | types.ModuleType) -> list[type[Environment]]:
    """Every Environment subclass defined in `package` or its direct submodules, sorted by name.

    Classes re-exported from elsewhere are left out, so each is found once, under its home.
    """
    root = importlib.import_module(package) if isinstance(package, str) else package
    modules = [root]
    for info in pkgutil.iter_modules(getattr(root, "__path__", [])):
        modules.append(importlib.import_module(f"{root.__name__}.{info.name}"))
    found = {
        obj
        for module in modules
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, Environment)
        and obj is not Environment
        and obj.__module__.startswith(root.__name__)
    }
    return sorted(found, key=lambda cls: (cls.__name__, cls.__module__))
