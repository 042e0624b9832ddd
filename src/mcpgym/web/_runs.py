"""Recorded runs, indexed for the viewer: one summary row per episode, full episodes on demand.

Layer: reads files only (no server, no episode core). Two formats are recognised by their
first line, wherever they are found (files named on the command line, or `*.jsonl` under a
directory, recursively):

- a `--record` episode file (`{"event": "reset", ...}` first; `mcpgym._recording.recording`): one episode
  per file. Its summary comes from the first line and the closing record at the end of the
  file, read from the tail, so indexing does not read the steps; an episode that never closed
  (running, or its server was killed) is read whole.
- a `mcpgym rollout --out` file (`harness.Trajectory` per line): one episode per line. Each
  line is parsed once for its summary; only its byte offset is kept.

Re-indexing reuses the rows of files whose size and modification time have not changed, so a
viewer can follow a recording as it grows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpgym._recording.blobs import restore

TAIL_BYTES = 8192
"""Bytes read from the end of a record file to find its closing line."""


@dataclass(frozen=True)
class Location:
    path: Path
    offset: int = 0
    length: int = -1
    """-1: the whole file is one episode (a record file)."""


@dataclass
class _FileRows:
    stamp: tuple[int, int]
    rows: list[tuple[dict[str, Any], Location]]


@dataclass
class RunIndex:
    """Every episode under `paths`, as summary rows (`rows()`) and full records (`episode(n)`)."""

    paths: list[Path]
    _files: dict[Path, _FileRows] = field(default_factory=dict)
    _locations: list[Location] = field(default_factory=list)
    _rows: list[dict[str, Any]] = field(default_factory=list)

    def refresh(self) -> list[dict[str, Any]]:
        """Re-scan `paths` (unchanged files are not read again); returns the summary rows."""
        files: dict[Path, _FileRows] = {}
        for root, path in self._jsonl_files():
            try:
                st = path.stat()
            except OSError:
                continue  # removed while we listed it
            stamp = (st.st_size, st.st_mtime_ns)
            known = self._files.get(path)
            files[path] = (
                known
                if known is not None and known.stamp == stamp
                else _FileRows(stamp, _index_file(path, _name(root, path)))
            )
        self._files = files
        pairs = [pair for entry in files.values() for pair in entry.rows]
        pairs.sort(key=_order)
        self._locations = [location for _, location in pairs]
        self._rows = [{**row, "n": n} for n, (row, _) in enumerate(pairs)]
        return self._rows

    def rows(self) -> list[dict[str, Any]]:
        return self._rows

    def files(self) -> dict[Path, list[dict[str, Any]]]:
        """The summary rows of each indexed file, as of the last `refresh` (the charts group by it)."""
        return {path: [row for row, _ in entry.rows] for path, entry in self._files.items()}

    def episode(self, n: int) -> dict[str, Any]:
        """Episode `n` in full: the record file's events, or the rollout line's trajectory."""
        location = self._locations[n]
        if location.length < 0:
            # Images back from their blob files: the page shows them, it cannot read the files.
            events = [restore(e, location.path.parent) for e in _read_events(location.path)]
            return {"format": "record", "events": events}
        with location.path.open("rb") as f:
            f.seek(location.offset)
            trajectory = json.loads(f.read(location.length))
        return {"format": "rollout", "trajectory": trajectory}

    def _jsonl_files(self) -> list[tuple[Path, Path]]:
        """(the path given, a file under it) for every JSONL file to index."""
        found: list[tuple[Path, Path]] = []
        for path in self.paths:
            if path.is_dir():
                found.extend((path, p) for p in sorted(path.rglob("*.jsonl")) if p.is_file())
            elif path.is_file():
                found.append((path.parent, path))
        return found


def _name(root: Path, path: Path) -> str:
    """How the page names a file: relative to the directory it was found under."""
    return path.relative_to(root).as_posix()


def _order(pair: tuple[dict[str, Any], Location]) -> tuple[Any, ...]:
    row, location = pair
    # Rollout episodes by file then index (the x axis of their plot); recorded ones by start time.
    if row["format"] == "rollout":
        return (0, str(location.path), row.get("index") or 0, 0.0)
    return (1, "", 0, row.get("started") or 0.0)


def _index_file(path: Path, name: str) -> list[tuple[dict[str, Any], Location]]:
    try:
        with path.open("rb") as f:
            first = f.readline()
            head = _loads(first)
            if head is None:
                return []
            if head.get("event") == "reset":
                return [(_record_summary(path, name, f, head), Location(path))]
            if "turns" in head or "index" in head:
                return list(_rollout_rows(path, name, f, first, head))
    except OSError:
        pass  # unreadable: not shown (the page lists only what it can open)
    return []


def _record_summary(path: Path, name: str, f: Any, head: dict[str, Any]) -> dict[str, Any]:
    close, before = _closing_record(f)
    started = head.get("time") or 0.0
    row: dict[str, Any] = {
        "format": "record",
        "source": name,
        "episode_id": head.get("episode_id"),
        "environment": head.get("environment"),
        "seed": head.get("seed"),
        "index": None,
        "started": started,
        "implicit": bool(head.get("implicit")),
    }
    if close is not None:
        reward, steps = close.get("total_reward", 0.0), close.get("step_count", 0)
        done, truncated, ended = bool(close.get("done")), bool(close.get("truncated")), close.get("time", started)
        if done and before is not None and before.get("event") == "step" and before.get("done"):
            ended = _step_end(before, started)  # it ended with that step, not when it was closed
        status = "truncated" if truncated else "done" if done else "not done"
    else:  # no closing line: count what is there
        steps_seen = _until_done(e for e in _read_events(path) if e.get("event") == "step")
        reward, steps = sum(float(e.get("reward") or 0.0) for e in steps_seen), len(steps_seen)
        last = steps_seen[-1] if steps_seen else {}
        done, truncated = bool(last.get("done")), bool(last.get("truncated"))
        ended = _step_end(last, started)
        # Ended but not yet closed (a web-page episode while its server runs): finished all the same.
        status = "truncated" if truncated else "done" if done else "unfinished"
    return {
        **row,
        "reward": reward,
        "length": steps,
        "done": done,
        "truncated": truncated,
        "status": status,
        "duration": max(0.0, ended - started),
        "components": (close or {}).get("components") or {},
    }


def _closing_record(f: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The closing record (None if the episode was never closed) and the record before it."""
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - TAIL_BYTES))
    lines = f.read().splitlines()
    last = _loads(lines[-1]) if lines else None
    if last is None or last.get("event") != "close":
        return None, None
    return last, _loads(lines[-2]) if len(lines) > 1 else None


