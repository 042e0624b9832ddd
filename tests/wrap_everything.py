"""The MCP reference server (`@modelcontextprotocol/server-everything`, pinned by
tests/everything/package-lock.json) wrapped, as a module-level class every door reaches
(`mcpgym serve tests.wrap_everything:Everything` in a child process included)."""

from __future__ import annotations

from pathlib import Path

import mcpgym

EVERYTHING = Path(__file__).resolve().parent / "everything" / "node_modules" / ".bin" / "mcp-server-everything"

if not EVERYTHING.exists():  # fail (never skip) when the set-up did not install it
    raise RuntimeError("run: npm ci --prefix tests/everything (scripts/setup.sh --test does)")

Everything = mcpgym.wrap([str(EVERYTHING), "stdio"], name="Everything")
