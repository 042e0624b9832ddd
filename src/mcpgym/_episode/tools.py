"""`@tool`: mark an Environment method as an action, and derive its MCP `Tool` once per class.

Layer: bottom (no transport). Schemas, argument validation and result conversion are the
MCP SDK's own (`func_metadata`), so a tool looks and behaves exactly as it would on an
`MCPServer`; we only bind it to a per-episode instance instead of a module-level function.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

import anyio
import mcp_types as types
import pydantic_core
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from mcp.server.mcpserver.utilities.types import Audio, Image
from mcp.shared.tool_name_validation import validate_and_warn_tool_name
from mcp_types import ContentBlock
from pydantic import BaseModel, ConfigDict

from mcpgym._core.types import trusted

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__mcpgym_tool__"


@dataclass(frozen=True)
class ToolOptions:
    name: str | None = None
    title: str | None = None
    description: str | None = None
    annotations: types.ToolAnnotations | None = None
    inline: bool = False
    structured_output: bool | None = None
    extra_arguments: bool = False


def _defaults(cls: type[Any]) -> dict[str, Any]:
    """Every field of an MCP type at its (immutable) default, keyed as `__dict__` keys them."""
    return {name: info.default for name, info in cls.model_fields.items()}


_TEXT_DEFAULTS = _defaults(types.TextContent)
_RESULT_DEFAULTS = _defaults(types.CallToolResult)


@dataclass(frozen=True)
class BoundTool:
    """One tool of an environment class, bound to its method: its MCP definition and how to call it.

    (The chat-completions `tools` entry a policy is shown is another thing: `harness.ChatTool`.)

    `validate` and `convert` are the SDK's `FuncMetadata.validate_arguments` and
    `convert_result` with the per-call lookups hoisted to class creation; a test pins them
    equal to the SDK's for every kind of argument and return value.
    """

    name: str
    method_name: str
    definition: types.Tool
    metadata: FuncMetadata
    is_async: bool
    inline: bool
    plain_args: frozenset[str]
    """Arguments annotated exactly `str`: the SDK's JSON pre-parse never rewrites them."""
    renamed: tuple[tuple[str, str], ...]
    """(model field, method parameter) pairs where they differ: an alias such as
    `Field(alias="file-path")` names the wire key, the method still takes `file_path`."""
    str_result: Literal["content", "structured"] | None
    """How a returned `str` converts without the SDK's machinery: as text content alone (no
    output schema), or also as structured `{"result": value}` (a `-> str` tool); None: never."""
    str_params: frozenset[str] | None = None
    """Every parameter, when each is a plain `str` (no constraint, alias, validator or rename):
    given exactly these, each an exact `str`, the argument model returns them unchanged."""

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if arguments.keys() == self.str_params:
            # The common text tool: the type check *is* the validation (a test pins it
            # equal to the model's), and it costs a tenth of running the model.
            for value in arguments.values():
                if type(value) is not str:
                    break
            else:
                return arguments
        if not arguments.keys() <= self.plain_args:
            arguments = self.metadata.pre_parse_json(arguments)
        model = self.metadata.arg_model.__pydantic_validator__.validate_python(arguments)
        kwargs = dict(model.__dict__)
        for field, parameter in self.renamed:
            kwargs[parameter] = kwargs.pop(field)
        return kwargs

    def convert(self, value: Any) -> types.CallToolResult:
        # Fast path for the common text tool (`-> str`, or unannotated, returning a str);
        # everything else takes the SDK's own conversion.
        # A str is valid text content as it stands, so the result is built without re-validation.
        if type(value) is str and self.str_result is not None:
            fields = _TEXT_DEFAULTS.copy()
            fields["text"] = value
            content = [trusted(types.TextContent, fields, {"type", "text"})]
            fields = _RESULT_DEFAULTS.copy()
            fields["content"] = content
            if self.str_result == "content":
                return trusted(types.CallToolResult, fields, {"content"})
            fields["structured_content"] = {"result": value}
            return trusted(types.CallToolResult, fields, {"content", "structured_content"})
        if self.metadata.output_schema is None:
            _require_json(value)
        converted = self.metadata.convert_result(value)
        if not isinstance(converted, types.CallToolResult):
            raise TypeError("returned an InputRequiredResult, which mcpgym environments do not support")
        return converted


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    annotations: types.ToolAnnotations | None = None,
    inline: bool = False,
    structured_output: bool | None = None,
    extra_arguments: bool = False,
) -> Callable[[F], F]: ...
def tool(
    fn: F | None = None,
    /,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    annotations: types.ToolAnnotations | None = None,
    inline: bool = False,
    structured_output: bool | None = None,
    extra_arguments: bool = False,
) -> F | Callable[[F], F]:
    """Expose an `Environment` method to agents as an MCP tool.

    The input schema comes from the type hints and the description from the docstring,
    exactly as the MCP SDK derives them. `async def` tools run on the event loop; plain
    `def` tools run in a worker thread so blocking code cannot stall other episodes, unless
    `inline=True` says the method is quick and never blocks (then it runs on the loop and
    skips the thread hop, which costs tens of microseconds).

    Arguments the method does not declare are refused (an `isError` result; the schema says
    `additionalProperties: false`), so a misspelt or invented argument never passes silently.
    `extra_arguments=True` accepts them instead (and ignores them), for tools whose callers
    are known to send more than the tool reads.
    """
    options = ToolOptions(name, title, description, annotations, inline, structured_output, extra_arguments)

    def mark(f: F) -> F:
        if not callable(f):
            raise TypeError(f"@mcpgym.tool decorates a method, not {f!r}")
        setattr(f, _MARK, options)
        return f

    return mark(fn) if fn is not None else mark


