"""Clean packaging: the wheel installs only the `mcpgym` namespace and every shipped server runs from
it; a checkout's `servers` and `harness` are aliases of the very same modules (rfcs/0013-authoring.md)."""

from __future__ import annotations

import importlib
import json
import os
import shlex
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.venvs import borrowing_venv, purelib

REPO = Path(__file__).resolve().parent.parent
# Each shipped server and one tool it must list: running it is the proof that it imports and serves.
SERVERS = {"blackjack": "hit", "coding": "submit", "echo": "echo_message", "maze": "move", "reasoning": "answer"}


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of the checkout on the path


@pytest.mark.timeout(300)
def test_the_wheel_installs_only_mcpgym_and_runs_every_shipped_server(tmp_path: Path) -> None:
    wheels, outside = tmp_path / "wheels", tmp_path / "elsewhere"
    outside.mkdir()
    build: list[str | Path] = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        wheels,
        REPO,
    ]
    subprocess.run(build, check=True, env=_clean_env(), capture_output=True)
    (wheel,) = wheels.glob("mcpgym-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    assert tops == {"mcpgym", wheel.name.split("-py")[0] + ".dist-info"}, tops

    python = borrowing_venv(tmp_path / "venv")
    bin_ = python.parent
    install: list[str | Path] = [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", wheel]
    subprocess.run(install, check=True, env=_clean_env(), capture_output=True)
    site = purelib(python)
    assert (site / "mcpgym").is_dir() and not {"servers", "harness"} & {p.name for p in site.iterdir()}

    def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(a) for a in argv], cwd=outside, env=_clean_env(), capture_output=True, text=True)

    found = run(python, "-c", "import importlib.util as u, mcpgym; print(mcpgym.__file__, u.find_spec('servers'))")
    where, servers = found.stdout.split()
    assert where.startswith(str(site)) and servers == "None", found  # the installed copy; no `servers` at all

    def serve(name: str) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
        # `python -m mcpgym.servers.NAME` parses its flags; the `mcpgym-NAME` script serves over stdio.
        return run(python, "-m", f"mcpgym.servers.{name}", "--help"), run(
            bin_ / "mcpgym", "tools", bin_ / f"mcpgym-{name}"
        )

    with ThreadPoolExecutor(len(SERVERS)) as pool:  # each is a process of its own: overlap their start-up
        ran = dict(zip(SERVERS, pool.map(serve, SERVERS), strict=True))
    for name, (helped, listed) in ran.items():
        assert helped.returncode == 0 and helped.stdout.startswith("usage:"), (name, helped.stderr)
        assert listed.returncode == 0 and f"{SERVERS[name]}(" in listed.stdout, (name, listed.stderr)

    # `mcpgym harness config` writes a launch command the installed form has, with no PYTHONPATH...
    written = run(bin_ / "mcpgym", "harness", "config", "claude-code", "mcpgym.servers.echo")
    assert written.returncode == 0, written.stderr
    entry = json.loads(written.stdout)["mcpServers"]["echo"]
    assert (entry["command"], entry["args"], entry["env"]) == (str(python), ["-m", "mcpgym.servers.echo"], {})
    # ...and that command serves a real tool call.
    command = shlex.join([entry["command"], *entry["args"]])
    called = run(bin_ / "mcpgym", "call", command, "echo_message", json.dumps({"message": "hi"}))
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["content"] == [{"type": "text", "text": "hi"}]
    rollout = run(bin_ / "mcpgym", "rollout", "--help")  # the harness's commands, from its installed entry point
    assert rollout.returncode == 0 and "unavailable" not in rollout.stderr, rollout.stderr


def test_a_checkouts_launchers_forward_to_the_real_modules_and_alias_nothing() -> None:
    """One module under two names would mean two sets of state and classes failing isinstance:
    the launchers are modules of their own that look attributes up on the real ones (rfcs/0016)."""
    import mcpgym.harness
    import mcpgym.servers.echo

    # By name: mypy sees the real packages only.
    harness, echo = map(importlib.import_module, ("harness", "servers.echo"))
    assert harness is not mcpgym.harness and harness.rollout is mcpgym.harness.rollout
    assert echo.Echo is mcpgym.servers.echo.Echo and isinstance(echo.Echo(), mcpgym.servers.echo.Echo)
    assert mcpgym.servers.echo.__spec__ is not None and mcpgym.servers.echo.__spec__.name == "mcpgym.servers.echo"
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("harness.config")  # submodules have their real names only


def test_a_checkout_runs_python_m_servers_from_its_root() -> None:
    """The short form from a clone's root: the launcher runs the real server's main, once."""
    env = {**_clean_env(), "PYTHONPATH": str(REPO / "src")}
    helped = subprocess.run(
        [sys.executable, "-m", "servers.maze", "--help"], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert helped.returncode == 0 and helped.stdout.startswith("usage: python -m mcpgym.servers.maze"), helped.stderr
    assert helped.stdout.count("usage:") == 1
