"""A fresh venv for install tests: its own packages, the suite's dependencies borrowed (no downloads)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def borrowing_venv(where: Path) -> Path:
    """A new venv that installs packages of its own but borrows the suite's dependencies; its python.

    A path line in a .pth file adds the suite's site-packages without running its .pth files, so
    the mcpgym found there is the one the test installs, not the suite's editable checkout.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    borrowed = [p for p in sys.path if p.endswith("site-packages")]  # this venv's, and any it borrows itself
    Path(purelib(python), "zz_borrowed.pth").write_text("".join(f"{p}\n" for p in borrowed))
    return python


def purelib(python: Path) -> Path:
    """The site-packages directory `python` installs into."""
    argv: list[str | Path] = [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    return Path(subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip())
