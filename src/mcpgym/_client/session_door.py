"""`SessionDoor`: the door primitives over one MCP `ClientSession`, whatever carries it.

Layer: client door. The one reading of the Gym protocol on the client side (rfcs/0001): the
control plane's requests, the episode id in `_meta`, a `tools/call` result read as a step, an
unknown tool's counted -32602 read as the step it was, the `HEADER_MISMATCH` retry, and the one
`tools/list` / `prompts/list` pagination loop. It neither opens nor closes the session: the lean
HTTP connection a process shares (`mcpgym._client.lean`) and an `mcp.Client` over stdio, memory
or a handshake-era server (`mcpgym._client.mcp_door`) own theirs and lend it here.

Holds no episode: every episode primitive takes the id, so one session carries any number of
concurrent episodes.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp_types import CONNECTION_CLOSED, HEADER_MISMATCH, INVALID_PARAMS, METHOD_NOT_FOUND

from mcpgym._core.batch import BatchStep, StepsParams, StepsRequest, StepsResult
from mcpgym._core.errors import MCPError
from mcpgym._core.fastpath import trusted
from mcpgym._core.protocol import (
    STEP_KEY,
    CloseRequest,
    CloseResult,
    EpisodeParams,
    ResetParams,
    ResetRequest,
    ResetResult,
    StateRequest,
    StateResult,
    StepMeta,
    episode_meta,
    new_episode_id,
    split_meta,
)
from mcpgym._core.types import EpisodeState, ToolStep, tool_step, unknown_tool_step
from mcpgym._episode.catalog import Task, task_of

MAX_PAGES = 1000
"""Pages of one listing before we stop: a server whose cursor never ends cannot hang a call."""


class SessionDoor:
    """The door primitives over `session` (see the module docstring). `connect` / `disconnect`
    do nothing: whoever lent the session owns it."""

    def __init__(self, session: ClientSession, target: tuple[str, str]) -> None:
        self.session = session
        self._target = target
        self.plain = False
        """The server has no mcpgym control plane (any other MCP server): tools still work."""
        self.batches = True
        """Until the server says otherwise, it answers `mcpgym/steps` (mcpgym._core.batch)."""

    def describe(self) -> tuple[str, str]:
        return self._target

    async def connect(self) -> None:
        pass

    async def disconnect(self) -> None:
        pass

    async def reset(
        self, episode_id: str, seed: int | None, options: dict[str, Any] | None, previous: str | None
    ) -> ResetResult:
        if not self.plain:
            params = ResetParams(seed=seed, options=options, previous=previous, _meta=episode_meta(episode_id))
            try:
                return await self.session.send_request(ResetRequest(params=params), ResetResult)
            except MCPError as exc:
                if exc.code != METHOD_NOT_FOUND:
                    raise
            self.plain = True
        # A server without a control plane: its tools are still actions, without reward or episodes.
        return ResetResult(observation=None, info={"plain_mcp_server": True})

    async def call(self, episode_id: str, name: str, arguments: dict[str, Any]) -> ToolStep:
        try:
            try:
                result = await self._send_call(episode_id, name, arguments)
            except MCPError as exc:
                if exc.code != HEADER_MISMATCH:
                    raise
                # The spec's recovery (as `mcp.Client.call_tool`): re-list the tools, resend once.
                await self.list_tools()
                result = await self._send_call(episode_id, name, arguments)
        except MCPError as exc:
            step = _unknown_tool(exc)  # a counted `is_error` step, as on every door
            if step is None:
                raise
            return step
        return stepped(result)

    async def _send_call(self, episode_id: str, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if self.plain:  # someone else's server: the SDK's checks, output schema included
            return await self.session.call_tool(name, arguments)
        # An mcpgym server validated the result against the tool's output model before
        # sending it (the in-process door does no more): the client's jsonschema pass, a
        # tenth of a step's CPU, would only repeat it (rfcs/0014-lean-client.md).
        params = types.CallToolRequestParams(name=name, arguments=arguments, _meta=episode_meta(episode_id))
        return await self.session.send_request(types.CallToolRequest(params=params), types.CallToolResult)

    async def call_many(self, calls: Sequence[tuple[str, str, dict[str, Any]]]) -> list[ToolStep | MCPError] | None:
        """Many episodes' calls, (episode id, tool, arguments) each, in one `mcpgym/steps` request:
        per call its step or its own protocol error. None from a server without the method (or
        none of ours): then step them one request each."""
        if self.plain or not self.batches:
            return None
        steps = [BatchStep(episode=episode, name=name, arguments=arguments) for episode, name, arguments in calls]
        try:
            answer = await self.session.send_request(StepsRequest(params=StepsParams(steps=steps)), StepsResult)
        except MCPError as exc:
            if exc.code != METHOD_NOT_FOUND:
                raise
            self.batches = False
            return None
        outcomes: list[ToolStep | MCPError] = []
        for outcome in answer.results:
            if outcome.result is not None:
                outcomes.append(stepped(outcome.result))
                continue
            error = outcome.error or types.ErrorData(code=INVALID_PARAMS, message="The server answered nothing")
            refused = MCPError(error.code, error.message, error.data)
            outcomes.append(_unknown_tool(refused) or refused)  # an unknown tool is its counted step, as in `call`
        return outcomes

    async def list_tools(self) -> list[types.Tool]:
        tools: list[types.Tool] = []
        async with contextlib.aclosing(_pages(self.session.list_tools)) as pages:
            async for page in pages:
                tools.extend(page.tools)
        return tools

    async def state(self, episode_id: str) -> EpisodeState:
        if self.plain:
            raise MCPError(METHOD_NOT_FOUND, "This MCP server has no mcpgym control plane, so it has no episode state")
        request = StateRequest(params=EpisodeParams(_meta=episode_meta(episode_id)))
        return (await self.session.send_request(request, StateResult)).state

    async def close(self, episode_id: str) -> EpisodeState | None:
        """`close` on the control plane; None when the connection is gone: the episode ended with
        it, which the call that noticed has already reported, so there is nothing left to close."""
        if self.plain:
            return None
        request = CloseRequest(params=EpisodeParams(_meta=episode_meta(episode_id)))
        try:
            return (await self.session.send_request(request, CloseResult)).state
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise
            return None

    async def list_tasks(self, limit: int | None, prompts: bool) -> list[Task]:
        """The catalog through `prompts/list` (rfcs/0010); each task's text through `prompts/get`,
        naming a fresh episode id so the server does not restart anyone's episode on it."""
        tasks: list[Task] = []
        async with contextlib.aclosing(_pages(self.session.list_prompts)) as pages:  # (returned from midway)
            async for page in pages:
                for prompt in page.prompts:
                    if limit is not None and len(tasks) >= limit:
                        return tasks
                    task = task_of(prompt)
                    if task is None:
                        continue
                    if prompts:
                        got = await self.session.get_prompt(prompt.name, meta=episode_meta(new_episode_id()))
                        texts = [m.content.text for m in got.messages if isinstance(m.content, types.TextContent)]
                        task = task.model_copy(update={"prompt": "\n".join(texts)})
                    tasks.append(task)
        return tasks


