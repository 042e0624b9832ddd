"""`mcpgym envs`: list every installed environment, by the short name targets accept (the catalog).

Layer: CLI, over `mcpgym._targets.installed`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

import anyio

from mcpgym._targets.installed import Installed, installed
from mcpgym._targets.names import ENTRY_POINT_GROUP

NAME = "envs"

_EPILOG = f"""\
A name listed here is a target: `mcpgym serve blackjack --http`, `mcpgym.connect("blackjack")`.
Packages add theirs with an entry point in the group "{ENTRY_POINT_GROUP}" (docs/catalog.md):
  [project.entry-points."{ENTRY_POINT_GROUP}"]
  my-env = "my_env:MyEnv"
"""


def register(sub: Any) -> None:
    envs = sub.add_parser(
        NAME,
        help="list the installed environments (short names, tools, tasks, what is missing)",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    envs.add_argument("--json", action="store_true", help="print a JSON list, one object per environment")


def dispatch(args: argparse.Namespace) -> None:
    found = anyio.run(installed)
    if args.json:
        print(json.dumps([dataclasses.asdict(e) for e in found], indent=2))
        return
    for entry in found:
        print(render(entry))


def render(entry: Installed) -> str:
    head = f"{entry.name}  ({entry.target}; {entry.source})"
    if entry.error is not None:
        command = f"pip install '{entry.source}[{entry.missing_extra}]'" if entry.missing_extra else None
        # Most errors of a missing extra already name the command (mcpgym._core.extras): once is enough.
        fix = f" Install: {command}." if command is not None and command not in entry.error else ""
        return f"{head}\n    cannot load: {entry.error.rstrip('.')}.{fix}"
    tasks = f"{entry.tasks} tasks" if entry.tasks else "no task catalog"
    return f"{head}\n    {entry.description}\n    tools: {', '.join(entry.tools)}; {tasks}"
