"""Short names: `blackjack` for `mcpgym.servers.blackjack:Blackjack`, and the names installed
packages register (docs/catalog.md, rfcs/0020-catalog-evaluation-curriculum.md).

Layer: client facade, beside the target grammar (`target.py` asks `lookup` before its module
forms). Reads installed metadata only; imports nothing it names until asked to load it.

A package registers an environment with an entry point in the group `ENTRY_POINT_GROUP`:

    [project.entry-points."mcpgym.environments"]
    guess-number = "guess_number:GuessNumber"

The shipped environments are registered here, in `SHIPPED` (the checkout's editable install
and the wheel then agree without reinstalling). A name is lowercase letters, digits, `-` and
`_` (`NAME`), never dotted, so it can never be mistaken for a module path. One name claimed by
two registrations is ambiguous, and so is a name that is also an importable module other than
the one it names: both are a `TargetError` saying which forms to write instead. A name that is
also a command on PATH (`echo` always is) means the environment: a command is always reachable
by its path.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from importlib.metadata import Distribution, EntryPoint, entry_points

ENTRY_POINT_GROUP = "mcpgym.environments"
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass(frozen=True)
class Registration:
    """One short name: what it loads (`spec`: `module:Class` or `module`), who registered it
    (`source`: a distribution name; "mcpgym" for the shipped ones) and, for a shipped
    environment with dependencies of its own, the extra that installs them."""

    name: str
    spec: str
    source: str
    extra: str | None = None

    @property
    def module(self) -> str:
        return self.spec.partition(":")[0]


SHIPPED: tuple[Registration, ...] = (
    Registration("echo", "mcpgym.servers.echo:Echo", "mcpgym"),
    Registration("blackjack", "mcpgym.servers.blackjack:Blackjack", "mcpgym"),
    Registration("coding", "mcpgym.servers.coding:Coding", "mcpgym", extra="coding"),
    Registration("maze", "mcpgym.servers.maze:Maze", "mcpgym"),
    Registration("reasoning", "mcpgym.servers.reasoning:Reasoning", "mcpgym", extra="reasoning"),
)


class AmbiguousName(LookupError):
    """A short name with more than one meaning; the message lists them."""


def registrations() -> list[Registration]:
    """Every registered name, shipped first, then installed packages' in name order (a name
    registered twice appears twice: `lookup` refuses it)."""
    found = list(SHIPPED)
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        if NAME.match(point.name) and (point.dist is None or point.dist.name != "mcpgym"):
            found.append(Registration(point.name, point.value, _source(point), extra=None))
    return found


def lookup(name: str) -> Registration | None:
    """The registration `name` means, None if it is not a registered name; `AmbiguousName` when
    two packages claim it or it is also an importable module that is not the one it names."""
    if not NAME.match(name):
        return None
    claims = [r for r in registrations() if r.name == name]
    if not claims:
        return None
    if len({r.spec for r in claims}) > 1:
        listed = "; ".join(f"{r.spec} (from {r.source})" for r in claims)
        raise AmbiguousName(f"{name!r} is registered more than once: {listed}. Name one of them by MODULE:CLASS.")
    (claim, *_) = claims
    if _other_module(name, claim):
        raise AmbiguousName(
            f"{name!r} is ambiguous: a registered environment ({claim.spec}) and an importable module. "
            f"Write {claim.spec} for the registered one, or {name}:CLASS for the module."
        )
    return claim


def _other_module(name: str, claim: Registration) -> bool:
    if not name.isidentifier() or claim.module == name or claim.module.startswith(name + "."):
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _source(point: EntryPoint) -> str:
    dist: Distribution | None = point.dist
    return dist.name if dist is not None else "unknown distribution"
