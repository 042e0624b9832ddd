"""Serve an Environment as an MCP server (stdio or streamable HTTP) on the official SDK.

Layer: transport. Builds one low-level `mcp.server.Server` whose `tools/list` and
`tools/call` handlers, and whose Gym control plane (an SDK `Extension` contributing the
`mcpgym/*` request methods), only look up an episode in the registry and drive the episode
core. See rfcs/0001-protocol-mapping.md.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.stdio import stdio_server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp

from mcpgym._core.batch import STEPS_METHOD, StepsParams, StepsResult
from mcpgym._core.errors import INVALID_PARAMS, MCPError
from mcpgym._core.protocol import (
    CLOSE_METHOD,
    EPISODE_HEADER,
    EPISODE_KEY,
    EXTENSION_ID,
    RESET_METHOD,
    STATE_METHOD,
    CloseResult,
    EpisodeParams,
    ResetParams,
    ResetResult,
    StateResult,
    is_valid_episode_id,
)
from mcpgym._core.tasks import TASK_STATS_METHOD, TaskStatsParams, TaskStatsResult
from mcpgym._episode.catalog import Task
from mcpgym._episode.config import CALL_TIMEOUT
from mcpgym._episode.environment import Environment, resolve_factory
from mcpgym._episode.episode import Episode, unknown_tool
from mcpgym._episode.host import Host
from mcpgym._episode.peer import PEER
from mcpgym._episode.sampler import SamplerConfig
from mcpgym._episode.tools import tools_ready
from mcpgym._recording.recording import Recorder
from mcpgym._server.batch import run_steps
from mcpgym._server.catalog import CatalogHandlers
from mcpgym._server.curriculum import TASK_INFO_KEY, Curriculum, task_info
from mcpgym._server.http import DEFAULT_MAX_BODY_BYTES, http_app, serve_http
from mcpgym._server.http_guard import DEFAULT_HEADER_TIMEOUT
from mcpgym._server.passthrough import PassthroughHandlers
from mcpgym._server.peer import SessionPeer, set_level
from mcpgym._server.registry import EpisodeRegistry

Ctx = ServerRequestContext[Any, Any]
logger = logging.getLogger("mcpgym")

_HOST = "mcpgym.host"
"""The lifespan state key of the `Host` that serves a connection's episodes."""


def _host_of(ctx: Ctx) -> Host | None:
    """The host of the lifespan serving this request (each in-memory client runs its own, and
    its episodes must not be hosted by another client's, which may end first)."""
    state = getattr(ctx, "lifespan_context", None)
    host = state.get(_HOST) if isinstance(state, dict) else None
    return host if isinstance(host, Host) else None


_IMPLICIT = "mcpgym.implicit-episode"
_SESSION_HEADER = "mcp-session-id"


class GymExtension(Extension):
    """The Gym control plane as an SDK extension: request methods, never tools."""

    identifier = EXTENSION_ID

    def __init__(self, registry: EpisodeRegistry, curriculum: Curriculum) -> None:
        self.registry = registry
        self.curriculum = curriculum

    def settings(self) -> dict[str, Any]:
        methods = [RESET_METHOD, STATE_METHOD, CLOSE_METHOD, STEPS_METHOD, TASK_STATS_METHOD]
        return {"methods": methods, "episodeMetaKey": EPISODE_KEY, "sampler": self.curriculum.config.sampler}

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding(RESET_METHOD, ResetParams, self._reset),
            MethodBinding(STATE_METHOD, EpisodeParams, self._state),
            MethodBinding(CLOSE_METHOD, EpisodeParams, self._close),
            MethodBinding(STEPS_METHOD, StepsParams, self._steps),
            MethodBinding(TASK_STATS_METHOD, TaskStatsParams, self._task_stats),
        )

    async def _reset(self, ctx: Ctx, params: ResetParams) -> ResetResult:
        episode_id, owner = require_episode_id(ctx), session_of(ctx)
        seed, options, task = await self.curriculum.resolve(params.seed, params.options)
        with talking_back(ctx):
            result = await self.registry.reset(
                episode_id,
                seed,
                options,
                params.previous,
                owner=owner,
                host=_host_of(ctx),
                task_id=task.id if task is not None else None,
            )
        if task is not None:  # the client learns which task it plays (it may not have chosen it)
            result.info[TASK_INFO_KEY] = task_info(task)
        # Bound to `owner` (an HTTP session nobody else may use), it ends with that session:
        # `end_session` when the client deletes it, the idle expiry when it just goes away.
        return result

    async def _state(self, ctx: Ctx, params: EpisodeParams) -> StateResult:
        return StateResult(state=self.registry.get(require_episode_id(ctx), session_of(ctx)).state())

    async def _close(self, ctx: Ctx, params: EpisodeParams) -> CloseResult:
        return CloseResult(state=await self.registry.close(require_episode_id(ctx), session_of(ctx)))

    async def _steps(self, ctx: Ctx, params: StepsParams) -> StepsResult:
        return await run_steps(self.registry, params, session_of(ctx))

    async def _task_stats(self, ctx: Ctx, params: TaskStatsParams) -> TaskStatsResult:
        return await self.curriculum.stats(ctx.session.client_capabilities)


