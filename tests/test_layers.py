"""Layers import one way: the core (src/mcpgym) never imports what is built on it; the harness's
subcommands reach `mcpgym` through the `mcpgym.commands` entry point group instead. Inside the
core, the server side never imports the client side and the client side never imports the server
side (rfcs/0016-layout.md); a checkout's `servers/` and `harness/` are launchers, not import hooks."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, ClassVar

import pytest

from mcpgym._cli import main as _cli
from mcpgym._cli import plugins as _commands

REPO = Path(__file__).resolve().parent.parent
CORE = REPO / "src" / "mcpgym"
ABOVE_THE_CORE = ("harness", "servers", "tests", "benchmarks", "examples")
# Shipped in the wheel beside the core, but built on it: the core must not import them either.
APPLICATIONS = ("mcpgym.harness", "mcpgym.servers")


def _imports(path: Path) -> set[str]:
    """Every absolute module name `path` imports (`from mcpgym import harness` counts as mcpgym.harness)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


def _above(name: str, layers: tuple[str, ...]) -> bool:
    return any(name == layer or name.startswith(layer + ".") for layer in layers)


def test_the_core_imports_nothing_built_on_it() -> None:
    applications = [CORE / name.partition(".")[2] for name in APPLICATIONS]
    modules = sorted(m for m in CORE.rglob("*.py") if not any(m.is_relative_to(a) for a in applications))
    assert len(modules) > 20 and all(a.is_dir() for a in applications)
    offenders = {
        str(m.relative_to(REPO)): {n for n in _imports(m) if _above(n, ABOVE_THE_CORE + APPLICATIONS)} for m in modules
    }
    assert {m: names for m, names in offenders.items() if names} == {}


def test_the_installed_package_never_imports_the_checkouts_short_names() -> None:
    """The wheel has no top-level `servers` or `harness`: code under src/mcpgym importing them
    would work in a checkout and fail once installed (test_packaging runs the installed form)."""
    offenders = {
        str(m.relative_to(REPO)): {n for n in _imports(m) if _above(n, ("servers", "harness"))}
        for m in CORE.rglob("*.py")
    }
    assert {m: names for m, names in offenders.items() if names} == {}


