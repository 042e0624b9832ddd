"""Request checks and responses shared by the play and view pages.

Layer: bottom of mcpgym.web (imports the SDK's transport-security check and nothing of ours).
The page's routes get exactly the Host/Origin validation `/mcp` gets (the SDK's own checker, fed
the same settings); POSTs must be JSON (a cross-site form cannot send that without a CORS
preflight, which nothing here answers) and are read up to the body limit. Every response carries
a Content-Security-Policy that forbids inline script, so even a rendering bug cannot run markup
a tool returned.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response

STATIC = Path(__file__).parent / "static"

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "media-src data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

Endpoint = Callable[[Request], Awaitable[Response]]


class BadRequest(Exception):
    """A request the page API refuses; `status` and `message` become the JSON error answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class Guard:
    """Wraps page endpoints in the checks above."""

    def __init__(self, security: TransportSecuritySettings, max_body_bytes: int) -> None:
        self._checker = TransportSecurityMiddleware(security)
        self.max_body_bytes = max_body_bytes

    def __call__(self, endpoint: Endpoint) -> Endpoint:
        async def guarded(request: Request) -> Response:
            refused = await self._checker.validate_request(request, is_post=request.method == "POST")
            if refused is not None:
                response = refused
            else:
                try:
                    response = await endpoint(request)
                except BadRequest as exc:
                    response = JSONResponse({"error": exc.message}, status_code=exc.status)
            response.headers.update(SECURITY_HEADERS)
            return response

        return guarded

    async def json_body(self, request: Request) -> dict[str, Any]:
        """The request's JSON object, read up to the body limit."""
        body = bytearray()
        # aclosing: a body refused midway closes the stream now, not whenever the loop's
        # async-generator finaliser gets to it.
        async with contextlib.aclosing(request.stream()) as chunks:
            async for chunk in chunks:
                body += chunk
                if len(body) > self.max_body_bytes:
                    raise BadRequest(f"request body over {self.max_body_bytes} bytes (--max-body-bytes)", 413)
        try:
            value = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadRequest(f"request body is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise BadRequest("request body must be a JSON object")
        return value


def static_file(name: str, media_type: str | None = None) -> Endpoint:
    """An endpoint answering one file from the package's static/ folder."""
    path = STATIC / name

    async def endpoint(request: Request) -> Response:
        return FileResponse(path, media_type=media_type)

    return endpoint


async def static_asset(request: Request) -> Response:
    """`/…/static/{name}`: only the files shipped in static/, never a path outside it."""
    name = request.path_params["name"]
    path = STATIC / name
    if "/" in name or name.startswith(".") or not path.is_file():
        raise BadRequest("no such file", 404)
    return FileResponse(path)
