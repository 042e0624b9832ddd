"""`python -m mcpgym.servers.reasoning [--dataset NAME[:WEIGHT],...] [--size N] [--seed S] [--http ...]`."""

from __future__ import annotations

import argparse
import functools
import sys

import mcpgym
from mcpgym.servers.reasoning import DEFAULT_MIX, Mix, Reasoning


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mcpgym.servers.reasoning",
        description="Serve procedurally generated reasoning tasks from reasoning-gym (graded by its own scorers) "
        "as an MCP server: stdio by default, --http for streamable HTTP.",
    )
    default = ",".join(name for name, _ in DEFAULT_MIX.weights)
    p.add_argument(
        "--dataset",
        default=default,
        metavar="NAME[:WEIGHT],...",
        help="reasoning-gym datasets to draw from, each with an optional weight (default: %(default)s)",
    )
    p.add_argument("--size", type=int, default=DEFAULT_MIX.size, help="entries per dataset (%(default)s)")
    p.add_argument("--seed", type=int, default=DEFAULT_MIX.seed, help="generation seed of the datasets (%(default)s)")
    p.add_argument("--partial-credit", action="store_true", help="reward the scorer's partial credit, not 0/1")
    p.add_argument(
        "--catalog-size", type=int, default=100, help="tasks per dataset listed as MCP prompts (%(default)s)"
    )
    return p


def configure(args: argparse.Namespace) -> functools.partial[Reasoning]:
    try:
        mix = Mix.parse(args.dataset, args.size, args.seed)
    except (ValueError, ImportError) as exc:
        raise SystemExit(f"mcpgym.servers.reasoning: {exc}") from None
    names = ", ".join(f"{name} (weight {weight:g})" for name, weight in mix.weights)
    print(f"mcpgym.servers.reasoning: {names}; {mix.size} entries each, seed {mix.seed}", file=sys.stderr)
    return functools.partial(Reasoning, mix=mix, partial_credit=args.partial_credit, catalog_size=args.catalog_size)


def main() -> None:
    mcpgym.run(Reasoning, parser=parser(), configure=configure)


if __name__ == "__main__":
    main()