def _step_end(step: dict[str, Any], started: float) -> float:
    return float(step.get("time") or started) + float(step.get("duration") or 0.0)


def _until_done(steps: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps up to the one that ended the episode (recordings before #28 also logged the
    calls refused after it, which were never steps)."""
    kept = []
    for step in steps:
        kept.append(step)
        if step.get("done"):
            break
    return kept


def _rollout_rows(
    path: Path, name: str, f: Any, first: bytes, head: dict[str, Any]
) -> Iterator[tuple[dict[str, Any], Location]]:
    offset, line = 0, first
    record: dict[str, Any] | None = head
    while line:
        if record is not None:
            yield _rollout_summary(name, record), Location(path, offset, len(line))
        offset += len(line)
        line = f.readline()
        record = _loads(line) if line else None


def _rollout_summary(name: str, t: dict[str, Any]) -> dict[str, Any]:
    failed = t.get("status") == "failed"
    steps = sum(len(turn.get("steps") or ()) for turn in t.get("turns") or ())
    return {
        "format": "rollout",
        "source": name,
        "episode_id": t.get("episode_id"),
        "environment": None,
        "seed": t.get("seed"),
        "index": t.get("index"),
        "started": t.get("started") or 0.0,
        "reward": float(t.get("reward") or 0.0),
        "length": steps,
        "turns": len(t.get("turns") or ()),
        "done": bool(t.get("done")),
        "truncated": bool(t.get("truncated")),
        "status": "failed"
        if failed
        else "truncated"
        if t.get("truncated")
        else "done"
        if t.get("done")
        else t.get("stop"),
        "stop": t.get("stop"),
        "error": t.get("error"),
        "duration": t.get("duration") or 0.0,
        "components": t.get("components") or {},
    }


def _read_events(path: Path) -> list[dict[str, Any]]:
    events = []
    with path.open("rb") as f:
        for line in f:
            record = _loads(line)
            if record is None:
                break  # cut short by a kill: everything before it is intact
            events.append(record)
    return events


def _loads(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None
