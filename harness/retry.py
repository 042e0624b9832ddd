"""Retrying transient failures: exponential backoff with jitter and a cap.

Layer: utility, no I/O of its own. Used by `OpenAIPolicy`; usable by any custom policy.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Up to `attempts` tries; before try n+1 wait a random time in [delay/2, delay] where
    delay = min(cap, base * 2**n). Jitter spreads the retries of many concurrent episodes that
    failed together (an endpoint restart) instead of letting them stampede back in lockstep."""

    attempts: int = 6
    base: float = 0.5
    cap: float = 20.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"Backoff needs attempts >= 1 (the first try counts), got {self.attempts}")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (0-based). A server's Retry-After wins
        when it asks for longer, but never beyond the cap."""
        ceiling = min(self.cap, self.base * 2**retry)
        delay = random.uniform(ceiling / 2, ceiling)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.cap))
        return delay


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header given in seconds (the HTTP-date form is rare from model servers)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
