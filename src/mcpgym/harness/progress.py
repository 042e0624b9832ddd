"""A one-line progress display on stderr: episodes done, running mean reward, failures, tokens.

Layer: presentation, no dependency: on a terminal the line is redrawn in place (`\\r`); in a
log file (not a tty) one line is printed per finished episode, so logs stay readable.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Self, TextIO

from mcpgym.harness.types import Trajectory


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.inline = self.stream.isatty()
        self.started = time.monotonic()
        self.done = self.failed = self.tokens = 0
        self.reward_sum = 0.0

    def update(self, trajectory: Trajectory) -> None:
        self.done += 1
        self.tokens += trajectory.usage.total_tokens
        if trajectory.failed:
            self.failed += 1
        else:
            self.reward_sum += trajectory.reward
        end = "" if self.inline else "\n"
        self.stream.write(("\r\x1b[K" if self.inline else "") + self.line() + end)
        self.stream.flush()

    def line(self) -> str:
        ok = self.done - self.failed
        mean = f"{self.reward_sum / ok:.3f}" if ok else "-"
        elapsed = time.monotonic() - self.started
        return (
            f"rollout {self.done}/{self.total}  mean reward {mean}  failed {self.failed}  "
            f"tokens {self.tokens:,}  {elapsed:.1f}s"
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.inline and self.done:
            self.stream.write("\n")
            self.stream.flush()