def collect_tools(cls: type) -> dict[str, BoundTool]:
    """Build the tool table of an environment class (inherited tools included, overrides win)."""
    found: dict[str, Callable[..., Any]] = {}
    for klass in reversed(cls.__mro__):
        for attr, value in vars(klass).items():
            if hasattr(value, _MARK):
                found[attr] = value
            elif attr in found:
                del found[attr]  # overridden by an undecorated method: no longer a tool
    tools: dict[str, BoundTool] = {}
    for attr, fn in found.items():
        bound = _bind(cls, attr, fn, getattr(fn, _MARK))
        if bound.name in tools:
            raise TypeError(f"{cls.__name__}: two methods declare the tool name {bound.name!r}")
        tools[bound.name] = bound
    return tools


def _bind(cls: type, attr: str, fn: Callable[..., Any], options: ToolOptions) -> BoundTool:
    params = list(inspect.signature(fn).parameters)
    if not params or params[0] != "self" or isinstance(inspect.getattr_static(cls, attr), staticmethod | classmethod):
        raise TypeError(f"{cls.__name__}.{attr}: @mcpgym.tool goes on a regular method (first parameter `self`)")
    name = options.name or attr
    validate_and_warn_tool_name(name)
    metadata = func_metadata(fn, skip_names=["self"], structured_output=options.structured_output)
    if not options.extra_arguments:
        metadata = metadata.model_copy(update={"arg_model": _closed(metadata.arg_model)})
    description = options.description or inspect.getdoc(fn) or ""
    definition = types.Tool(
        name=name,
        title=options.title,
        description=description,
        input_schema=metadata.arg_model.model_json_schema(by_alias=True),
        output_schema=metadata.output_schema,
        annotations=options.annotations,
    )
    fields = metadata.arg_model.model_fields
    plain = frozenset((f.alias or n) for n, f in fields.items() if f.annotation is str)
    renamed = _renamed(fn, fields)
    output = metadata.output_model if metadata.output_schema is not None else None
    str_result: Literal["content", "structured"] | None = None
    if output is None:
        str_result = "content"
    elif metadata.wrap_output and output.model_fields["result"].annotation is str:
        str_result = "structured"
    return BoundTool(
        name=name,
        method_name=attr,
        definition=definition,
        metadata=metadata,
        is_async=inspect.iscoroutinefunction(fn),
        inline=options.inline,
        plain_args=plain,
        renamed=renamed,
        str_result=str_result,
        str_params=None if renamed else _str_params(fields),
    )


class UnsendableResult(TypeError):
    """A tool returned an object JSON cannot carry (the message says what to return instead)."""


def _require_json(value: Any) -> None:
    """Refuse what the SDK would send as its `str()` (its conversion falls back to it): an
    object JSON cannot carry would reach the agent as a `repr`, which no one meant to send."""
    if value is None or isinstance(value, str | types.CallToolResult | ContentBlock | Image | Audio):
        return
    if isinstance(value, list | tuple):
        for item in value:
            _require_json(item)
        return
    try:
        pydantic_core.to_json(value)
    except pydantic_core.PydanticSerializationError:
        raise UnsendableResult(
            f"returned an object of type {type(value).__name__}, which JSON cannot carry: return text, "
            "JSON-compatible data (dicts, lists, numbers, pydantic models, dataclasses) or MCP content"
        ) from None


def _closed(model: type[BaseModel]) -> type[BaseModel]:
    """The SDK's argument model, refusing keys it does not declare (its schema then says
    `additionalProperties: false`); the SDK's own ignores them."""
    config = ConfigDict(**{**model.model_config, "extra": "forbid"})
    return type(model.__name__, (model,), {"model_config": config, "__module__": model.__module__})


def _str_params(fields: dict[str, Any]) -> frozenset[str] | None:
    """All field names if every field is a bare `str` (nothing that validation could change)."""
    for name, info in fields.items():
        bare = info.annotation is str and not info.metadata and info.alias in (None, name)
        if not bare or info.validation_alias not in (None, name):
            return None
    return frozenset(fields)


def _renamed(fn: Callable[..., Any], fields: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """Map the argument model's field names back to the method's own parameter names (the SDK
    renames parameters that shadow BaseModel attributes to `field_<name>`, aliased `<name>`)."""
    parameters = set(inspect.signature(fn).parameters)
    pairs = []
    for name, info in fields.items():
        if name not in parameters and info.alias in parameters:
            pairs.append((name, info.alias))
    return tuple(pairs)


class LazyTools(Mapping[str, BoundTool]):
    """A class's tool table that is only known by doing something slow (a wrapped server's:
    starting it is how its tools are learnt), filled once, on first use.

    A plain read fills it in the calling thread (blocking it). `await ready()` fills it in a
    worker thread, so an event loop goes on serving meanwhile: whoever serves a class awaits
    it before the first read (the server's lifespan does). Thread-safe: the load runs once."""

    def __init__(self, load: Callable[[], dict[str, BoundTool]]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._tools: dict[str, BoundTool] | None = None

    def loaded(self) -> dict[str, BoundTool]:
        tools = self._tools
        if tools is None:
            with self._lock:
                if self._tools is None:
                    self._tools = self._load()
                tools = self._tools
        return tools

    async def ready(self) -> None:
        if self._tools is None:
            await anyio.to_thread.run_sync(self.loaded)

    def __getitem__(self, name: str) -> BoundTool:
        return self.loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.loaded())

    def __len__(self) -> int:
        return len(self.loaded())


async def tools_ready(cls: type) -> None:
    """Fill `cls`'s tool table without blocking the event loop, if it is a lazy one."""
    tools = getattr(cls, "__mcpgym_tools__", None)
    if isinstance(tools, LazyTools):
        await tools.ready()
