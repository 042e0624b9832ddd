"""The suite itself: a missing extra fails it loudly instead of silently dropping its tests."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_test_module_skips_itself_when_a_dependency_is_missing() -> None:
    # A module-level importorskip turned a missing `mcpgym[trl]` into 13% of the suite skipped.
    offenders = []
    for path in sorted(set(TESTS.glob("test_*.py")) - {Path(__file__).resolve()}):
        for node in ast.parse(path.read_text()).body:
            if "importorskip" in ast.unparse(node) or "allow_module_level" in ast.unparse(node):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


def test_a_missing_extra_is_a_collection_error(tmp_path: Path) -> None:
    # Hide trl and transformers (ModuleNotFoundError, as on a machine without the extra).
    for name in ("trl", "transformers"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError('{name} hidden by tests/test_suite.py', name='{name}')\n"
        )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests/test_trl.py"],
        cwd=TESTS.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stdout[-2000:]  # "interrupted: errors during collection", not 0 or 5 (skipped)
    assert "hidden by tests/test_suite.py" in out.stdout