async def _pages(listing: Any) -> AsyncGenerator[Any, None]:
    """Every page of a paginated listing (`session.list_tools`, `session.list_prompts`)."""
    params: types.PaginatedRequestParams | None = None
    for _ in range(MAX_PAGES):
        page = await listing(params=params)
        yield page
        if not page.next_cursor:
            return
        params = types.PaginatedRequestParams(cursor=page.next_cursor)
    raise MCPError(INVALID_PARAMS, f"The server's listing did not end after {MAX_PAGES} pages")


def stepped(result: types.CallToolResult) -> ToolStep:
    """A `tools/call` result as a step: our `_meta` stamp read off (reward, flags, components),
    the tool's own `_meta` kept."""
    stamp, own_meta = split_meta(result.meta)
    if result.meta:  # `trusted`: the result was validated on arrival, only its `_meta` changes
        result = trusted(types.CallToolResult, {**result.__dict__, "meta": own_meta}, result.model_fields_set)
    if stamp is None:  # not an mcpgym server: a plain tool result, no reward
        return tool_step(result, 0.0, False, False, 0)
    return tool_step(result, stamp.reward, stamp.done, stamp.truncated, stamp.step, stamp.components or None)


def _unknown_tool(exc: MCPError) -> ToolStep | None:
    """The step an mcpgym server counted for an unknown tool (its stamp rides in the protocol
    error's data), as the in-process door returns it; None for any other error."""
    data = exc.data
    if exc.code != INVALID_PARAMS or not isinstance(data, dict) or not isinstance(data.get(STEP_KEY), dict):
        return None
    stamp = StepMeta.model_validate(data[STEP_KEY])
    components = stamp.components or None
    return unknown_tool_step(exc.message, stamp.done, stamp.truncated, stamp.step, stamp.reward, components)
