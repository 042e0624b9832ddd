"""The task catalog: an environment's tasks as MCP prompts and resources, listed in pages.

Layer: bottom (MCP types only, no transport). An environment lists its tasks by overriding
`Environment.catalog()`; the server answers `prompts/list`, `prompts/get`, `resources/list`
and `resources/read` from that list, and clients read it back with `mcpgym.list_tasks`.
See rfcs/0010-task-catalog.md.

- A task is a `Task`: what the agent is told (`prompt`), an optional longer `description`,
  and how to start it (`seed` and reset `options`). Nothing a grader uses belongs in a Task,
  so nothing secret can leak through any of these methods: hidden tests, reference solutions
  and answers stay inside the environment instance.
- Each task is one prompt (name = task id; getting it yields one user message, the prompt) and
  one resource (`mcpgym://tasks/<id>`, the description as Markdown). A prompt's
  `_meta["io.mcpgym/task"]` carries `{"seed", "options"}` so a trainer can reset to it.
- Listings are paged (`PAGE_SIZE` per page) in the environment's own order, with an opaque
  cursor; the same catalog always pages the same way.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from urllib.parse import quote, unquote

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field

from mcpgym._core.errors import INVALID_PARAMS, MCPError
from mcpgym._core.types import JSONValue

TASK_KEY = "io.mcpgym/task"
"""The `_meta` key of a prompt that says how to reset to its task: `{"seed", "options"}`."""
URI_PREFIX = "mcpgym://tasks/"
PAGE_SIZE = 100
RESOURCE_NOT_FOUND = -32002  # what the MCP specification assigns to resources/read of an unknown URI


class Task(BaseModel):
    """One task an environment offers: shown to agents, never graded from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    """Stable across runs and servers, e.g. "HumanEval/3" or "blackjack/seed/7"."""
    prompt: str
    """What the agent is told: the first user message of the conversation."""
    title: str | None = None
    description: str | None = None
    """A longer, human-facing description (the resource's text); default: the prompt."""
    seed: int | None = None
    options: dict[str, JSONValue] = Field(default_factory=dict)
    """`reset(seed=task.seed, options=task.options)` starts this task."""

    def reset_arguments(self) -> dict[str, JSONValue]:
        return {"seed": self.seed, "options": dict(self.options)}


class Catalog:
    """An environment's tasks, indexed by id, answering the MCP listing and reading methods."""

    def __init__(self, tasks: Sequence[Task]) -> None:
        self.tasks = list(tasks)
        self.by_id = {task.id: task for task in self.tasks}
        if len(self.by_id) != len(self.tasks):
            raise ValueError("catalog(): task ids must be unique")

    def _page(self, params: types.PaginatedRequestParams | None) -> tuple[list[Task], str | None]:
        start = _offset(params.cursor if params is not None else None)
        end = start + PAGE_SIZE
        return self.tasks[start:end], _cursor(end) if end < len(self.tasks) else None

    def list_prompts(self, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        page, cursor = self._page(params)
        return types.ListPromptsResult(prompts=[_prompt(task) for task in page], next_cursor=cursor)

    def get_prompt(self, name: str) -> types.GetPromptResult:
        task = self.get(name)
        message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=task.prompt))
        return types.GetPromptResult(description=_summary(task), messages=[message])

    def list_resources(self, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        page, cursor = self._page(params)
        return types.ListResourcesResult(resources=[_resource(task) for task in page], next_cursor=cursor)

    def read_resource(self, uri: str) -> types.ReadResourceResult:
        task = self.by_id.get(unquote(uri[len(URI_PREFIX) :])) if uri.startswith(URI_PREFIX) else None
        if task is None:
            raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri!r}", {"uri": uri})
        text = task.description or task.prompt
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/markdown", text=text)]
        )

    def get(self, task_id: str) -> Task:
        task = self.by_id.get(task_id)
        if task is None:
            known = ", ".join(t.id for t in self.tasks[:3])
            raise MCPError(
                INVALID_PARAMS, f"Unknown prompt: {task_id!r}. This server's tasks include: {known or 'none'}"
            )
        return task


def task_of(prompt: types.Prompt) -> Task | None:
    """The `Task` a listed prompt stands for (its prompt text is fetched separately), or None for
    a prompt that is not a task: only the catalog's carry `_meta[TASK_KEY]`; a wrapped server's
    own prompts are listed beside them and are prompts, not tasks."""
    meta = prompt.meta or {}
    if TASK_KEY not in meta:
        return None
    meta = meta[TASK_KEY] or {}
    return Task(
        id=prompt.name,
        prompt="",
        title=prompt.title,
        description=prompt.description,
        seed=meta.get("seed"),
        options=meta.get("options") or {},
    )


def resource_uri(task_id: str) -> str:
    return URI_PREFIX + quote(task_id, safe="/")


def _prompt(task: Task) -> types.Prompt:
    meta = {TASK_KEY: task.reset_arguments()}
    return types.Prompt(name=task.id, title=task.title, description=_summary(task), _meta=meta)


def _resource(task: Task) -> types.Resource:
    return types.Resource(
        uri=resource_uri(task.id),
        name=task.id,
        title=task.title,
        description=_summary(task),
        mime_type="text/markdown",
    )


def _summary(task: Task) -> str:
    """A one-line description (clients show it in a menu; the conformance suite requires one)."""
    if task.title:
        return task.title
    line = next((ln.strip() for ln in task.prompt.splitlines() if ln.strip()), task.id)
    return line if len(line) <= 120 else line[:117] + "..."


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        kind, _, number = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
        if kind == "offset" and number.isdigit():
            return int(number)
    except (ValueError, UnicodeError):
        pass
    raise MCPError(INVALID_PARAMS, "Invalid cursor: pass back a nextCursor exactly as a listing returned it")
