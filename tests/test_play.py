"""`mcpgym play`, as a person runs it: on a terminal (a pseudo-terminal) and from a pipe."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import module_over_http


def _play(*args: str, stdin: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpgym", "play", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
    )


def test_a_piped_hand_of_blackjack_shows_the_table_the_tools_and_the_outcome() -> None:
    out = _play("mcpgym.servers.blackjack", "--seed", "3", stdin="stand\n")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "Your cards: 3♥ 9♦ (total 12). Dealer shows: Q♦." in text  # the opening observation, suits as suits
    assert "\\u2665" not in text
    assert "hit()  - Take one more card." in text and "stand()" in text
    assert "reward=-1 done=True" in text
    assert "Dealer shows: Q♦ 9♠. You lose." in text  # render() of the state after the step
    assert text.rstrip().endswith("episode over (done): 1 step(s), total reward -1")


def test_bad_lines_are_explained_and_the_episode_goes_on() -> None:
    out = _play("mcpgym.servers.blackjack", "--seed", "3", stdin='hit {"n": \nhit {"n": "two"}\nnope\n')
    assert out.returncode == 0, out.stderr
    assert "not JSON after the tool name" in out.stdout
    assert "n: Extra inputs are not permitted" in out.stdout  # refused, not a card drawn
    assert "Unknown tool: 'nope'" in out.stdout
    assert "stopped before the episode ended: 2 step(s), total reward 0" in out.stdout


def test_a_task_id_plays_that_task_and_an_unknown_one_lists_some() -> None:
    out = _play("mcpgym.servers.blackjack", "--task", "blackjack/seed/3", stdin="quit\n")
    assert out.returncode == 0 and "Dealer shows: Q♦." in out.stdout, out.stderr
    wrong = _play("mcpgym.servers.blackjack", "--task", "blackjack/seed/x", stdin="")
    assert wrong.returncode != 0 and "Traceback" not in wrong.stderr
    assert "no task 'blackjack/seed/x' (of 1000; for example blackjack/seed/0, blackjack/seed/1" in wrong.stderr


def _expect(fd: int, marker: str, seen: list[str]) -> str:
    """Read the terminal until `marker` appears (a bound on waiting, not a sleep)."""
    while marker not in "".join(seen):
        ready, _, _ = select.select([fd], [], [], 60)
        if not ready:
            raise AssertionError(f"no {marker!r} on the terminal; it showed:\n{''.join(seen)}")
        seen.append(os.read(fd, 65536).decode(errors="replace"))
    return "".join(seen)


def test_on_a_terminal_a_bare_tool_name_asks_for_each_argument(tmp_path: Path) -> None:
    primary, secondary = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "mcpgym", "play", "mcpgym.servers.maze", "--seed", "3", "--images", str(tmp_path)],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
    )
    os.close(secondary)
    seen: list[str] = []
    try:
        _expect(primary, "> ", seen)
        os.write(primary, b"move\n")
        _expect(primary, "direction (up|down|left|right): ", seen)
        os.write(primary, b"down\n")
        screen = _expect(primary, "You moved down.", seen)
        os.write(primary, b"quit\n")
        screen = _expect(primary, "stopped before the episode ended: 1 step(s)", seen)
    finally:
        child.wait(timeout=60)
        os.close(primary)
    assert child.returncode == 0
    assert "move(direction: up|down|left|right)" in screen
    assert 'e.g. move {"direction": "up"}' in screen  # a line that works as typed
    images = sorted(p.name for p in tmp_path.iterdir())
    assert images == ["001-render0.png", "002-step1.png", "003-render1.png"]
    assert all((tmp_path / name).read_bytes().startswith(b"\x89PNG") for name in images)
    assert f"[image: {tmp_path / '002-step1.png'}]" in screen


@pytest.mark.anyio
async def test_a_served_target_renders_over_the_wire(tmp_path: Path) -> None:
    async with module_over_http("mcpgym.servers.maze") as url:
        out = _play(url, "--seed", "3", "--images", str(tmp_path), stdin='move {"direction": "down"}\n')
    assert out.returncode == 0, out.stderr
    assert "#A#.###.#" in out.stdout  # the maze's render() after the move, read through mcpgym/state
    assert (tmp_path / "003-render1.png").read_bytes().startswith(b"\x89PNG")


def test_serve_on_a_terminal_says_it_waits_for_a_client_and_a_pipe_hears_nothing() -> None:
    primary, secondary = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "mcpgym", "serve", "mcpgym.servers.echo"],
        stdin=secondary,
        stdout=subprocess.DEVNULL,
        stderr=secondary,
    )
    os.close(secondary)
    seen: list[str] = []
    try:
        line = _expect(primary, "Ctrl-C to stop", seen)
    finally:
        child.terminate()
        child.wait(timeout=60)
        os.close(primary)
    assert line.strip() == "serving Echo over stdio: waiting for an MCP client; Ctrl-C to stop"
    piped = subprocess.run(
        [sys.executable, "-m", "mcpgym", "serve", "mcpgym.servers.echo"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "waiting for an MCP client" not in piped.stderr  # a client's pipe: the protocol only
