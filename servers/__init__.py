"""Launchers for a checkout: `python -m servers.NAME` runs the shipped environment `mcpgym.servers.NAME`.

The environments live in the package (src/mcpgym/servers/); once mcpgym is installed, run them as
`python -m mcpgym.servers.NAME` or `mcpgym-NAME`, and name them `mcpgym.servers.NAME` in code.
No import hook: each `servers.NAME` is a small module of its own whose attributes are looked up
on `mcpgym.servers.NAME`, so `servers.echo:Echo` still names the very same class from a checkout
(rfcs/0016-layout.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def forward(real: str) -> Callable[[str], Any]:
    """A module `__getattr__` that finds every attribute on the module `real` (imported on first use)."""

    def __getattr__(name: str) -> Any:
        module = importlib.import_module(real)
        if name == "__mcpgym_environment__" and not hasattr(module, name):
            # `servers.echo` as a target names the class `mcpgym.servers.echo` does (vars() here is empty).
            from mcpgym import load_environment

            return load_environment(real)
        return getattr(module, name)

    return __getattr__
