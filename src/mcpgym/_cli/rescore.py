"""`mcpgym rescore`: run a rubric over recorded episodes, offline.

Layer: CLI, over `mcpgym._recording.rescore`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mcpgym._recording import rescore

NAME = "rescore"


def register(sub: Any) -> None:
    rescore.register(sub)


def dispatch(args: argparse.Namespace) -> None:
    sys.exit(rescore.command(args))
