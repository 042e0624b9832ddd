"""`mcpgym view`'s charts and reports (#27): the series `web/_charts.py` computes, and the page
drawing them in a real headless Chromium (the fixtures of tests/test_web.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Literal

import pytest
from playwright.sync_api import Page, expect

from mcpgym.harness import report
from mcpgym.harness.types import Trajectory
from mcpgym.web import view_app
from mcpgym.web._charts import charts, histogram, rolling
from mcpgym.web._runs import RunIndex
from tests.test_web import browser, page, served, shot

__all__ = ["browser", "page"]  # the fixtures, re-used


def _rollout(path: Path, rewards: list[float], failed: tuple[int, ...] = ()) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, reward in enumerate(rewards):
        status: Literal["ok", "failed"] = "failed" if i in failed else "ok"
        components: dict[str, float | None] = {"correct": reward, "length": 0.5}
        trajectory = Trajectory(index=i, reward=reward, status=status, stop="done", done=True, components=components)
        lines.append(trajectory.model_dump_json())
    path.write_text("\n".join(reversed(lines)) + "\n")  # out of order on disk: episode order is the index


def _report(path: Path) -> None:
    run = report.RunConfig(
        target="echo", model="m-base", base_url="u", seed=0, samples=2, tasks=["a", "b"], max_turns=1
    )
    rule = report.SuccessRule(kind="threshold", threshold=1.0, source="environment max_reward")
    played = [Trajectory(index=i, reward=float(i % 2), status="ok", stop="done") for i in range(4)]
    report.write(report.build(run, rule, [("a", None, {}), ("b", None, {})], played, 1.0), path)


def test_rolling_means_and_histograms() -> None:
    assert rolling([1.0, 0.0, 1.0, 1.0], 2) == [1.0, 0.5, 0.5, 1.0]
    assert rolling([3.0], 10) == [3.0]
    assert histogram([0.0, 0.4, 1.0, 1.0], [0.0, 0.5, 1.0]) == [2, 2]  # the top edge is in the last bin


def test_runs_are_series_in_episode_order_with_shared_bins(tmp_path: Path) -> None:
    _rollout(tmp_path / "base.jsonl", [0.0, 0.0, 1.0, 0.0], failed=(1,))
    _rollout(tmp_path / "new" / "trajectories.jsonl", [1.0, 1.0, 0.0, 1.0, 1.0, 1.0])
    _report(tmp_path / "new")
    index = RunIndex([tmp_path])
    index.refresh()
    data = charts(index, window=2)
    by_name = {Path(r["name"]).parent.name or Path(r["name"]).name: r for r in data["runs"]}
    base = next(r for r in data["runs"] if r["name"].endswith("base.jsonl"))
    assert base["rewards"] == [0.0, 1.0, 0.0] and base["episodes"] == 4  # the failed episode left out
    assert base["rolling"] == [0.0, 0.5, 0.5]
    assert base["components"] == {"correct": [0.0, 0.5, 0.5], "length": [0.5, 0.5, 0.5]}
    assert len(data["edges"]) == 21 and sum(base["histogram"]) == 3 and sum(by_name["new"]["histogram"]) == 6
    (summary,) = data["reports"]
    assert (summary["model"], summary["tasks"], summary["samples"]) == ("m-base", 2, 2)
    assert summary["pass_at_k"][0]["value"] == pytest.approx(0.5)
    assert charts(index)["window"] == 1  # a twentieth of the longest run, at least 1
    assert not any(math.isnan(x) for r in data["runs"] for x in r["rolling"])


def test_view_overlays_two_runs_and_shows_the_report(page: Page, tmp_path: Path) -> None:
    _rollout(tmp_path / "base" / "trajectories.jsonl", [0.0, 1.0] * 30)
    _rollout(tmp_path / "new" / "trajectories.jsonl", [1.0, 1.0, 0.0] * 20)
    _report(tmp_path / "new")
    app = view_app([tmp_path / "base", tmp_path / "new"])
    with served(app) as base:
        page.goto(f"{base}/view")
        runs = page.locator("svg#rolling polyline.series")
        expect(runs).to_have_count(2)  # two runs overlaid
        assert {runs.nth(i).get_attribute("data-points") for i in range(2)} == {"60"}
        expect(page.locator("#legend li")).to_have_count(2)
        expect(page.locator("svg#rolling .chart-title")).to_have_text("reward, rolling mean over 3 episodes")
        expect(page.locator("svg.component-chart")).to_have_count(2)  # correct, length
        expect(page.locator("svg.component-chart[data-component=correct] polyline.series")).to_have_count(2)
        bars = page.locator("svg#histogram rect.bar")
        counts: dict[str, int] = {}
        for i in range(bars.count()):
            run = str(bars.nth(i).get_attribute("data-run"))
            counts[run] = counts.get(run, 0) + int(str(bars.nth(i).get_attribute("data-count")))
        assert sorted(counts.values()) == [60, 60]
        row = page.locator("#reports tbody tr")
        expect(row).to_have_count(1)
        expect(row.locator("td.pass").first).to_have_text("0.500")
        expect(row).to_contain_text("m-base")
        page.fill("#window", "10")
        page.dispatch_event("#window", "change")
        expect(page.locator("svg#rolling .chart-title")).to_have_text("reward, rolling mean over 10 episodes")
        shot(page, "view-charts")
        answer = page.request.get(f"{base}/view/api/charts?window=0")
        assert answer.status == 400 and "window" in json.dumps(answer.json())


def test_one_episode_is_a_visible_point_and_said_in_the_singular(page: Page, tmp_path: Path) -> None:
    _rollout(tmp_path / "one.jsonl", [1.0])
    with served(view_app([tmp_path])) as base:
        page.goto(f"{base}/view")
        expect(page.locator("#summary")).to_contain_text("1 episode from")
        expect(page.locator("#plot-caption")).to_contain_text("over 1 episode; line: mean of 1 bin,")
        expect(page.locator("svg#rolling .chart-title")).to_have_text("reward, rolling mean over 1 episode")
        expect(page.locator("svg#rolling circle.series-point")).to_have_count(1)  # a one-point line draws nothing
