"""`mcpgym init`: names, refusing to overwrite, registry metadata, and the new author's whole path
(pip install this checkout -> init -> install -> the scaffold's own tests -> check -> serve -> Claude config)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import mcpgym
from mcpgym._cli.init import ScaffoldError, names, scaffold
from mcpgym._cli.main import main
from tests.venvs import borrowing_venv

REPO = Path(__file__).resolve().parent.parent


def test_names_follow_python_and_registry_conventions() -> None:
    assert names("guess-number") == {
        "dist": "guess-number",
        "package": "guess_number",
        "cls": "GuessNumber",
        "registry_name": "io.github.example/guess-number",
        "mcpgym_version": names("x")["mcpgym_version"],
    }
    assert names("Maze_v2", "io.github.me")["cls"] == "MazeV2"


@pytest.mark.parametrize("bad", ["", "9lives", "my env", "a--b", "../x", "json", "class", "mcpgym", "tests"])
def test_unusable_names_are_refused_before_anything_is_written(bad: str, tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError):
        scaffold(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_refuses_to_overwrite_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "maze"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "conftest.py").write_text("mine\n")
    with pytest.raises(SystemExit) as exc:
        main(["init", "maze", "--dir", str(root)])
    assert "refusing to overwrite" in str(exc.value.code) and "conftest.py" in str(exc.value.code)
    assert sorted(p.name for p in root.rglob("*")) == ["conftest.py", "tests"]  # nothing else written
    assert (root / "tests" / "conftest.py").read_text() == "mine\n"
    main(["init", "maze", "--dir", str(tmp_path / "fresh")])  # an empty place is fine: no error exit
    assert "pip install -e '.[test]' && pytest" in capsys.readouterr().out


def test_registry_metadata_matches_the_package(tmp_path: Path) -> None:
    scaffold("maze-runner", tmp_path, namespace="io.github.someone")
    server = json.loads((tmp_path / "server.json").read_text())
    project = tomllib.loads((tmp_path / "pyproject.toml").read_text())["project"]
    assert server["$schema"].startswith("https://static.modelcontextprotocol.io/schemas/")
    assert server["name"] == "io.github.someone/maze-runner"
    (package,) = server["packages"]
    assert (package["registryType"], package["identifier"], package["transport"]) == (
        "pypi",
        "maze-runner",
        {"type": "stdio"},
    )
    assert server["version"] == package["version"] == project["version"]
    # The registry proves ownership of a PyPI package by this marker in its README.
    assert f"mcp-name: {server['name']}" in (tmp_path / "README.md").read_text()
    assert project["scripts"] == {"maze-runner": "maze_runner.__main__:main"}
    assert mcpgym.load_spec(tmp_path / "mcpgym.yaml").environment == "maze_runner:MazeRunner"


@pytest.mark.trl  # the scaffold's own tests include the TRL schema round trip (the trl extra)
@pytest.mark.timeout(600)
def test_a_new_author_goes_from_nothing_to_a_served_tested_environment(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(*argv: str | Path, cwd: Path = tmp_path) -> str:
        done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    python = borrowing_venv(tmp_path / "venv")
    bin_ = python.parent
    pip = (python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation")
    run(*pip, REPO)  # pip install (this checkout)
    installed = run(python, "-c", "import mcpgym; print(mcpgym.__file__)")
    assert installed.startswith(str(tmp_path)), installed  # the installed copy, not the checkout on a path
    run(bin_ / "mcpgym", "init", "demo-env")
    project = tmp_path / "demo-env"
    run(*pip, project)
    tests = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", cwd=project)
    assert " passed" in tests and "skipped" not in tests and "failed" not in tests, tests
    assert "demo_env:DemoEnv: OK" in run(bin_ / "mcpgym", "check", "demo_env:DemoEnv")
    # Its entry point registers a short name: listed by `mcpgym envs`, and a target like any other.
    (listed,) = [e for e in json.loads(run(bin_ / "mcpgym", "envs", "--json")) if e["name"] == "demo-env"]
    assert (listed["target"], listed["source"], listed["tools"], listed["error"]) == (
        "demo_env:DemoEnv",
        "demo-env",
        ["guess"],
        None,
    )
    assert "demo-env: OK" in run(bin_ / "mcpgym", "check", "demo-env")

    serve = [str(bin_ / "mcpgym"), "serve", "mcpgym.yaml", "--port", "0"]  # its run spec says HTTP
    with subprocess.Popen(serve, cwd=project, env=env, stderr=subprocess.PIPE, text=True) as server:
        try:
            assert server.stderr is not None
            line = server.stderr.readline()  # "serving DemoEnv on http://127.0.0.1:PORT/mcp", or EOF if it died
            assert line.startswith("serving DemoEnv on http://127.0.0.1:"), line
            called = run(bin_ / "mcpgym", "call", line.split()[-1], "guess", '{"number": 50}', "--seed", "0")
            assert json.loads(called)["content"][0]["text"] in ("higher", "lower", "correct")
        finally:
            server.terminate()
            server.wait(timeout=30)

    config = json.loads(run(bin_ / "mcpgym", "harness", "config", "claude-code", "demo_env"))
    entry = config["mcpServers"]["demo_env"]
    assert (entry["type"], entry["command"], entry["args"]) == ("stdio", str(python), ["-m", "demo_env"])


def test_the_scaffold_is_lint_clean(tmp_path: Path) -> None:
    scaffold("lint-me", tmp_path)
    ruff = [sys.executable, "-m", "ruff"]
    rules = ["--isolated", "--line-length", "120"]
    for argv in (["check", *rules, "--select", "E,F,I,UP,B,RUF"], ["format", "--check", *rules]):
        done = subprocess.run([*ruff, *argv, "src", "tests"], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
