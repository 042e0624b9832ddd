"""`mcpgym view RUNS`: a read-only page over recorded runs.

Layer: an HTTP app of its own (no environment, no episode core): it only reads files through
`RunIndex`. Every route is a GET that changes nothing; the index is built off the event loop.
Same security as a served environment: loopback by default, Host/Origin checks, optional token.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from mcpgym._server.http import DEFAULT_MAX_BODY_BYTES, BearerAuth, security_settings
from mcpgym.web._charts import Charts
from mcpgym.web._guard import BadRequest, Guard, static_asset, static_file
from mcpgym.web._runs import RunIndex

VIEW_PATH = "/view"


def is_public(path: str) -> bool:
    return path in ("/", VIEW_PATH, f"{VIEW_PATH}/") or path.startswith(f"{VIEW_PATH}/static/")


class Viewer:
    def __init__(self, paths: Sequence[str | Path]) -> None:
        self.index = RunIndex([Path(p) for p in paths])
        self.lock = anyio.Lock()

    async def runs(self, request: Request) -> Response:
        async with self.lock:  # one re-scan at a time; the others wait and reuse it
            started = time.perf_counter()
            rows = await anyio.to_thread.run_sync(self.index.refresh)
            seconds = time.perf_counter() - started
        return JSONResponse(
            {"sources": [str(p) for p in self.index.paths], "episodes": rows, "index_seconds": round(seconds, 3)}
        )

    async def episode(self, request: Request) -> Response:
        if not self.index.rows():  # asked before the table was loaded (a link to an episode)
            async with self.lock:
                await anyio.to_thread.run_sync(self.index.refresh)
        try:
            n = int(request.path_params["n"])
            if n < 0:
                raise IndexError(n)
            row = self.index.rows()[n]
            return JSONResponse({"summary": row, **await anyio.to_thread.run_sync(self.index.episode, n)})
        except (ValueError, IndexError):
            raise BadRequest("no such episode (reload the page: the runs may have changed)", 404) from None


def view_app(
    paths: Sequence[str | Path],
    *,
    host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] = (),
    token: str | None = None,
) -> ASGIApp:
    """The viewer's ASGI app over the recordings at `paths` (directories or JSONL files)."""
    viewer = Viewer(paths)
    guard = Guard(security_settings(host, allowed_hosts), DEFAULT_MAX_BODY_BYTES)

    async def home(request: Request) -> Response:
        return RedirectResponse(VIEW_PATH)

    app = Starlette(
        routes=[
            Route("/", home, methods=["GET"]),
            Route(VIEW_PATH, guard(static_file("view.html")), methods=["GET"]),
            Route(f"{VIEW_PATH}/", guard(static_file("view.html")), methods=["GET"]),
            Route(f"{VIEW_PATH}/static/{{name}}", guard(static_asset), methods=["GET"]),
            Route(f"{VIEW_PATH}/api/runs", guard(viewer.runs), methods=["GET"]),
            Route(f"{VIEW_PATH}/api/episodes/{{n}}", guard(viewer.episode), methods=["GET"]),
            Route(f"{VIEW_PATH}/api/charts", guard(Charts(viewer.index, viewer.lock)), methods=["GET"]),
        ],
        middleware=[Middleware(GZipMiddleware, minimum_size=4096)],
    )
    return BearerAuth(app, token, public=is_public) if token else app
