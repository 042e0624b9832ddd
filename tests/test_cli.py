"""The `mcpgym` command and `python -m mcpgym.servers.echo`, run as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mcpgym


def _run(*args: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpgym", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_help_names_every_command_and_target_kind() -> None:
    out = _run("--help")
    assert out.returncode == 0
    for word in ("serve", "tools", "call", "check", "http://127.0.0.1:8000/mcp", "python -m mcpgym.servers.echo"):
        assert word in out.stdout
    for command in ("serve", "tools", "call", "check", "rescore"):
        assert _run(command, "--help").returncode == 0


@pytest.mark.parametrize("target", ["mcpgym.servers.echo:Echo", "python -m mcpgym.servers.echo"])
def test_tools_lists_echo(target: str) -> None:
    out = _run("tools", target)
    assert out.returncode == 0, out.stderr
    assert "echo_message(message: string)" in out.stdout and "repeat(message: string, times: integer = 2)" in out.stdout
    listed = json.loads(_run("tools", target, "--json").stdout)
    assert [t["name"] for t in listed] == ["echo_message", "repeat"]


def test_call_prints_the_result_and_reward() -> None:
    out = _run("call", "mcpgym.servers.echo:Echo", "echo_message", '{"message": "orbit"}', "--seed", "0")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["content"][0]["text"] == "orbit"
    assert "reward=1.0 done=True terminated=True truncated=False" in out.stderr
    assert "one call in a fresh episode; `mcpgym play mcpgym.servers.echo:Echo` keeps one going" in out.stderr


def test_call_prints_card_suits_as_suits() -> None:
    out = _run("call", "mcpgym.servers.blackjack", "stand", "--seed", "3")
    assert "Q♦" in out.stdout and "\\u2666" not in out.stdout, out.stdout


WRAPPED = '''
import mcpgym


class Wrapped(mcpgym.Environment):
    @mcpgym.tool
    async def get_task(self) -> str:
        """Show this episode's task: its id, the prompt to complete and the function to
        implement, e.g. `add(a, b)`, i.e. what is graded. Then more.

        Args: none
        """
        return "task"
'''


def test_tools_shows_the_whole_first_sentence_of_a_wrapped_docstring(tmp_path: Path) -> None:
    (tmp_path / "wrapped.py").write_text(WRAPPED)
    out = _run("tools", str(tmp_path / "wrapped.py"))
    assert out.returncode == 0, out.stderr
    sentence = "Show this episode's task: its id, the prompt to complete and the function to implement, "
    assert out.stdout == f"get_task()\n    {sentence}e.g. `add(a, b)`, i.e. what is graded.\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("call", "mcpgym.servers.echo:Echo", "echo_message", "{not json"), "not valid JSON"),
        (("call", "mcpgym.servers.echo:Echo", "nope", "{}"), "Unknown tool"),
        (("tools", "no_such_module:Env"), "No module named"),
    ],
)
def test_mistakes_get_one_clear_line(args: tuple[str, ...], message: str) -> None:
    out = _run(*args)
    assert out.returncode != 0 and message in out.stderr and "Traceback" not in out.stderr


def test_a_failing_tool_call_exits_nonzero() -> None:
    out = _run("call", "mcpgym.servers.echo:Echo", "repeat", '{"message": "a", "times": 99}')
    assert out.returncode == 1 and '"isError": true' in out.stdout


def test_check_command() -> None:
    out = _run("check", "mcpgym.servers.echo:Echo")
    assert out.returncode == 0 and "OK" in out.stdout


def test_python_m_servers_echo_serves_http_on_loopback() -> None:
    with mcpgym.ServerProcess("python -m mcpgym.servers.echo --http --port 0") as server:
        # The banner is printed once the socket listens, with the port it picked.
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")
        with mcpgym.connect_sync(server.url) as env:
            env.reset(seed=0)
            assert env.call_tool("echo_message", {"message": "orbit"}).reward == 1.0


def test_a_server_that_cannot_start_says_why() -> None:
    with pytest.raises(RuntimeError, match="did not start") as err:
        with mcpgym.ServerProcess("python -m mcpgym serve no_such_module:Env --http --port 0"):
            pass
    assert "No module named" in str(err.value)


def test_a_port_in_use_is_one_clear_line_and_a_nonzero_exit() -> None:
    with mcpgym.ServerProcess("python -m mcpgym serve mcpgym.servers.echo:Echo --http --port 0") as server:
        port = server.url.rsplit(":", 1)[1].split("/")[0]
        out = _run("serve", "mcpgym.servers.echo:Echo", "--http", "--port", port)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert f"cannot listen on 127.0.0.1:{port}" in line and "--port" in line


def test_clients_authenticate_with_token_header_or_environment(tmp_path: Path) -> None:
    with mcpgym.ServerProcess(
        "python -m mcpgym serve mcpgym.servers.echo:Echo --http --port 0 --token s3cret"
    ) as server:
        refused = _run("tools", server.url, env={"MCPGYM_TOKEN": ""})
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert "HTTP 401" in refused.stderr and "--token" in refused.stderr
        assert _run("tools", server.url, "--token", "s3cret").returncode == 0
        assert _run("tools", server.url, env={"MCPGYM_TOKEN": "s3cret"}).returncode == 0
        auth = ("--header", "Authorization: Bearer s3cret")
        called = _run("call", server.url, "echo_message", '{"message": "x"}', *auth)
        assert called.returncode == 0, called.stderr
        bare = server.url.removesuffix("/mcp")  # the URL without its path: the error says where MCP lives
        lost = _run("tools", bare, "--token", "s3cret")
        assert lost.returncode == 1 and "HTTP 404" in lost.stderr and f"{bare}/mcp" in lost.stderr
        # rollout: the environment is reached (with the token) before the policy endpoint (absent here) fails.
        for flags, reached in (((), False), (("--token", "s3cret"), True)):
            out = tmp_path / f"{reached}.jsonl"
            args = ("--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--retries", "0", "--out", str(out))
            _run("rollout", server.url, *args, "--no-progress", *flags, env={"MCPGYM_TOKEN": ""})
            (trajectory,) = [json.loads(line) for line in out.read_text().splitlines()]
            assert ("HTTP 401" in trajectory["error"]) is not reached
            assert (trajectory["observation"] is not None) is reached


def test_check_prints_each_problem_and_its_traceback_once(tmp_path: Path) -> None:
    (tmp_path / "badenv.py").write_text(
        "import mcpgym\n"
        "class Bad(mcpgym.Environment):\n"
        "    async def reset(self, seed=None, options=None):\n"
        "        raise ValueError('boom')\n"
        "    @mcpgym.tool\n"
        "    async def act(self) -> str:\n"
        '        """Act."""\n'
        "        return 'x'\n"
    )
    out = _run("check", str(tmp_path / "badenv.py"))
    assert out.returncode == 1
    assert out.stdout.count("Bad.reset raised ValueError: boom") == 1 and "1 problem(s)" in out.stdout
    assert out.stderr.count("Traceback") == 1, out.stderr
