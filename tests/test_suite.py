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


ROOT = TESTS.parent


def _find_python(version: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = (ROOT / "scripts" / "setup.sh").read_text()
    function = script[script.index("find_python() {") : script.index("\n}\n", script.index("find_python() {")) + 3]
    return subprocess.run(
        ["bash", "-c", f'{function}\nfind_python "$0"', version], env=env, capture_output=True, text=True, timeout=30
    )


def test_setup_finds_each_supported_python_or_says_what_is_missing(tmp_path: Path) -> None:
    pyenv = tmp_path / "pyenv"
    for patch in ("3.13.0", "3.13.10", "3.13.2"):
        binary = pyenv / "versions" / patch / "bin" / "python3.13"
        binary.parent.mkdir(parents=True)
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYENV_ROOT": str(pyenv)}
    found = _find_python("3.13", env)
    assert found.returncode == 0 and found.stdout.strip().endswith("versions/3.13.10/bin/python3.13"), found
    missing = _find_python("3.99", env)
    assert missing.returncode != 0 and "Python 3.99 not found" in missing.stderr and "PYTHON_3_99" in missing.stderr


def test_ci_runs_the_oldest_and_the_newest_supported_python() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    versions = sorted({line.split("::")[-1].strip(' ",') for line in pyproject.splitlines() if "Python :: 3." in line})
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert f"OLDEST={versions[0]}" in setup and f"NEWEST={versions[-1]}" in setup
    assert f'requires-python = ">={versions[0]}"' in pyproject
    test_sh = (ROOT / "scripts" / "test.sh").read_text()
    assert ".venv/bin/python -m pytest" in test_sh and f".venv-{versions[-1]}/bin/python -m pytest" in test_sh
