"""The throwaway venv holding the real `openenv` package, for the OpenEnv bridge tests.

OpenEnv runs on the MCP SDK 1.x and mcpgym on 2.x, so the two never share an interpreter: the
tests run OpenEnv's own clients (and OpenEnv servers) as subprocesses of `tests/openenv/.venv`,
built from `tests/openenv/requirements.txt` (every package pinned). It is made once and rebuilt
when that file changes; `python tests/openenv_venv.py` (scripts/setup.sh --test) makes it ahead.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "openenv"
REQUIREMENTS = HERE / "requirements.txt"
VENV = HERE / ".venv"


def openenv_python() -> Path:
    """The venv's interpreter, building the venv first when it is missing or out of date."""
    python = VENV / "bin" / "python"
    stamp = VENV / "requirements.sha256"
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    HERE.mkdir(exist_ok=True)
    with open(HERE / ".venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test runs at once build it once
        if python.exists() and stamp.exists() and stamp.read_text() == digest:
            return python
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True)
        stamp.write_text(digest)
    return python


if __name__ == "__main__":
    print(openenv_python())
