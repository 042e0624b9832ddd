"""`harness` in a checkout: its attributes are `mcpgym.harness`'s (installed, import `mcpgym.harness`).

No import hook: this is a module of its own whose attribute lookups go to `mcpgym.harness`, so
`harness.rollout` is the very same function; its submodules are `mcpgym.harness.X` only
(rfcs/0016-layout.md).
"""

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    return getattr(importlib.import_module("mcpgym.harness"), name)
