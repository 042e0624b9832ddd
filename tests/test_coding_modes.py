"""servers.coding without bubblewrap (issue #23): `auto` builds the private filesystem itself or
refuses to start, and the coding suite passes under each mode with bubblewrap hidden (a mount
namespace with /dev/null over its binary, as on a machine that never installed it)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcpgym.servers.coding._host import sandbox as _sandbox
from mcpgym.servers.coding._host.sandbox import REFUSAL, Limits, Sandbox

ROOT = Path(__file__).resolve().parent.parent
BWRAP = shutil.which("bwrap")
SUITE = [
    "tests/test_coding.py",
    "tests/test_coding_humaneval.py",
    "tests/test_coding_python.py",
    "tests/test_coding_grader.py",
    "tests/test_coding_hacks.py",
    "tests/test_coding_edges.py",
    "tests/test_coding_isolation.py",
    "tests/test_coding_cradle.py",
    "tests/test_coding_scratch.py",
    "tests/test_coding_integrity.py",
]


def without_bwrap(argv: list[str]) -> list[str]:
    """`argv` run where bubblewrap is not found (root: a private mount namespace over its binary)."""
    assert BWRAP is not None and os.geteuid() == 0, "these tests hide bubblewrap: they need it, and root"
    script = f'mount --bind /dev/null {BWRAP} && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *argv]


PROBE = """
import anyio
from mcpgym.servers.coding import Sandbox
from mcpgym.servers.coding._host.interpreter import Interpreter
from mcpgym.servers.coding._tasks import humaneval_path
from mcpgym.servers.coding._host.workspace import Workspace

async def main():
    sandbox = Sandbox(hidden_paths=(humaneval_path(),))
    print(sandbox.protections.isolation)
    print(sandbox.protections.filesystem)
    uid = sandbox.new_uid()
    workspace = Workspace(uid, 1 << 16)
    interpreter = Interpreter(sandbox, workspace.root, uid)
    paths = [str(humaneval_path()), {root!r}]
    code = f"import os\\nprint([os.path.exists(p) for p in {{paths!r}}], sorted(os.listdir('/')))"
    reply = await interpreter.run(code)
    print(reply.text, end="")
    await interpreter.close()
    await workspace.remove()
    sandbox.release_uid(uid)

anyio.run(main)
"""


def test_auto_without_bubblewrap_builds_the_private_filesystem_itself() -> None:
    done = subprocess.run(
        without_bwrap([sys.executable, "-c", PROBE.format(root=str(ROOT))]),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    isolation, filesystem, seen = done.stdout.splitlines()
    assert isolation == "unshare" and filesystem.startswith("restricted:"), done.stdout
    assert seen.startswith("[False, False] "), seen  # neither the hidden tests nor the checkout
    listed = set(ast.literal_eval(seen.split("] ", 1)[1]))
    assert listed <= {"bin", "dev", "etc", "lib", "lib64", "proc", "root", "sbin", "tmp", "usr", "workspace"}, seen


def test_auto_refuses_to_start_when_no_private_filesystem_can_be_had(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sandbox, "_probe", lambda isolation: None if isolation == "none" else "not here")
    _sandbox.detect.cache_clear()
    try:
        with pytest.raises(RuntimeError) as refused:
            Sandbox(Limits())
        assert "bubblewrap" in str(refused.value) and "--isolation none" in str(refused.value)
        assert str(refused.value).startswith(REFUSAL)
        assert Sandbox(Limits(), "none").protections.isolation == "none"  # the explicit flag still works
    finally:
        _sandbox.detect.cache_clear()


def test_the_server_refuses_with_the_message_at_start_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from mcpgym.servers.coding.__main__ import configure, parser

    task = '{"task_id": "t", "prompt": "def f():\\n", "test": "def check(c):\\n    pass\\n", "entry_point": "f"}'
    (tmp_path / "tasks.jsonl").write_text(task)
    monkeypatch.setattr(_sandbox, "_probe", lambda isolation: None if isolation == "none" else "not here")
    _sandbox.detect.cache_clear()
    try:
        with pytest.raises(SystemExit) as refused:
            configure(parser().parse_args(["--tasks", str(tmp_path / "tasks.jsonl"), "--timeout", "3"]))
        assert "servers.coding: no sandbox with a private filesystem" in str(refused.value)
    finally:
        _sandbox.detect.cache_clear()


# What `none` does not claim (no namespaces, no private filesystem): these test it, so they are left
# out of its run, each with the reason; every other test runs under every mode.
NOT_CLAIMED = {
    "none": {
        "test_coding.py::test_infinite_loop_times_out_and_the_whole_tree_is_killed": "no pid namespace reaps it",
        "test_coding_grader.py::test_no_trial_forked_ahead_outlives_its_grader": "no pid namespace reaps it",
        "test_coding_grader.py::test_a_submission_has_no_shared_writable_place_and_cannot_forge_a_verdict": (
            "the host's /tmp is writable"
        ),
        "test_coding_cradle.py::test_the_first_worker_is_forked_in_its_episodes_cgroup_by_a_thread_waiting_there": (
            "counts a launcher and a namespace init beside the worker"
        ),
        "test_coding_cradle.py::test_a_call_cancelled_in_the_first_worker_kills_everything_in_its_group": (
            "counts a launcher and a namespace init beside the worker"
        ),
    },
    "unshare": {},
}


@pytest.mark.timeout(1500)  # the whole coding suite: ~2 min under unshare, ~4 under none on 2 cores
@pytest.mark.parametrize("isolation", ["unshare", "none"])
def test_the_coding_suite_passes_under_each_mode_without_bubblewrap(isolation: str) -> None:
    env = {**os.environ, "MCPGYM_TEST_ISOLATION": isolation}
    left_out = [arg for test in NOT_CLAIMED[isolation] for arg in ("--deselect", f"tests/{test}")]
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *left_out, *SUITE]
    done = subprocess.run(
        without_bwrap(argv), capture_output=True, text=True, cwd=ROOT, env=env, timeout=1200, check=False
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
