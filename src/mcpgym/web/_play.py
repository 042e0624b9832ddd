"""`/web`: play an environment in the browser, through the server's own episode core.

Layer: a door on the HTTP app (imported by `mcpgym._server.http` only when `--web` is given). Each
page episode is an explicit episode in the server's `EpisodeRegistry`, minted by the page as
an RL client mints its ids and owned by `WEB_OWNER`, so no MCP session can drive it and the
page cannot drive theirs. A reset or step is an ordinary POST that runs `registry.reset` /
`Episode.call`, exactly what `mcpgym/reset` and `tools/call` run; its outcome is answered to
the caller and published to the episode's feed, which every page watching that episode
receives over Server-Sent Events (`_live`). Nothing here validates, calls or accounts a step.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from mcpgym._core.errors import MCPError
from mcpgym._core.protocol import is_valid_episode_id
from mcpgym._episode.episode import Episode, unknown_episode
from mcpgym.web._guard import BadRequest, Guard, static_asset, static_file
from mcpgym.web._live import Hub

if TYPE_CHECKING:
    from mcpgym._server.gym_server import GymServer

WEB_PATH = "/web"
WEB_OWNER = "mcpgym-web"
"""The registry owner of page episodes (MCP session ids are never this)."""
PUBLIC_PATHS = (WEB_PATH, f"{WEB_PATH}/", f"{WEB_PATH}/static/")
"""The page's shell: served without the bearer token (the page asks for it and sends it with
every API request; a browser cannot add a header to a navigation)."""


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS[:2] or path.startswith(PUBLIC_PATHS[2])


class PlayPage:
    """The `/web` routes of one served environment, and the hub of its live feeds."""

    def __init__(self, gym: GymServer, security: TransportSecuritySettings, max_body_bytes: int) -> None:
        self.gym = gym
        self.hub = Hub()
        self.guard = Guard(security, max_body_bytes)

    def routes(self) -> list[Route]:
        g = self.guard
        return [
            Route(WEB_PATH, g(static_file("play.html")), methods=["GET"]),
            Route(f"{WEB_PATH}/", g(static_file("play.html")), methods=["GET"]),
            Route(f"{WEB_PATH}/static/{{name}}", g(static_asset), methods=["GET"]),
            Route(f"{WEB_PATH}/api/info", g(self.info), methods=["GET"]),
            Route(f"{WEB_PATH}/api/reset", g(self.reset), methods=["POST"]),
            Route(f"{WEB_PATH}/api/step", g(self.step), methods=["POST"]),
            Route(f"{WEB_PATH}/api/episodes/{{episode_id}}/state", g(self.state), methods=["GET"]),
            Route(f"{WEB_PATH}/api/episodes/{{episode_id}}/events", g(self.events), methods=["GET"]),
        ]

    async def info(self, request: Request) -> Response:
        cls = self.gym.env_cls
        tools = [
            s.definition.model_dump(mode="json", by_alias=True, exclude_none=True)
            for s in cls.__mcpgym_tools__.values()
        ]
        return JSONResponse(
            {
                "environment": cls.__name__,
                "description": cls.instructions or inspect.getdoc(cls) or "",
                "max_steps": cls.max_steps,
                "tools": tools,
            }
        )

    async def reset(self, request: Request) -> Response:
        body = await self.guard.json_body(request)
        episode_id = _episode_id(body.get("episode_id"))
        seed, options, previous = body.get("seed"), body.get("options"), body.get("previous")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise BadRequest("seed must be an integer or null")
        if options is not None and not isinstance(options, dict):
            raise BadRequest("options must be a JSON object or null")
        if previous is not None:
            previous = _episode_id(previous)
            if not self._is_own(previous):
                previous = None  # not the page's to close
        if not self._is_own(episode_id, missing_ok=True):
            raise BadRequest("That episode id is taken: mint a fresh one for a new episode.")
        try:
            result = await self.gym.registry.reset(episode_id, seed, options, previous, owner=WEB_OWNER)
            state = self._own(episode_id).state()
        except MCPError as exc:
            raise BadRequest(exc.message) from None
        if previous is not None and previous != episode_id:
            self.hub.feed(previous).publish({"kind": "closed", "episode_id": previous, "next": episode_id})
            self.hub.drop(previous)
        self.hub.drop(episode_id)  # a reset of a live id starts its history over
        event = {
            "kind": "reset",
            "episode_id": episode_id,
            "seed": seed,
            "options": options,
            "observation": result.observation,
            "state": _dump(state),
        }
        return JSONResponse(self.hub.feed(episode_id).publish(event))

    async def step(self, request: Request) -> Response:
        body = await self.guard.json_body(request)
        episode_id = _episode_id(body.get("episode_id"))
        tool, arguments = body.get("tool"), body.get("arguments", {})
        if not isinstance(tool, str):
            raise BadRequest("tool must be a tool name")
        if not isinstance(arguments, dict):
            raise BadRequest("arguments must be a JSON object")
        try:
            episode = self._own(episode_id)
            result = await episode.call(tool, arguments)
            state = episode.state()
        except MCPError as exc:
            raise BadRequest(exc.message) from None
        event = {
            "kind": "step",
            "episode_id": episode_id,
            "tool": tool,
            "arguments": arguments,
            "result": _dump(result),
            "state": _dump(state),
        }
        return JSONResponse(self.hub.feed(episode_id).publish(event))

    async def state(self, request: Request) -> Response:
        episode_id = _episode_id(request.path_params["episode_id"])
        try:
            return JSONResponse(_dump(self._own(episode_id).state()))
        except MCPError as exc:
            raise BadRequest(exc.message, 404) from None

    async def events(self, request: Request) -> Response:
        episode_id = _episode_id(request.path_params["episode_id"])
        if not self.hub.has(episode_id) and not self._is_own(episode_id):
            # Nothing to follow (closed, expired, or from before a restart): say so, once.
            raise BadRequest("Unknown episode: reset to start a new one.", 404)
        after = request.headers.get("last-event-id") or request.query_params.get("after") or "-1"
        try:
            seq = int(after)
        except ValueError:
            raise BadRequest("Last-Event-ID must be an event number") from None
        return StreamingResponse(
            self.hub.stream(episode_id, seq),
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},  # nginx: pass events through as they come
        )

    def _is_own(self, episode_id: str, *, missing_ok: bool = False) -> bool:
        episode = self.gym.registry.get(episode_id, WEB_OWNER, missing_ok=True)
        return missing_ok if episode is None else episode.owner == WEB_OWNER

    def _own(self, episode_id: str) -> Episode:
        """A page episode. The registry lets anyone holding the id use an episode that has no
        owner (a stateless MCP client's); the page drives only its own."""
        episode = self.gym.registry.get(episode_id, WEB_OWNER)
        if episode.owner != WEB_OWNER:
            raise unknown_episode()
        return episode


def _episode_id(value: object) -> str:
    if not is_valid_episode_id(value):
        raise BadRequest("episode_id must be 22-128 URL-safe characters")
    assert isinstance(value, str)
    return value


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
