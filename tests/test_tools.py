"""Tools are derived, validated and converted exactly as the MCP SDK does it for MCPServer tools."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import mcp_types as types
import pytest
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

import mcpgym


class Point(BaseModel):
    x: int
    y: int = 0


class Kitchen(mcpgym.Environment):
    @mcpgym.tool
    async def text(self, s: str) -> str:
        """Return text."""
        return s

    @mcpgym.tool
    async def numbers(self, xs: list[int], scale: Annotated[float, Field(ge=0)] = 1.0) -> list[float]:
        """Scale numbers."""
        return [x * scale for x in xs]

    @mcpgym.tool
    async def model(self, p: Point, mode: Literal["a", "b"] = "a") -> Point:
        """Echo a model."""
        return p

    @mcpgym.tool
    async def loose(self, data: dict[str, Any]) -> dict[str, Any]:
        """Echo a dict."""
        return data

    @mcpgym.tool(structured_output=False)
    async def plain(self, n: int) -> int:
        """Unstructured output."""
        return n

    @mcpgym.tool
    async def nothing(self) -> None:
        """Return nothing."""

    @mcpgym.tool(name="renamed-tool", title="Renamed")
    async def with_options(self, value: bool) -> bool:
        """Options on the decorator."""
        return value


def _sdk_twin() -> MCPServer:
    """The same functions as module-level MCPServer tools."""
    sdk = MCPServer("twin")
    env = Kitchen()
    for spec in Kitchen.__mcpgym_tools__.values():
        sdk.add_tool(
            getattr(env, spec.method_name),
            name=spec.name,
            title=spec.definition.title,
            structured_output=False if spec.name == "plain" else None,
        )
    return sdk


@pytest.mark.anyio
async def test_tool_definitions_match_the_sdk() -> None:
    ours = {t.name: t for t in (await mcpgym.connect(Kitchen).list_tools())}
    theirs = {t.name: t for t in await _sdk_twin().list_tools()}
    assert ours.keys() == theirs.keys()
    for name, tool in ours.items():
        # The one difference, on purpose: undeclared arguments are refused, not ignored.
        assert tool.input_schema == {**theirs[name].input_schema, "additionalProperties": False}, name
        assert tool.output_schema == theirs[name].output_schema, name
        assert tool.description == theirs[name].description, name


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("text", {"s": "hi"}),
    ("numbers", {"xs": [1, 2], "scale": 0.5}),
    ("numbers", {"xs": "[3, 4]"}),  # JSON-in-a-string, as some clients send it
    ("model", {"p": {"x": 1}, "mode": "b"}),
    ("model", {"p": '{"x": 2, "y": 3}'}),
    ("loose", {"data": {"a": [1, {"b": None}]}}),
    ("plain", {"n": 7}),
    ("nothing", {}),
    ("renamed-tool", {"value": True}),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "arguments"), CALLS)
async def test_results_match_the_sdk(name: str, arguments: dict[str, Any]) -> None:
    async with mcpgym.connect(Kitchen) as env:
        await env.reset()
        ours = (await env.call_tool(name, arguments)).observation
    theirs = await _sdk_twin().call_tool(name, arguments)
    assert isinstance(theirs, types.CallToolResult)
    assert ours.model_dump() == theirs.model_dump()


class Strict(mcpgym.Environment):
    @mcpgym.tool
    async def hit(self) -> str:
        """Draw a card."""
        return "drew"

    @mcpgym.tool(extra_arguments=True)
    async def tolerant(self, n: int = 1) -> int:
        """Ignore what it does not read."""
        return n


@pytest.mark.anyio
async def test_undeclared_arguments_are_refused_unless_the_tool_allows_them() -> None:
    async with mcpgym.connect(Strict) as env:
        await env.reset(seed=0)
        wrong = await env.call_tool("hit", {"n": "two"})
        assert wrong.observation.is_error and not wrong.done
        assert "n: Extra inputs are not permitted" in wrong.observation.content[0].text  # type: ignore[union-attr]
        assert (await env.call_tool("hit")).observation.content[0].text == "drew"  # type: ignore[union-attr]
        loose = await env.call_tool("tolerant", {"n": 2, "verbose": True})
        assert loose.observation.structured_content == {"result": 2}
    schemas = {t.name: t.input_schema for t in await mcpgym.connect(Strict).list_tools()}
    assert schemas["hit"]["additionalProperties"] is False
    assert "additionalProperties" not in schemas["tolerant"]


def test_bad_tool_declarations_fail_at_class_creation() -> None:
    with pytest.raises(TypeError, match="regular method"):

        class Static(mcpgym.Environment):
            @mcpgym.tool
            @staticmethod
            def oops(x: int) -> int:
                return x

    with pytest.raises(TypeError, match="two methods declare"):

        class Twice(mcpgym.Environment):
            @mcpgym.tool(name="same")
            async def a(self) -> None: ...

            @mcpgym.tool(name="same")
            async def b(self) -> None: ...


def test_overriding_a_tool_without_the_decorator_removes_it() -> None:
    class Base(mcpgym.Environment):
        @mcpgym.tool
        async def act(self) -> str:
            """Act."""
            return "base"

    class Child(Base):
        async def act(self) -> str:
            return "child"

    assert list(Base.__mcpgym_tools__) == ["act"] and Child.__mcpgym_tools__ == {}


class Renames(mcpgym.Environment):
    @mcpgym.tool
    async def read(self, file_path: Annotated[str, Field(alias="file-path")], schema: str = "x") -> str:
        """A wire name that is not a Python name, and a parameter that shadows a BaseModel method."""
        return f"{file_path}:{schema}"


@pytest.mark.anyio
async def test_aliased_and_shadowing_parameters_reach_the_method() -> None:
    async with mcpgym.connect(Renames) as env:
        await env.reset()
        tool = (await env.list_tools())[0]
        assert set(tool.input_schema["properties"]) == {"file-path", "schema"}
        result = await env.call_tool("read", {"file-path": "a.txt", "schema": "y"})
        assert result.text == "a.txt:y", result.text
