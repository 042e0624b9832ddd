"""The bridges' examples and packaging (#26): every example the Bridges page shows is a file in
examples/ that a test runs, and a bridge used without its extra says which extra to install."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import mcpgym

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
PAGE = REPO / "docs" / "bridges.md"


def run(*argv: str) -> str:
    done = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_gym_target_example_replays_gymnasium_in_process_and_over_http() -> None:
    out = run(str(EXAMPLES / "gymnasium_target.py"))
    assert "0: Move left, 1: Move down" in out and "(15, 1.0, True, False)" in out
    assert "the same trajectory as Gymnasium's own: True" in out
    with mcpgym.ServerProcess('python -m mcpgym serve "gym:FrozenLake-v1?is_slippery=false" --http --port 0') as server:
        out = run(str(EXAMPLES / "gymnasium_target.py"), "--target", server.url)
    assert "the same trajectory as Gymnasium's own: True" in out


def test_the_textarena_example_plays_one_match_with_two_mcp_clients_over_http() -> None:
    out = run(str(EXAMPLES / "textarena_match.py"))  # it serves textarena:TicTacToe-v0 itself
    assert out.strip().endswith("rewards: {0: 1.0, 1: -1.0}")
    assert "player 0: The game is over. Player 0 has won!" in out and "My reward: -1.0" in out


def test_every_example_the_bridges_page_shows_is_a_file_a_test_runs() -> None:
    shown = re.findall(r'--8<-- "examples/([\w.]+?)(?::\w+)?"', PAGE.read_text())
    assert {"openenv_readme.py", "gymnasium_target.py", "gymnasium_loop.py", "textarena_match.py"} <= set(shown)
    tests = "".join(path.read_text() for path in (REPO / "tests").glob("test_*.py"))
    for name in shown:
        assert (EXAMPLES / name).is_file(), name
        assert f'"{name}"' in tests or f'"{name.removesuffix(".py")}"' in tests, f"no test runs examples/{name}"


def test_the_extras_the_messages_name_exist() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"openenv", "gymnasium", "textarena"} <= extras.keys()


def _without(module: str, code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter where `module` cannot be imported (as if not installed)."""
    prelude = f"import sys; sys.modules[{module!r}] = None\n"
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=REPO, capture_output=True, text=True, timeout=120)


def _cli(*argv: str) -> str:
    return f"from mcpgym._cli.main import main\nmain({list(argv)!r})\n"


@pytest.mark.parametrize(
    ("module", "target", "extra"),
    [("gymnasium", "gym:FrozenLake-v1", "gymnasium"), ("textarena", "textarena:TicTacToe-v0", "textarena")],
)
def test_a_bridge_target_without_its_extra_names_the_extra(module: str, target: str, extra: str) -> None:
    done = _without(module, _cli("check", target))
    assert done.returncode != 0 and f"pip install 'mcpgym[{extra}]'" in done.stdout + done.stderr, done.stderr


def test_openenv_without_its_extra_names_the_extra_on_both_sides() -> None:
    served = _without("websockets", _cli("serve", "mcpgym.servers.echo", "--http", "--port", "0", "--openenv"))
    assert served.returncode != 0 and "pip install 'mcpgym[openenv]'" in served.stderr, served.stderr
    # The import side: a real OpenEnv API (ours, served with the extra) read by a client without it.
    argv = [sys.executable, "-m", "mcpgym.servers.echo", "--http", "--port", "0", "--openenv"]
    with mcpgym.ServerProcess(argv) as server:
        imported = _without("websockets", _cli("check", "openenv:" + server.url.removesuffix("/mcp")))
    assert imported.returncode != 0 and "pip install 'mcpgym[openenv]'" in imported.stderr, imported.stderr
