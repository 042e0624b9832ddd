"""`mcpgym harness config`: the printed blocks parse, launch the right server, and --write merges."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters

import mcpgym
from mcpgym._cli import main as mcpgym_cli
from mcpgym.harness import config

pytestmark = pytest.mark.anyio

REPO = str(Path(__file__).resolve().parent.parent)


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


Cli = Callable[..., Ran]
Printed = Callable[..., dict[str, Any]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """`mcpgym harness config ARGS` run in this process (a subprocess costs seconds of imports)."""

    def run(*args: str, cwd: Path | str = REPO) -> Ran:
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit:
            mcpgym_cli.main(["harness", "config", *args])
        code, out = exit.value.code, capsys.readouterr()
        stderr = out.err + (code if isinstance(code, str) else "")  # sys.exit("message") prints it to stderr
        return Ran(code if isinstance(code, int) else (0 if code is None else 1), out.out, stderr)

    return run


@pytest.fixture
def printed(cli: Cli) -> Printed:
    def run(*args: str) -> dict[str, Any]:
        out = cli(*args)
        assert out.returncode == 0, out.stderr
        value: dict[str, Any] = json.loads(out.stdout)
        return value

    return run


async def test_claude_code_block_launches_the_coding_server_from_anywhere(tmp_path: Path, printed: Printed) -> None:
    entry = printed("claude-code", "mcpgym.servers.coding")["mcpServers"]["coding"]
    argv = [sys.executable, "-m", "mcpgym", "harness", "config", "claude-code", "mcpgym.servers.coding"]
    out = await anyio.run_process(argv, cwd=tmp_path)
    assert json.loads(out.stdout)["mcpServers"]["coding"] == entry  # the real command, from elsewhere
    assert entry == {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "mcpgym.servers.coding"],  # the name a wheel install has too, not the checkout's alias
        "env": {"PYTHONPATH": os.path.join(REPO, "src")},
    }
    # Launch it as a client would: that command, those args, that env, some other directory.
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"], cwd=tmp_path)
    async with mcpgym.connect(params) as env:
        assert "submit" in {t.name for t in await env.list_tools()}


def test_a_checkout_launcher_is_written_by_its_real_name(tmp_path: Path) -> None:
    entry = config.server_entry("claude-code", "servers.echo")  # a checkout's launcher (rfcs/0016-layout.md)
    assert entry["args"] == ["-m", "mcpgym.servers.echo"] and entry["env"] == {"PYTHONPATH": os.path.join(REPO, "src")}
    spec = tmp_path / "mcpgym.yaml"
    spec.write_text("environment: mcpgym.servers.echo:Echo\n")
    argv, env = config.launch(str(spec))
    assert argv[1:] == ["-m", "mcpgym", "serve", str(spec)] and env == {"PYTHONPATH": os.path.join(REPO, "src")}


def test_each_client_gets_its_own_shape() -> None:
    desktop = config.server_entry("claude-desktop", "mcpgym.servers.echo:Echo")
    assert desktop["command"] == sys.executable and "type" not in desktop  # Desktop's file: command/args/env
    assert desktop["args"] == ["-m", "mcpgym", "serve", "mcpgym.servers.echo:Echo"]
    assert config.server_entry("mcp-json", "mcpgym.servers.echo")["args"] == [
        "-m",
        "mcpgym.servers.echo",
    ]  # has a __main__
    assert config.server_entry("claude-code", "tests.envs:Counter")["args"][-1] == "tests.envs:Counter"
    command = config.server_entry("claude-code", "python -m mcpgym.servers.echo --http")
    assert command["command"] == sys.executable and command["args"] == ["-m", "mcpgym.servers.echo", "--http"]


def test_a_url_is_reached_not_launched(printed: Printed) -> None:
    url = "http://127.0.0.1:8000/mcp"
    block = printed("claude-code", "mcpgym.servers.coding", "--url", url)
    assert block == {"mcpServers": {"coding": {"type": "http", "url": url}}}
    assert config.server_entry("mcp-json", url) == {"url": url}
    # Claude Desktop's file takes stdio only: bridge with mcp-remote.
    assert config.server_entry("claude-desktop", "x", url=url) == {"command": "npx", "args": ["-y", "mcp-remote", url]}


def test_record_and_server_flags_reach_the_command(tmp_path: Path, printed: Printed) -> None:
    block = printed(
        "claude-desktop",
        "mcpgym.servers.coding",
        "--record",
        str(tmp_path / "rec"),
        "--name",
        "he",
        "--server-args=--partial-credit",
    )
    assert block["mcpServers"]["he"]["args"] == [
        "-m",
        "mcpgym.servers.coding",
        "--record",
        str(tmp_path / "rec"),
        "--partial-credit",
    ]


def test_write_merges_without_clobbering(tmp_path: Path, cli: Cli) -> None:
    path = tmp_path / ".mcp.json"
    before: dict[str, Any] = {"mcpServers": {"other": {"command": "node", "args": ["x.js"]}}, "keep": [1, 2]}
    path.write_text(json.dumps(before))

    out = cli("claude-code", "mcpgym.servers.coding", "--write", cwd=tmp_path)  # default file: ./.mcp.json
    assert out.returncode == 0, out.stderr
    after = json.loads(path.read_text())
    assert after["keep"] == [1, 2] and after["mcpServers"]["other"] == before["mcpServers"]["other"]
    assert after["mcpServers"]["coding"]["args"] == ["-m", "mcpgym.servers.coding"]
    assert json.loads((tmp_path / ".mcp.json.bak").read_text()) == before

    first = path.read_text()
    config.merge(path, "coding", {"type": "http", "url": "http://127.0.0.1:9/mcp"}, force=True)  # replaces it
    servers = json.loads(path.read_text())["mcpServers"]
    assert servers["coding"] == {"type": "http", "url": "http://127.0.0.1:9/mcp"}
    assert set(servers) == {"other", "coding"}
    bak, stamped = sorted(p.name for p in tmp_path.iterdir() if p.name != ".mcp.json")  # no temp file left
    assert bak == ".mcp.json.bak" and json.loads((tmp_path / bak).read_text()) == before  # never overwritten
    assert stamped.startswith(".mcp.json.bak.") and (tmp_path / stamped).read_text() == first


def test_write_refuses_to_replace_a_different_entry(tmp_path: Path, cli: Cli) -> None:
    path = tmp_path / ".mcp.json"
    theirs = {"mcpServers": {"coding": {"command": "node", "args": ["their-coding-server.js"]}}}
    path.write_text(json.dumps(theirs))
    out = cli("claude-code", "mcpgym.servers.coding", "--write", "--file", str(path))
    assert out.returncode != 0 and "--force" in out.stderr and json.loads(path.read_text()) == theirs
    assert cli("claude-code", "mcpgym.servers.coding", "--write", "--file", str(path), "--force").returncode == 0
    assert json.loads(path.read_text())["mcpServers"]["coding"]["args"] == ["-m", "mcpgym.servers.coding"]
    assert (
        cli("claude-code", "mcpgym.servers.coding", "--write", "--file", str(path)).returncode == 0
    )  # same entry: fine


def test_write_goes_through_a_symlink_and_keeps_the_mode(tmp_path: Path, cli: Cli) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text("{}")
    real.chmod(0o640)
    link = tmp_path / ".mcp.json"
    link.symlink_to(real)
    assert cli("claude-code", "mcpgym.servers.coding", "--write", "--file", str(link)).returncode == 0
    assert link.is_symlink() and "coding" in json.loads(real.read_text())["mcpServers"]
    assert real.stat().st_mode & 0o777 == 0o640


def test_write_creates_claude_desktops_file(tmp_path: Path, cli: Cli) -> None:
    path = tmp_path / "Claude" / "claude_desktop_config.json"
    out = cli("claude-desktop", "mcpgym.servers.echo:Echo", "--write", "--file", str(path))
    assert out.returncode == 0, out.stderr
    assert json.loads(path.read_text())["mcpServers"]["echo"]["command"] == sys.executable
    assert not path.with_name(path.name + ".bak").exists()  # nothing to back up


def test_a_broken_config_file_is_left_alone(tmp_path: Path, cli: Cli) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text("{not json")
    out = cli("claude-code", "mcpgym.servers.coding", "--write", "--file", str(path))
    assert out.returncode != 0 and "not valid JSON" in out.stderr and "Traceback" not in out.stderr
    assert path.read_text() == "{not json"


def test_claude_desktop_default_paths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert config.default_file("claude-desktop").parts[-4:] == (
        "Library",
        "Application Support",
        "Claude",
        "claude_desktop_config.json",
    )
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("APPDATA", str(tmp_path))
    assert config.default_file("claude-desktop") == tmp_path / "Claude" / "claude_desktop_config.json"
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config.default_file("claude-desktop") == tmp_path / "xdg" / "Claude" / "claude_desktop_config.json"
    assert config.default_file("claude-code") == Path(".mcp.json")


def test_an_ambiguous_module_is_refused(cli: Cli) -> None:
    out = cli("claude-code", "tests.envs")
    assert out.returncode != 0 and "Environment subclasses" in out.stderr and "tests.envs:CLASS" in out.stderr
    assert os.path.exists(os.path.join(REPO, "tests", "envs.py"))
