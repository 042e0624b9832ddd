"""The defaults every episode is built with, whichever door drives it.

Layer: bottom (no imports). The in-process door and the server both build `Episode`s from these,
so a hung tool times out the same way in-process as over HTTP (issue #22: the in-process door had
no call timeout while the server's was 300 s).
"""

from __future__ import annotations

CALL_TIMEOUT = 300.0
"""Seconds a tool call may run before it fails (an environment class may set its own)."""

CLOSE_WAIT = 10.0
"""Seconds `close()` (and so a server's shutdown) waits for a running step, and for the
environment's own `close()`: well inside the 30 s grace uvicorn and Kubernetes give a process."""