def test_building_the_cli_without_plugins_imports_no_harness() -> None:
    code = (
        "import sys, mcpgym._cli.plugins as c; c.plugins = lambda: (); import mcpgym._cli.main as m; m._parser(); "
        "print(sorted(n for n in sys.modules if n.split('.')[0] in ('harness', 'servers') "
        "or n.startswith(('mcpgym.harness', 'mcpgym.servers'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


class Hello:
    """A plugin as another package would ship it."""

    COMMANDS = ("hello",)
    ran: ClassVar[list[str]] = []

    @staticmethod
    def register(sub: Any) -> None:
        sub.add_parser("hello", help="say hello").add_argument("who")

    @staticmethod
    def dispatch(args: argparse.Namespace) -> None:
        Hello.ran.append(args.who)


def _entry_points(*points: EntryPoint) -> Any:
    def select(*, group: str) -> list[EntryPoint]:
        return [p for p in points if p.group == group]

    return select


def test_a_plugin_adds_and_runs_its_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    points = (
        EntryPoint("hello", f"{__name__}:Hello", _commands.GROUP),
        EntryPoint("broken", "no_such_package.cli", _commands.GROUP),
    )
    monkeypatch.setattr(_commands, "entry_points", _entry_points(*points))
    _commands.plugins.cache_clear()
    try:
        _cli.main(["hello", "world"])
        assert Hello.ran == ["world"]
        assert "commands from no_such_package.cli unavailable" in capsys.readouterr().err  # said, not fatal
        with pytest.raises(SystemExit):
            _cli.main(["rollout", "x", "--model", "m", "--base-url", "u"])  # only installed plugins add commands
    finally:
        _commands.plugins.cache_clear()


def test_pyproject_registers_the_harness_commands() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"][_commands.GROUP]
    (name, value), *others = declared.items()
    assert others == [] and name == "harness"
    plugin = EntryPoint(name, value, _commands.GROUP).load()
    parser = argparse.ArgumentParser()
    plugin.register(parser.add_subparsers(dest="command"))
    assert set(plugin.COMMANDS) == {"rollout", "harness", "eval"}
    assert parser.parse_args(["rollout", "t", "--model", "m", "--base-url", "u"]).command == "rollout"


SIDES = {
    # package: what it must never import
    "_core": (
        "mcpgym._episode",
        "mcpgym._recording",
        "mcpgym._server",
        "mcpgym._client",
        "mcpgym._targets",
        "mcpgym._cli",
    ),
    "_episode": ("mcpgym._server", "mcpgym._client", "mcpgym._targets", "mcpgym._cli"),
    "_recording": ("mcpgym._server", "mcpgym._client", "mcpgym._targets", "mcpgym._cli"),
    "_server": ("mcpgym._client", "mcpgym._targets", "mcpgym._cli"),
    "_client": ("mcpgym._server", "mcpgym._cli"),
}


@pytest.mark.parametrize("side", sorted(SIDES))
def test_each_side_imports_only_what_is_below_it(side: str) -> None:
    modules = sorted((CORE / side).rglob("*.py"))
    assert len(modules) > 2  # the premise: the side's folder exists and holds its modules
    offenders = {str(m.relative_to(REPO)): {n for n in _imports(m) if _above(n, SIDES[side])} for m in modules}
    assert {m: names for m, names in offenders.items() if names} == {}


def test_the_core_has_no_flat_private_modules_left() -> None:
    """Every private module sits in the folder of its side; only the package's own files are flat."""
    flat = sorted(p.name for p in CORE.glob("*.py"))
    assert flat == ["__init__.py", "__main__.py", "wrapping.py"]


def test_a_checkouts_launchers_install_no_import_hook() -> None:
    code = (
        "import sys, importlib\n"
        "before = list(sys.meta_path)\n"
        "import servers.echo, harness, mcpgym.servers.echo, mcpgym.harness\n"
        "assert sys.meta_path == before, sys.meta_path\n"
        "assert servers.echo.Echo is mcpgym.servers.echo.Echo and harness.rollout is mcpgym.harness.rollout\n"
        "assert sys.modules['servers.echo'] is not sys.modules['mcpgym.servers.echo']  # a launcher, no alias\n"
        "from mcpgym import load_environment\n"
        "assert load_environment('servers.echo') is mcpgym.servers.echo.Echo\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


def test_python_dash_m_servers_runs_from_a_checkout_and_names_the_real_package_elsewhere(tmp_path: Path) -> None:
    here = subprocess.run([sys.executable, "-m", "servers.echo", "--help"], cwd=REPO, capture_output=True, text=True)
    assert here.returncode == 0 and "Serve the Echo environment" in here.stdout, here.stderr
    elsewhere = subprocess.run(
        [sys.executable, "-m", "mcpgym", "check", "servers.echo"], cwd=tmp_path, capture_output=True, text=True
    )
    assert elsewhere.returncode != 0 and "mcpgym.servers.echo" in elsewhere.stderr


def test_the_editable_install_puts_only_src_on_the_path() -> None:
    wheel = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["dev-mode-dirs"] == ["src"]
    code = "import importlib.util as u; print(u.find_spec('tests'), u.find_spec('benchmarks'))"
    done = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "None None"


def test_import_mcpgym_loads_only_the_authors_side() -> None:
    """`import mcpgym` is what every environment module does: it must not pay for the client's
    HTTP stack, run specs, the CLI, the wrap proxy or the judge until one of their names is used."""
    code = (
        "import sys, mcpgym\n"
        "heavy = ('aiohttp', 'yaml', 'mcpgym._client', 'mcpgym._cli', 'mcpgym._wrap', 'mcpgym._server',"
        " 'mcpgym._targets', 'mcpgym.rubrics._judge', 'mcpgym.web')\n"
        "print(sorted(n for n in sys.modules if n.startswith(heavy)))\n"
        "mcpgym.connect, mcpgym.SharedClient  # the lazy names resolve, and then are bound\n"
        "assert 'connect' in vars(mcpgym) and 'mcpgym._client.shared' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("module", ["door.py", "inprocess.py"])
def test_the_door_contract_and_the_in_process_door_reach_only_the_core(module: str) -> None:
    """rfcs/0019: the `Door` contract and the in-process door import nothing of mcpgym but the
    protocol-free core and the episode core (no transport, no other door)."""
    names = {n for n in _imports(CORE / "_client" / module) if n.split(".")[0] == "mcpgym"}
    assert names and all(_above(n, ("mcpgym._core", "mcpgym._episode")) for n in names), names
