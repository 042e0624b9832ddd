"""Environment targets as the harness accepts them: everything `mcpgym.connect` takes, plus a
bare module path (`servers.coding`) naming a module with exactly one Environment subclass.

Layer: glue over `mcpgym.connect`'s target grammar; the CLI and the Python API both use it.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys

import mcpgym
from mcpgym._spec import is_spec

_MODULE_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def is_module_path(target: object) -> bool:
    return isinstance(target, str) and bool(_MODULE_PATH.match(target))


def resolve(target: mcpgym.Target) -> mcpgym.Target:
    """`"pkg.module"` → `"pkg.module:Class"` (its single Environment subclass); anything else as is."""
    if not isinstance(target, str) or not is_module_path(target) or is_spec(target):
        return target  # a run spec (mcpgym.yaml) goes to mcpgym.connect as it is
    return f"{target}:{environment_class(target).__qualname__}"


def environment_class(module_name: str) -> type[mcpgym.Environment]:
    """The one Environment subclass a module defines or re-exports."""
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # like `python -m`: modules in the working directory are importable
    module = importlib.import_module(module_name)
    found = {
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, mcpgym.Environment) and obj is not mcpgym.Environment
    }
    if len(found) != 1:
        names = ", ".join(sorted(c.__qualname__ for c in found)) or "none"
        raise TypeError(
            f"{module_name} has {len(found)} Environment subclasses ({names}): name one as {module_name}:CLASS"
        )
    (cls,) = found
    return cls
