"""`mcpgym view`'s index of recorded runs: formats, cut-short files, lazy episodes, re-scans."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import mcpgym
from mcpgym.servers.echo import Echo
from mcpgym.web._runs import RunIndex

pytestmark = pytest.mark.anyio


async def record(directory: Path, seeds: range) -> None:
    async with mcpgym.connect(mcpgym.GymServer(Echo, record=directory)) as env:
        for seed in seeds:
            first = await env.reset(seed=seed)
            await env.call_tool("echo_message", {"message": "no"})
            await env.call_tool("echo_message", {"message": first.observation["target"]})


def lines(*records: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


async def test_formats_unfinished_and_cut_short_files(tmp_path: Path) -> None:
    await record(tmp_path / "rec", range(3))
    reset = {"event": "reset", "episode_id": "u" * 22, "environment": "Echo", "seed": 9, "time": 1.0}
    step = {"event": "step", "tool": "echo_message", "arguments": {}, "result": {"content": []}, "reward": 0.5}
    # A server killed mid-episode: no closing line, and half a line at the end.
    (tmp_path / "rec" / "killed.jsonl").write_text(lines(reset, {**step, "time": 2.0}, step) + '{"event": "st')
    (tmp_path / "rec" / "notes.jsonl").write_text("not json\n")
    rollout = [{"index": i, "reward": float(i % 2), "done": True, "turns": [{"steps": [{}, {}]}]} for i in range(4)]
    (tmp_path / "rollout.jsonl").write_text(lines(*rollout[:2]) + "garbage\n" + lines(*rollout[2:]))

    index = RunIndex([tmp_path])
    rows = index.refresh()
    assert len(rows) == 3 + 1 + 4
    by_format = {f: [r for r in rows if r["format"] == f] for f in ("record", "rollout")}
    assert [r["index"] for r in by_format["rollout"]] == [0, 1, 2, 3]
    assert [r["reward"] for r in by_format["rollout"]] == [0.0, 1.0, 0.0, 1.0]
    assert {r["length"] for r in by_format["rollout"]} == {2}
    finished = [r for r in by_format["record"] if r["status"] == "done"]
    assert len(finished) == 3 and {(r["reward"], r["length"]) for r in finished} == {(1.0, 2)}
    (killed,) = [r for r in by_format["record"] if r["seed"] == 9]
    assert (killed["status"], killed["length"], killed["reward"]) == ("unfinished", 2, 1.0)
    # Full episodes are read only when asked for, from where the index left them.
    third = index.episode(next(r["n"] for r in rows if r["format"] == "rollout" and r["index"] == 2))
    assert third == {"format": "rollout", "trajectory": rollout[2]}
    full = index.episode(next(r["n"] for r in finished))
    assert [e["event"] for e in full["events"]] == ["reset", "step", "step", "close"]


async def test_rescan_reads_only_what_changed(tmp_path: Path) -> None:
    await record(tmp_path, range(2))
    index = RunIndex([tmp_path])
    assert len(index.refresh()) == 2
    kept = dict(index._files)
    await record(tmp_path, range(2, 5))
    assert len(index.refresh()) == 5
    assert all(index._files[path] is entry for path, entry in kept.items())  # not read again


def test_view_refuses_a_missing_path(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "mcpgym", "view", str(tmp_path / "nope")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and "no such file or directory" in done.stderr


async def test_viewer_is_read_only_and_guarded(tmp_path: Path) -> None:
    import httpx2

    from mcpgym.web import view_app
    from tests.conftest import serve_app

    await record(tmp_path, range(2))
    async with serve_app(view_app([tmp_path], token="t")) as base, httpx2.AsyncClient() as http:
        auth = {"Authorization": "Bearer t"}
        assert (await http.get(f"{base}/view")).status_code == 200  # the shell; the data needs the token
        assert (await http.get(f"{base}/view/api/runs")).status_code == 401
        runs = (await http.get(f"{base}/view/api/runs", headers=auth)).json()
        assert len(runs["episodes"]) == 2
        episode = (await http.get(f"{base}/view/api/episodes/1", headers=auth)).json()
        assert episode["format"] == "record" and episode["summary"]["n"] == 1
        assert (await http.get(f"{base}/view/api/episodes/2", headers=auth)).status_code == 404
        assert (await http.get(f"{base}/view/api/episodes/-1", headers=auth)).status_code == 404
        rebinding = await http.get(f"{base}/view/api/runs", headers={**auth, "Host": "evil.example"})
        assert rebinding.status_code == 421
        assert (await http.post(f"{base}/view/api/runs", headers=auth)).status_code == 405


async def test_an_ended_episode_is_finished_before_it_is_closed_and_lasts_until_its_last_step(
    tmp_path: Path,
) -> None:
    from mcpgym.servers.blackjack import Blackjack

    gym = mcpgym.GymServer(Blackjack, record=tmp_path)
    async with mcpgym.connect(gym) as env:
        await env.reset(seed=3)
        await env.call_tool("stand")
        refused = await env.call_tool("hit")  # after the end: refused, and not a step of the record
        assert refused.is_error
        # Still open (as a web-page episode is while its server runs): finished all the same.
        (row,) = RunIndex([tmp_path]).refresh()
        assert (row["status"], row["length"], row["reward"]) == ("done", 1, -1.0)
    (recording,) = mcpgym.read_recordings(tmp_path)
    assert [s.tool for s in recording.steps] == ["stand"]
    # Closed long after the hand ended (the server stopped): the duration is the hand's.
    reset = {"event": "reset", "episode_id": "w" * 22, "environment": "Blackjack", "seed": 3, "time": 100.0}
    step = {"event": "step", "tool": "stand", "arguments": {}, "result": {"content": []}, "reward": -1.0}
    close = {"event": "close", "step_count": 1, "total_reward": -1.0, "done": True, "truncated": False}
    old_refused = {**step, "tool": "hit", "reward": 0.0, "done": True, "time": 200.0, "duration": 0.1}
    (tmp_path / "late.jsonl").write_text(
        lines(reset, {**step, "done": True, "time": 104.0, "duration": 1.0}, {**close, "time": 574.0})
    )
    (tmp_path / "open.jsonl").write_text(
        lines(reset, {**step, "done": True, "time": 104.0, "duration": 1.0}, old_refused)
    )
    rows = {r["source"]: r for r in RunIndex([tmp_path]).refresh()}
    assert (rows["late.jsonl"]["status"], rows["late.jsonl"]["duration"]) == ("done", 5.0)
    opened = rows["open.jsonl"]
    assert (opened["status"], opened["length"], opened["duration"]) == ("done", 1, 5.0)
