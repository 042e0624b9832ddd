"""The `mcpgym` command and the working directory (issue #23 item 7): only commands that load a
user's target find modules there, after every installed one, so a file in it never shadows what
the CLI imports (run inside a downloaded runs folder, an `h11.py` there ran during `mcpgym view`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The console script's start (`-P`: nothing prepended, as for an installed `mcpgym`); the command's
# dispatch is replaced by one that imports what the real one would import lazily.
SCRIPT = """
import sys
from mcpgym._cli import main, {command}
{command}.dispatch = lambda args: print(__import__("h11").__name__, __import__({module!r}).__name__)
main.main({argv!r})
"""


def run(tmp_path: Path, command: str, argv: list[str], module: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "h11.py").write_text("open('shadowed', 'w').close()\n")  # planted: must never run
    (tmp_path / "mine.py").write_text("")  # the user's own module
    script = SCRIPT.format(command=command, argv=argv, module=module)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and p != os.getcwd())}
    return subprocess.run(
        [sys.executable, "-P", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )


def test_view_finds_nothing_in_the_working_directory(tmp_path: Path) -> None:
    done = run(tmp_path, "view", ["view", str(tmp_path)], "json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["h11", "json"] and not (tmp_path / "shadowed").exists()


def test_a_target_in_the_working_directory_loads_after_every_installed_module(tmp_path: Path) -> None:
    done = run(tmp_path, "tools", ["tools", "mine:Env"], "mine")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["h11", "mine"]  # the user's module found; the installed h11 imported
    assert not (tmp_path / "shadowed").exists()
