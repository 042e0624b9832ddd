"""One name, one thing: no public name means two different objects across the API's namespaces,
no module is called env/environment for something other than an environment, and the old names
of renamed types still import for one release, with a warning (docs/concepts.md, "Names")."""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import pytest

import mcpgym
from mcpgym import harness

SOURCE = Path(mcpgym.__file__).resolve().parent


def _declares_all(path: Path) -> bool:
    return any(
        isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        for node in ast.parse(path.read_text(), str(path)).body
    )


def _api() -> list[str]:
    """The framework's public namespaces: every public package and every public module that
    states its names in `__all__`. The shipped servers (`mcpgym.servers.*`) are applications
    built on the framework, each with its own names (test_layers.py keeps them apart)."""
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        parts = path.relative_to(SOURCE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        elif not _declares_all(path):
            continue
        if any(part.startswith("_") for part in parts) or parts[:1] == ("servers",):
            continue
        found.append(".".join(("mcpgym", *parts)))
    return found


API = _api()


def test_the_namespaces_checked_are_the_api() -> None:
    assert {"mcpgym", "mcpgym.harness", "mcpgym.pool", "mcpgym.rubrics", "mcpgym.testing"} <= set(API)
    assert {"mcpgym.trl", "mcpgym.web", "mcpgym.wrapping"} <= set(API)
    assert not any(name.startswith("mcpgym.servers") or "._" in name for name in API)


def test_no_public_name_means_two_different_objects() -> None:
    bound: dict[str, dict[int, list[str]]] = {}
    for name in API:
        module = importlib.import_module(name)
        for public in module.__all__:
            obj = getattr(module, public)
            bound.setdefault(public, {}).setdefault(id(obj), []).append(name)
    assert len(bound) > 100  # the premise: every namespace was read
    assert {public: list(objects.values()) for public, objects in bound.items() if len(objects) > 1} == {}


def _defines_an_environment(path: Path) -> bool:
    """Whether the module defines `Environment` or a subclass of it (by its class statements:
    no import needed to tell)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ClassDef):
            if node.name == "Environment":
                return True
            for base in node.bases:
                if (isinstance(base, ast.Attribute) and base.attr == "Environment") or (
                    isinstance(base, ast.Name) and base.id == "Environment"
                ):
                    return True
    return False


def test_no_module_is_called_env_unless_it_holds_an_environment() -> None:
    """Five modules were once named env/environment for five different things (the client API,
    the MCP door, the pool's router, TRL's tool class, a wrapped server's proxy). Now no module is
    named just `env`, and one named `environment` holds an `Environment`: `mcpgym._episode.environment`
    the base class, a shipped server's `_environment` its subclass."""
    modules = sorted(SOURCE.rglob("*.py"))
    assert SOURCE / "_episode" / "environment.py" in modules and len(modules) > 50
    vague = {"env", "envs", "mcp_env", "environment", "environments"}
    offenders = [
        str(p.relative_to(SOURCE))
        for p in modules
        if p.stem.lstrip("_") in vague and not (p.stem.lstrip("_") == "environment" and _defines_an_environment(p))
    ]
    assert offenders == []
    assert _defines_an_environment(SOURCE / "_episode" / "environment.py")
    assert not _defines_an_environment(SOURCE / "_client" / "api.py")  # the check can say no


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("mcpgym", "Trajectory", "Recording"),
        ("mcpgym", "read_trajectories", "read_recordings"),
        ("mcpgym.harness", "ToolSpec", "ChatTool"),
        ("mcpgym.harness", "Step", "CallOutcome"),
        ("mcpgym.harness.types", "ToolSpec", "ChatTool"),
        ("mcpgym.harness.types", "Step", "CallOutcome"),
    ],
)
def test_an_old_name_warns_and_is_the_new_object(module: str, old: str, new: str) -> None:
    namespace = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is deprecated.*use {module}\.{new}\b"):
        value = getattr(namespace, old)
    assert value is getattr(namespace, new)
    assert old not in dir(namespace) and old not in getattr(namespace, "__all__", ())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(f"from {module} import {old}", {})  # the import statement warns too, once
    assert [(w.category, old in str(w.message)) for w in caught] == [(DeprecationWarning, True)]


def test_the_warning_points_at_the_callers_line() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mcpgym.read_trajectories  # noqa: B018
    (warning,) = caught
    assert warning.filename == __file__


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Trajectories'"):
        mcpgym.Trajectories  # type: ignore[attr-defined]  # noqa: B018
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not hasattr(harness, "Trajectories")


def test_the_recording_and_the_rollout_episode_have_names_that_differ() -> None:
    assert mcpgym.Recording.__name__ != harness.Trajectory.__name__
    assert "Trajectory" not in mcpgym.__all__ and "Trajectory" in harness.__all__
