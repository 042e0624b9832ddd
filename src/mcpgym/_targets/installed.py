"""What `mcpgym envs` lists: every registered environment, loaded and described.

Layer: client facade, over `names.py` and the target grammar. Loading an environment imports
it and builds one instance to read its task catalog (then closes it), as a server does; one that
cannot load is still listed, with the reason and, when a missing dependency is one an extra
installs, that extra.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, distribution

import anyio

from mcpgym._episode.environment import Environment
from mcpgym._episode.episode import _run_user
from mcpgym._targets.names import Registration, registrations
from mcpgym._targets.target import load_environment

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)[^;]*;.*extra\s*==\s*['\"]([^'\"]+)['\"]")


@dataclass(frozen=True)
class Installed:
    """One registered environment as `mcpgym envs` shows it (`--json` writes these fields)."""

    name: str
    target: str
    source: str
    description: str = ""
    tools: list[str] = field(default_factory=list)
    tasks: int | None = None
    """How many tasks its catalog lists (0: none; None: it did not load)."""
    missing_extra: str | None = None
    """`pip install 'DIST[EXTRA]'` installs what it lacks."""
    error: str | None = None


async def installed() -> list[Installed]:
    """Every registered environment, described (a name registered twice is listed twice)."""
    return [await describe(r) for r in registrations()]


async def describe(registration: Registration) -> Installed:
    base = Installed(registration.name, registration.spec, registration.source)
    try:
        cls = load_environment(registration.spec)
        tasks = await _count_tasks(cls)
    except ImportError as exc:
        extra = registration.extra or _extra_for(registration.source, exc.name)
        return _failed(base, f"{type(exc).__name__}: {exc}", extra)
    except Exception as exc:  # listed with its reason: one broken package must not hide the others
        return _failed(base, f"{type(exc).__name__}: {exc}", registration.extra if _looks_missing(exc) else None)
    return Installed(
        registration.name,
        registration.spec,
        registration.source,
        description=summary(cls),
        tools=list(cls.__mcpgym_tools__),
        tasks=tasks,
    )


def summary(cls: type[Environment]) -> str:
    """The first paragraph of the class docstring, on one line."""
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n")[0].split())


async def _count_tasks(cls: type[Environment]) -> int:
    env = cls()
    try:
        return len(list(await anyio.to_thread.run_sync(env.catalog)))
    finally:
        await _run_user(env.close)


def _failed(base: Installed, error: str, extra: str | None) -> Installed:
    return Installed(base.name, base.target, base.source, missing_extra=extra, error=error)


def _looks_missing(exc: Exception) -> bool:
    """A shipped environment whose extra is absent may fail later than import (HumanEval's data
    is read when the tasks load): a missing module anywhere in the chain counts."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ImportError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _extra_for(source: str, module: str | None) -> str | None:
    """The extra of `source` whose requirements include the missing `module` (by normalised name)."""
    if module is None:
        return None
    try:
        requires = distribution(source).requires or []
    except PackageNotFoundError:
        return None
    wanted = _normalise(module.split(".")[0])
    for line in requires:
        match = _REQUIREMENT.match(line)
        if match and _normalise(match.group(1)) == wanted:
            return match.group(2)
    return None


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()
