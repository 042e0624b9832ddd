"""Recording calls under DIR: one JSONL file per episode, a line appended as each call finishes.

Layer: file I/O only. Each line is written with one `write` and flushed before the call's reply
goes out, so a killed gateway keeps every call that finished (the OS holds what was written; a
line cut short by a power loss is skipped when read). The files of the most recently active
episodes stay open (opening and closing one per call measured ~50 us of the gateway's added
latency); the least recent is closed past `OPEN_FILES`. Episode ids are names chosen by
clients: one that is not a safe file name is stored under a hash of it (the id is in every line).

A prompt that begins with the episode's previous recorded prompt (a multi-turn agent's always
does) is written as `prompt_from` (that call's `id`) and `prompt_tail` (the rest) instead of
`prompt_token_ids`, and `read_calls` joins them again: writing the whole prompt on every call
cost O(context) per call and O(turns x context) on disk (at 8,000 prompt tokens 225-300 us of
CPU more per call, benchmarks/bench_gateway.py); the comparison with the previous prompt costs
~8x less than serialising it. The last prompt is kept for the episodes whose files are open.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict, defaultdict
from pathlib import Path
from typing import Any, BinaryIO

from mcpgym.gateway import codec
from mcpgym.gateway.types import Call

UNJOINED = "_unjoined"
"""The file of calls that named no episode."""
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def file_name(episode_id: str | None) -> str:
    if episode_id is None:
        return UNJOINED + ".jsonl"
    if _SAFE.fullmatch(episode_id):
        return episode_id + ".jsonl"
    return "episode-" + hashlib.sha256(episode_id.encode()).hexdigest()[:24] + ".jsonl"


OPEN_FILES = 64


class Recorder:
    """Appends each finished call to its episode's file under `directory` (created on first use)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._files: OrderedDict[str | None, BinaryIO] = OrderedDict()
        self._prompts: dict[str | None, tuple[str, list[int]]] = {}
        """The last recorded (call id, prompt) of each episode whose file is open."""

    def append(self, episode_id: str | None, call: dict[str, Any]) -> None:
        """Append `call` (`Call`'s fields) to `episode_id`'s file, in one write, flushed."""
        previous = self._prompts.pop(episode_id, None)  # back only once this call's line is written
        line = codec.dumps(self._shortened(previous, call))
        file = self._files.pop(episode_id, None)
        if file is None:
            file = open(self.directory / file_name(episode_id), "ab")
            while len(self._files) >= OPEN_FILES:
                closed, oldest = self._files.popitem(last=False)
                oldest.close()
                self._prompts.pop(closed, None)
        self._files[episode_id] = file  # most recent last
        file.write(line + b"\n")
        file.flush()
        # Only a written line may be a later prompt's base: after a failed write the next prompt is whole.
        prompt = call.get("prompt_token_ids")
        if isinstance(prompt, list):
            self._prompts[episode_id] = (call["id"], prompt)

    def _shortened(self, previous: tuple[str, list[int]] | None, call: dict[str, Any]) -> dict[str, Any]:
        """`call` with its prompt as a tail of the episode's `previous` prompt, when it extends it."""
        prompt = call.get("prompt_token_ids")
        if not isinstance(prompt, list):
            return call
        if previous is None or prompt[: len(previous[1])] != previous[1]:
            return call
        short = {k: v for k, v in call.items() if k != "prompt_token_ids"}
        return short | {"prompt_from": previous[0], "prompt_tail": prompt[len(previous[1]) :]}

    def recorded(self, episode_id: str | None) -> int:
        """How many calls `episode_id`'s file already holds (a restarted gateway numbers on from there)."""
        path = self.directory / file_name(episode_id)
        if not path.exists():
            return 0
        with open(path, "rb") as file:
            return sum(1 for line in file if line.endswith(b"\n"))

    def close(self) -> None:
        while self._files:
            self._files.popitem()[1].close()
        self._prompts.clear()


def read_calls(directory: str | Path) -> dict[str | None, list[Call]]:
    """Every recorded call under `directory`, by episode id, in turn order. A line that is not
    JSON (cut short) is skipped."""
    episodes: dict[str | None, list[Call]] = defaultdict(list)
    for path in sorted(Path(directory).glob("*.jsonl")):
        prompts: dict[Any, list[int] | None] = {}  # by call id, for the prompts written as tails
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "prompt_from" in record:  # a tail: its base is an earlier line (lost, cut short: unknown)
                base = prompts.get(record["prompt_from"])
                record["prompt_token_ids"] = None if base is None else base + record.get("prompt_tail", [])
            call = Call.model_validate(record)
            prompts[call.id] = call.prompt_token_ids
            episodes[call.episode_id].append(call)
    return {episode: sorted(calls, key=lambda c: c.turn) for episode, calls in episodes.items()}
