"""`mcpgym check ENV`: validate an Environment class and report what is wrong.

Layer: CLI, over `check_environment`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mcpgym._cli.serve import load
from mcpgym._episode.check import check_environment

NAME = "check"


def register(sub: Any) -> None:
    check = sub.add_parser("check", help="validate an Environment class and report what is wrong")
    check.add_argument("env", metavar="ENV", help="mcpgym.servers.echo:Echo, mcpgym.servers.echo, or path/to/env.py")


def dispatch(args: argparse.Namespace) -> None:
    problems = check_environment(load(args.env), raise_on_error=False)
    for problem in problems:
        print(f"- {problem}")
    print(f"{args.env}: {'OK' if not problems else f'{len(problems)} problem(s)'}")
    sys.exit(1 if problems else 0)
