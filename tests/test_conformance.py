"""The official MCP conformance suite against every shipped server, over streamable HTTP.

`@modelcontextprotocol/conformance` is pinned in `tests/conformance/package-lock.json`
(`npm ci --prefix tests/conformance`; 0.1.13, the last release that runs on Node 20). Each
server must pass the scenarios listed in `REQUIRED`: the ones every mcpgym server passed
before it had a task catalog, plus `resources-list` and `prompts-list`. The rest exercise
fixtures a test server is asked to implement (`test_simple_text`, sampling, ...) and do not
apply to environments. A missing node or node_modules fails the test, never skips it.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import shutil
from pathlib import Path

import anyio
import pytest

from mcpgym import servers
from tests.conftest import module_over_http

pytestmark = [pytest.mark.interop, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "tests" / "conformance" / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSTALL = "install the pinned suite from the repo root with `npm ci --prefix tests/conformance`"
REQUIRED = (
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "resources-list",
    "prompts-list",
)


def _servers() -> list[str]:
    """Every `servers.NAME` package with a `__main__` (what `python -m mcpgym.servers.NAME --http` runs)."""
    found = [f"mcpgym.servers.{m.name}" for m in pkgutil.iter_modules(servers.__path__) if m.ispkg]
    return [name for name in found if importlib.util.find_spec(f"{name}.__main__") is not None]


def test_every_server_is_covered() -> None:
    assert {"mcpgym.servers.echo", "mcpgym.servers.blackjack", "mcpgym.servers.coding"} <= set(_servers())


@pytest.mark.parametrize("module", _servers())
async def test_server_passes_the_conformance_scenarios(module: str, tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail(f"node is not on PATH: install Node.js 20+, then {INSTALL}")
    if not SUITE.is_file():
        pytest.fail(f"{SUITE.relative_to(ROOT)} is missing: {INSTALL}")
    async with module_over_http(module) as url:
        with anyio.fail_after(120):
            done = await anyio.run_process([node, str(SUITE), "server", "--url", url], cwd=tmp_path, check=False)
    out = done.stdout.decode(errors="replace")
    passed = set(re.findall(r"^✓ (\S+):", out, re.M))
    failed = set(re.findall(r"^✗ (\S+):", out, re.M))
    assert passed | failed, f"no summary in the suite's output:\n{out}\n{done.stderr.decode(errors='replace')}"
    missing = [s for s in REQUIRED if s not in passed]
    assert not missing, f"{module} fails conformance scenarios {missing}:\n{out}"
