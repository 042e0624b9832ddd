"""Resources and prompts of a wrapped server, served beside the task catalog.

Layer: transport helper, used by `_server` only. For an environment class that fronts another
MCP server (`mcpgym.wrap`: it lists an `upstream_listing`), listings are the task catalog's
followed, on its last page, by the wrapped server's own (as it listed them when the class was
made); a read or a prompt outside the catalog (whose URIs are `mcpgym://tasks/...` and whose
prompt names are task ids, which `wrap()` keeps apart from the server's) goes to the server of
the request's episode: the one it names, or the caller's implicit one. Links a tool returned
then resolve, even to resources that server made since.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, cast

import mcp_types as types
from mcp.server.context import ServerRequestContext

from mcpgym._core.errors import INTERNAL_ERROR, MCPError
from mcpgym._core.protocol import unreserved
from mcpgym._episode.catalog import URI_PREFIX
from mcpgym._episode.episode import Episode
from mcpgym._episode.peer import Upstream, UpstreamListing
from mcpgym._server.catalog import CatalogHandlers

Ctx = ServerRequestContext[Any, Any]
EpisodeOf = Callable[[Ctx], AbstractAsyncContextManager[Episode]]


class PassthroughHandlers:
    """`listing` is called per request: a wrapped class learns it when its server first starts
    (`mcpgym.wrap` is lazy), which serving the class does before the first request."""

    def __init__(self, catalog: CatalogHandlers, listing: Callable[[], UpstreamListing], episode_of: EpisodeOf) -> None:
        self._catalog = catalog
        self._listing = listing
        self._episode_of = episode_of

    def handlers(self) -> dict[str, Any]:
        return {
            "on_list_prompts": self._list_prompts,
            "on_get_prompt": self._get_prompt,
            "on_list_resources": self._list_resources,
            "on_list_resource_templates": self._list_templates,
            "on_read_resource": self._read_resource,
        }

    async def _list_prompts(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        page = (await self._catalog.catalog()).list_prompts(params)
        if page.next_cursor is None:
            page = page.model_copy(update={"prompts": [*page.prompts, *map(_foreign, self._listing().prompts)]})
        return page

    async def _list_resources(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        page = (await self._catalog.catalog()).list_resources(params)
        if page.next_cursor is None:
            page = page.model_copy(update={"resources": [*page.resources, *self._listing().resources]})
        return page

    async def _list_templates(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=list(self._listing().templates))

    async def _get_prompt(self, ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name in (await self._catalog.catalog()).by_id:
            return await self._catalog.handlers()["on_get_prompt"](ctx, params)  # type: ignore[no-any-return]
        async with self._episode_of(ctx) as episode:
            return await _upstream(episode).get_prompt(params.name, params.arguments)

    async def _read_resource(self, ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if params.uri.startswith(URI_PREFIX):
            return (await self._catalog.catalog()).read_resource(params.uri)
        async with self._episode_of(ctx) as episode:
            return await _upstream(episode).read_resource(params.uri)


def _foreign(prompt: types.Prompt) -> types.Prompt:
    """A wrapped server's prompt without our `io.mcpgym/` keys (or the SDK's): it cannot pass
    itself off as one of the catalog's tasks (or anything else of ours) to a client that reads them."""
    kept = unreserved(prompt.meta)
    return prompt if kept is prompt.meta else prompt.model_copy(update={"meta": kept})


def _upstream(episode: Episode) -> Upstream:
    if not hasattr(episode.env, "read_resource"):
        raise MCPError(INTERNAL_ERROR, f"{type(episode.env).__name__} fronts no MCP server")
    return cast(Upstream, episode.env)