class GymServer:
    """An environment class served over MCP: `run_stdio()`, `http_app()` or `serve_http()`."""

    def __init__(
        self,
        env: type[Environment] | functools.partial[Any],
        *,
        name: str | None = None,
        max_episodes: int | None = 10_000,
        idle_timeout: float | None = 900.0,
        record: str | Path | None = None,
        call_timeout: float | None = CALL_TIMEOUT,
        reveal_rewards: bool = True,
        curriculum: SamplerConfig | None = None,
    ) -> None:
        """Serve `env` (a class, or `functools.partial(Class, ...)`), one instance per episode.

        `max_episodes` bounds live episodes (past it reset is refused); `idle_timeout` closes
        episodes untouched for that long; `record` writes every episode under that directory;
        `call_timeout` fails a tool call that runs longer (unless the class sets its own);
        `reveal_rewards=False` keeps the reward stamp out of results sent to plain agents
        (implicit episodes: still recorded), for harnesses that must not show the model rewards.
        `curriculum` chooses the task sampler for resets that ask for a drawn task (uniform by
        default; `SamplerConfig(sampler="learnability")`, docs/curriculum.md).
        """
        env_cls, factory = resolve_factory(env)
        self.env_cls = env_cls
        recorder = Recorder(record) if record is not None else None
        self.registry = EpisodeRegistry(
            factory, max_episodes=max_episodes, idle_timeout=idle_timeout, recorder=recorder, call_timeout=call_timeout
        )
        self.reveal_rewards = reveal_rewards
        self._lifespans = 0
        self._stdio = False
        self._sessions: dict[str, dict[str, Any]] = {}
        """Per HTTP session: its implicit episode (and the lock that starts it), until it ends."""
        self._tools: types.ListToolsResult | None = None  # on first use: a wrapped class's are listed late
        self.catalog = CatalogHandlers(factory, self._start_task)
        self.registry.tasks = self._catalog_tasks
        catalog = self.catalog.handlers()
        listing = getattr(env_cls, "upstream_listing", None)
        if listing is not None:  # a wrapped server's resources and prompts, beside the catalog
            catalog = PassthroughHandlers(self.catalog, listing, self._episode_of).handlers()
        self.mcp: Server[Any] = Server(
            name or env_cls.__name__,
            version=_version(),
            instructions=env_cls.instructions or inspect.getdoc(env_cls),
            lifespan=self._lifespan,
            get_tool_input_schema=self._input_schema,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            **catalog,
        )
        self.curriculum = Curriculum(self.catalog, curriculum or SamplerConfig(), env_cls.max_reward)
        self.registry.on_close = self.curriculum.observe
        self.extension = GymExtension(self.registry, self.curriculum)
        for binding in self.extension.methods():
            self.mcp.add_request_handler(binding.method, binding.params_type, binding.handler)
        if listing is not None:
            # An environment relaying a wrapped server's log messages honours the level set.
            self.mcp.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
        self.mcp.extensions[self.extension.identifier] = self.extension.settings()

    @contextlib.asynccontextmanager
    async def _lifespan(self, _server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        # The SDK enters a server's lifespan once per in-memory client (and once per stdio run or
        # HTTP app), so entries overlap: each runs an expiry loop (idempotent), and only the last
        # one out closes the episodes that are left.
        # Each entry is also a `Host` (what episodes hold across requests runs in its task group);
        # the last one out closes the episodes before its host goes.
        # A tool table filled late (a wrapped server's) is filled here, off the event loop,
        # so no request handler's read of it blocks the loop.
        await tools_ready(self.env_cls)
        async with anyio.create_task_group() as tg, anyio.create_task_group() as held:
            tg.start_soon(self.registry.run_expiry)
            host = Host(held)
            await _start_hosting(self.env_cls, host)
            self.registry.hosts.append(host)
            self._lifespans += 1
            # Requests of this lifespan find their host here; its client's implicit episode
            # (stdio, in-memory: one lifespan per client) is kept here too, and ends with it.
            state: dict[str, Any] = {_HOST: host}
            try:
                yield state
            finally:
                self._lifespans -= 1
                with anyio.CancelScope(shield=True):
                    await self._close_implicit(state)
                if not self._lifespans:
                    with anyio.CancelScope(shield=True):
                        await self.registry.close_all()
                self.registry.hosts.remove(host)
                await host.aclose()
                tg.cancel_scope.cancel()

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        spec = self.env_cls.__mcpgym_tools__.get(name)
        return None if spec is None else spec.definition.input_schema

    async def _list_tools(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        if self._tools is None:
            await tools_ready(self.env_cls)
            self._tools = types.ListToolsResult(tools=[s.definition for s in self.env_cls.__mcpgym_tools__.values()])
        tools = self.env_cls.tools_for(ctx.session.client_capabilities)
        if tools is self.env_cls.__mcpgym_tools__:
            return self._tools
        return types.ListToolsResult(tools=[spec.definition for spec in tools.values()])

    async def _call_tool(self, ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        with talking_back(ctx):
            return await self._call(ctx, params)

    async def _call(self, ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        episode_id = episode_id_of(ctx)
        if episode_id is not None:
            return await self.registry.get(episode_id, session_of(ctx)).call(params.name, params.arguments)
        await tools_ready(self.env_cls)
        tools = self.env_cls.tools_for(ctx.session.client_capabilities)
        if params.name not in tools:
            raise unknown_tool(params.name, tools)  # before opening an episode for it
        async with self._callers_episode(ctx) as episode:
            return await self._play(episode, params)

    async def _play(self, episode: Episode, params: types.CallToolRequestParams) -> types.CallToolResult:
        if self.reveal_rewards:
            return await episode.call(params.name, params.arguments)
        return (await episode.step(params.name, params.arguments)).observation

    @contextlib.asynccontextmanager
    async def _callers_episode(self, ctx: Ctx) -> AsyncIterator[Episode]:
        """The caller's implicit episode; a 2026-07-28 HTTP exchange is its own connection, so
        there it is a one-request episode, closed as the request is answered."""
        state = self._implicit_state(ctx)
        if state is not None:
            yield await self._implicit(ctx, state)
            return
        episode = await self.registry.open_implicit(host=_host_of(ctx))
        try:
            yield episode
        finally:
            with anyio.CancelScope(shield=True):
                await self.registry.close(episode.id)

    @contextlib.asynccontextmanager
    async def _episode_of(self, ctx: Ctx) -> AsyncIterator[Episode]:
        """The episode a request names, or the caller's own (for a wrapped server's resources
        and prompts), which may talk back to the caller while the request is served."""
        with talking_back(ctx):
            episode_id = episode_id_of(ctx)
            if episode_id is not None:
                yield self.registry.get(episode_id, session_of(ctx))
                return
            async with self._callers_episode(ctx) as episode:
                yield episode

    async def _start_task(self, ctx: Ctx, task: Task) -> None:
        """A client that picked a task's prompt and never resets (Claude Desktop's prompt menu)
        plays that task: its own episode restarts on it. Trainers, who name episodes, are left
        alone, and so is a one-request connection (no later call of its could play the task)."""
        state = self._implicit_state(ctx) if episode_id_of(ctx) is None else None
        if state is not None:
            await self._implicit(ctx, state, task)

    def _implicit_state(self, ctx: Ctx) -> dict[str, Any] | None:
        """Where the caller's implicit episode is kept, for agents that never reset.

        A stdio server serves one client for its whole life, so there the process (the lifespan
        of its one run) is the episode, whichever protocol revision the client speaks. Otherwise
        it is the connection: an in-memory client's lifespan, or the HTTP session, on the
        session-based wire; on the 2026-07-28 wire a connection is one request (None: a
        one-call episode)."""
        if ctx.request is None and (self._stdio or ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS):
            state = ctx.lifespan_context
            return state if isinstance(state, dict) else None
        session = session_of(ctx)
        if session is None:
            return None
        if session not in self._sessions and len(self._sessions) > 2 * len(self.registry) + 64:
            self._forget_ended_sessions()
        return self._sessions.setdefault(session, {})

    def _forget_ended_sessions(self) -> None:
        # A session the SDK expired (its client went away without deleting it) is never seen
        # again, and its implicit episode was closed by the idle expiry: drop what is left of
        # it, now and then, so the table stays about as large as the live episodes.
        for session, state in list(self._sessions.items()):
            episode: Episode | None = state.get(_IMPLICIT)
            lock: anyio.Lock | None = state.get(_IMPLICIT + ".lock")
            if episode is not None and episode.closed and (lock is None or not lock.locked()):
                del self._sessions[session]

    async def _catalog_tasks(self) -> list[Task]:
        return (await self.catalog.catalog()).tasks

    async def _implicit(self, ctx: Ctx, state: dict[str, Any], task: Task | None = None) -> Episode:
        """The caller's implicit episode (started on `task`, when one is given)."""
        lock: anyio.Lock = state.setdefault(_IMPLICIT + ".lock", anyio.Lock())
        async with lock:
            episode: Episode | None = state.get(_IMPLICIT)
            if task is not None and episode is not None:
                await self.registry.close(episode.id)
            if task is not None or episode is None or episode.closed:
                seed, options = (task.seed, dict(task.options)) if task is not None else (None, None)
                task_id = task.id if task is not None else None
                episode = await self.registry.open_implicit(
                    seed, options, _host_of(ctx), task_id, owner=session_of(ctx)
                )
                state[_IMPLICIT] = episode
            return episode

    async def _close_implicit(self, state: dict[str, Any]) -> None:
        episode: Episode | None = state.get(_IMPLICIT)
        if episode is not None:
            await self.registry.close(episode.id, episode.owner)

    async def end_session(self, session: str) -> None:
        """The HTTP session `session` ended (its client deleted it): close what it held."""
        self._sessions.pop(session, None)
        await self.registry.close_owned(session)

    async def run_stdio(self) -> None:
        """Serve one client over this process's stdin/stdout (the lifespan closes its episodes)."""
        self._stdio = True
        async with stdio_server() as (read, write):
            await self.mcp.run(read, write, self.mcp.create_initialization_options())

    def http_app(self, **options: Any) -> ASGIApp:
        """The streamable-HTTP ASGI app (options: see `mcpgym._server.http.http_app`)."""
        return http_app(self, **options)

    async def serve_http(
        self,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        on_ready: Callable[[str], None] | None = None,
        header_timeout: float = DEFAULT_HEADER_TIMEOUT,
        max_connections: int | None = None,
        **app_options: Any,
    ) -> int | None:
        """Serve streamable HTTP at http://HOST:PORT/mcp until cancelled or signalled (returns the
        signal); `on_ready(base_url)` runs once bound (`port=0` picks a free port). A request head
        must arrive within `header_timeout` s; at most `max_connections` are open (see `_http_guard`)."""
        app = self.http_app(host=host, **app_options)
        # A WebSocket frame (`openenv=True`) is bounded like a request body.
        ws_max_size = app_options.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)
        return await serve_http(
            app,
            host,
            port,
            on_ready=on_ready,
            header_timeout=header_timeout,
            max_connections=max_connections,
            ws_max_size=ws_max_size,
        )


async def _start_hosting(env_cls: type[Environment], host: Host) -> None:
    try:
        await env_cls.start_hosting(host)
    except Exception:
        logger.exception("%s.start_hosting failed; the server starts all the same", env_cls.__name__)


def _version() -> str:
    from mcpgym import __version__

    return f"mcpgym {__version__}"


@contextlib.contextmanager
def talking_back(ctx: Ctx) -> Iterator[None]:
    """While a request is served, the episode may talk back to its client (`_episode.peer`)."""
    peer = SessionPeer(ctx)
    token = PEER.set(peer)
    try:
        yield
    finally:
        PEER.reset(token)
        peer.answered()


def session_of(ctx: Ctx) -> str | None:
    """The HTTP session a request arrived on, to bind episodes to their caller: its
    `Mcp-Session-Id` on the session-based wire, where the SDK routes a request to that session
    only after checking that it exists and was opened with the same credential. None off HTTP,
    and on the 2026-07-28 wire, where the header routes nothing and so proves nothing."""
    if ctx.request is None or ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    value = getattr(ctx.request, "headers", {}).get(_SESSION_HEADER)
    return value if isinstance(value, str) else None


def episode_id_of(ctx: Ctx) -> str | None:
    """The episode a request names: `_meta[EPISODE_KEY]`, else the HTTP `Mcpgym-Episode` header."""
    value: object = ctx.meta.get(EPISODE_KEY) if ctx.meta else None
    if value is None and ctx.request is not None:
        value = getattr(ctx.request, "headers", {}).get(EPISODE_HEADER)
    if value is None:
        return None
    if not is_valid_episode_id(value):
        raise MCPError(
            INVALID_PARAMS, f"Malformed episode id in _meta[{EPISODE_KEY!r}]: expected 22-128 URL-safe characters"
        )
    assert isinstance(value, str)
    return value


def require_episode_id(ctx: Ctx) -> str:
    episode_id = episode_id_of(ctx)
    if episode_id is None:
        raise MCPError(INVALID_PARAMS, f"mcpgym control requests name their episode in _meta[{EPISODE_KEY!r}]")
    return episode_id
