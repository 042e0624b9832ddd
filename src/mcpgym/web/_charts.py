"""The viewer's charts and reports: `GET /view/api/charts` (drawn by static/charts.js).

Layer: arithmetic over `RunIndex` rows and `mcpgym eval` reports (read as JSON: the web
package never imports the harness). A *run* is one rollout file (`mcpgym rollout --out`, an
eval's `trajectories.jsonl`) or one directory of `--record` files. Per run, in episode order
(a rollout's index, a recording's start time), failed and unscored episodes left out:

- `rolling`: the trailing mean reward over `window` episodes (a raw per-episode line is noise
  at training scale); `window` defaults to a twentieth of the longest run, at least 1;
- `components`: the same rolling mean of each rubric component;
- `histogram`: episode counts per reward bin, the bins shared by every run so runs overlay.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mcpgym.web._guard import BadRequest
from mcpgym.web._runs import RunIndex

BINS = 20
REPORT = "report.json"


def charts(index: RunIndex, window: int | None = None) -> dict[str, Any]:
    """Every run's series (see the module docstring) and the evaluation reports under the paths."""
    runs = [run for run in (_run(name, rows) for name, rows in _runs(index).items()) if run["rewards"]]
    longest = max((len(r["rewards"]) for r in runs), default=0)
    width = window if window is not None else max(1, longest // 20)
    edges = _edges([x for r in runs for x in r["rewards"]])
    for run in runs:
        run["rolling"] = rolling(run["rewards"], width)
        run["components"] = {name: rolling(values, width) for name, values in run.pop("parts").items()}
        run["histogram"] = histogram(run["rewards"], edges)
    return {"window": width, "edges": edges, "runs": runs, "reports": reports(index.paths)}


def rolling(values: Sequence[float], window: int) -> list[float]:
    """The trailing mean of the last `window` values at each position (fewer at the start)."""
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def histogram(values: Sequence[float], edges: Sequence[float]) -> list[int]:
    counts = [0] * (len(edges) - 1)
    for value in values:
        i = next((b for b in range(len(counts)) if value < edges[b + 1]), len(counts) - 1)
        counts[i] += 1
    return counts


def _edges(values: Sequence[float]) -> list[float]:
    if not values:
        return []
    low, high = min(values), max(values)
    if low == high:
        low, high = low - 0.5, high + 0.5
    step = (high - low) / BINS
    return [low + step * i for i in range(BINS)] + [high]


def _runs(index: RunIndex) -> dict[str, list[dict[str, Any]]]:
    """Rows grouped by run: a rollout file, or the directory of a recording."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for path, rows in sorted(index.files().items()):
        for row in rows:
            name = str(path) if row["format"] == "rollout" else str(path.parent)
            grouped.setdefault(name, []).append(row)
    for rows in grouped.values():
        rows.sort(key=lambda r: (r.get("index") or 0, r.get("started") or 0.0))
    return grouped


def _run(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if r.get("status") != "failed" and _number(r.get("reward"))]
    parts: dict[str, list[float]] = {}
    for row in scored:
        for part, value in (row.get("components") or {}).items():
            if _number(value):
                parts.setdefault(part, []).append(float(value))
    return {"name": name, "episodes": len(rows), "rewards": [float(r["reward"]) for r in scored], "parts": parts}


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def reports(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The `mcpgym eval` reports (`report.json`) at or under `paths`, summarised."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(path.rglob(REPORT)))
        elif path.name == REPORT or (path.parent / REPORT).is_file():
            found.append(path if path.name == REPORT else path.parent / REPORT)
    summaries = []
    for report in dict.fromkeys(found):
        try:
            data = json.loads(report.read_text(encoding="utf-8"))
            run = data["run"]
            summaries.append(
                {
                    "path": str(report),
                    "target": run["target"],
                    "model": run["model"],
                    "tasks": len(run["tasks"]),
                    "samples": run["samples"],
                    "success": data["success"],
                    "reward": data["reward"],
                    "pass_at_k": data["pass_at_k"],
                    "failed": data["failures"]["episodes"],
                }
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a report of ours: not shown
    return summaries


class Charts:
    """The route, over a viewer's index; `lock` is the viewer's (one re-scan at a time)."""

    def __init__(self, index: RunIndex, lock: anyio.Lock) -> None:
        self.index = index
        self.lock = lock

    async def __call__(self, request: Request) -> Response:
        text = request.query_params.get("window")
        try:
            window = int(text) if text else None
        except ValueError:
            raise BadRequest("window must be a whole number of episodes") from None
        if window is not None and not 1 <= window <= 100_000:
            raise BadRequest("window must be from 1 to 100000 episodes")

        def compute() -> dict[str, Any]:
            self.index.refresh()
            return charts(self.index, window)

        async with self.lock:
            return JSONResponse(await anyio.to_thread.run_sync(compute))
