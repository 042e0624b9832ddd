"""A clone's short package names: `servers` IS `mcpgym.servers`, `harness` IS `mcpgym.harness`.

Layer: import plumbing, used only by the thin `servers/` and `harness/` packages at the root of
a checkout (the wheel ships neither; rfcs/0013-authoring.md, "Packaging"). Aliasing hands out
the real module objects under the short names, never a second copy: importing a module twice
under two names would give it two sets of state and two classes that fail each other's
isinstance checks.

`python -m servers.coding` works too: runpy imports `servers.coding` through the alias (the
real package, whose `__path__` is the real directory) and then finds and runs the real
`__main__.py` as `__main__`, which runpy never imports under any other name anyway.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, real: str) -> None:
        self.real = real
        self.real_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.real)
        self.real_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system stamped the alias's spec on the real module; put the real one back
        # so the module keeps describing itself (reload, pickling by name, runpy) as it is.
        module.__spec__ = self.real_spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    def __init__(self, short: str, real: str) -> None:
        self.short, self.real = short, real

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(self.short + ".") or fullname.rpartition(".")[2] == "__main__":
            return None  # not ours; a `__main__` is run by runpy from the real directory, not aliased
        real = self.real + fullname[len(self.short) :]
        found = importlib.util.find_spec(real)
        if found is None:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(real), is_package=found.submodule_search_locations is not None
        )


def alias_package(short: str, real: str) -> None:
    """Make `short` and every `short.X` the very modules `real` and `real.X`.

    Called from the short package's own `__init__`, which the import system then swaps out of
    `sys.modules` for the real package.
    """
    if not any(isinstance(f, _AliasFinder) and f.short == short for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder(short, real))
    sys.modules[short] = importlib.import_module(real)
    # The submodules the real package imported itself are aliased now, not through the finder:
    # importing through a finder sets the parent's attribute to the submodule, which would
    # replace a function of the same name (`harness.rollout`, the function, by its module).
    prefix = real + "."
    for name, module in list(sys.modules.items()):
        if name.startswith(prefix):
            sys.modules.setdefault(short + name[len(real) :], module)
