"""The server side of the task catalog: the SDK handlers for prompts and resources.

Layer: transport helper, used by `_server` only. Loads an environment's `catalog()` once, on
the first request that needs it, from an instance built for the purpose and then closed.
Every server answers these methods (an environment without tasks lists none), so clients
that browse prompts and resources never get "Method not found".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext

from mcpgym._core.errors import INTERNAL_ERROR, MCPError
from mcpgym._episode.catalog import Catalog, Task
from mcpgym._episode.environment import Environment
from mcpgym._episode.episode import _run_user, build

Ctx = ServerRequestContext[Any, Any]
OnPrompt = Callable[[Ctx, Task], Awaitable[None]]


class CatalogHandlers:
    """`prompts/*` and `resources/*` for one server, as `mcp.server.Server` keyword handlers."""

    def __init__(self, factory: Callable[[], Environment], on_prompt: OnPrompt) -> None:
        self._factory = factory
        self._on_prompt = on_prompt
        self._catalog: Catalog | None = None
        self._lock = anyio.Lock()

    def handlers(self) -> dict[str, Any]:
        return {
            "on_list_prompts": self._list_prompts,
            "on_get_prompt": self._get_prompt,
            "on_list_resources": self._list_resources,
            "on_list_resource_templates": self._list_templates,
            "on_read_resource": self._read_resource,
        }

    @property
    def loaded(self) -> bool:
        """Whether the catalog has been read (by a listing, a prompt, a draw): reading it again is free."""
        return self._catalog is not None

    async def catalog(self) -> Catalog:
        async with self._lock:
            if self._catalog is None:
                self._catalog = await self._load()
            return self._catalog

    async def _load(self) -> Catalog:
        env = build(self._factory)
        try:
            return Catalog(await anyio.to_thread.run_sync(env.catalog))
        except Exception as exc:
            raise MCPError(INTERNAL_ERROR, f"{type(env).__name__}.catalog() failed: {exc}") from exc
        finally:
            with anyio.CancelScope(shield=True):
                await _run_user(env.close)

    async def _list_prompts(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return (await self.catalog()).list_prompts(params)

    async def _get_prompt(self, ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        catalog = await self.catalog()
        result = catalog.get_prompt(params.name)
        await self._on_prompt(ctx, catalog.get(params.name))
        return result

    async def _list_resources(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return (await self.catalog()).list_resources(params)

    async def _list_templates(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[])

    async def _read_resource(self, ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return (await self.catalog()).read_resource(params.uri)
