"""mcpgym.trl without a trainer: schema round-trip, names, episodes over every door, factory, dataset.

The schema tests need transformers (the `mcpgym[trl]` extra): its `get_json_schema` is what
TRL shows the model, so it is the oracle here. Nothing is downloaded; no torch is imported.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio
import mcp_types as types
import pytest
from mcp.server import Server
from pydantic import BaseModel, Field

# Imported, not `importorskip`ped: without the trl extra this module fails to collect, so the
# suite fails loudly (scripts/test.sh leaves it out on purpose where the extra has no wheels).
from transformers.utils.chat_template_utils import get_json_schema

import mcpgym
import mcpgym.trl
from mcpgym import servers
from mcpgym.servers.echo import Echo
from mcpgym.testing import assert_tool_round_trip, assert_trl_round_trip, environments_in
from mcpgym.testing._trl import _docstring_json
from mcpgym.trl._schema import tool_shape
from tests.conftest import DOORS, door

assert_round_trip = assert_tool_round_trip


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# A test environment whose tools cover what the mapping must handle.
class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(BaseModel):
    x: float
    y: float = 0.0


class Address(BaseModel):
    street: Annotated[str, Field(description="Street and number")]
    tags: list[str] = []


class Hostile(mcpgym.Environment):
    """Tools with every schema shape the mapping must handle."""

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        return f"seed={seed} options={json.dumps(options, sort_keys=True)}"

    @mcpgym.tool(name="search-docs")
    async def search_docs(
        self,
        query: Annotated[str, Field(min_length=1, max_length=50, pattern=r"^\w+$", description="What to look for")],
        mode: Literal["fast", "exact"] = "fast",
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        tags: list[str] | None = None,
        weights: dict[str, float] | None = None,
        colour: Colour = Colour.RED,
        address: Address | None = None,
        points: Annotated[list[Point], Field(max_length=3)] = [],  # noqa: B006 (pydantic copies defaults)
        value: int | str = 0,
    ) -> str:
        """Search the docs. Args: are not a section here. Returns: neither is this."""
        return json.dumps({"query": query, "mode": mode, "limit": limit, "address": address and address.street})

    @mcpgym.tool(name="reset")
    async def reset_tool(self) -> str:
        """A tool that happens to be called reset."""
        self.finish(reward=2.5)
        return "reset tool ran"

    @mcpgym.tool(name="_private")
    async def private(self, n: int) -> str:
        """A tool whose name starts with an underscore."""
        if n < 0:
            raise mcpgym.ToolError("n must be >= 0")
        self.reward(n)
        return str(n)


SERVERS: list[type[mcpgym.Environment]] = environments_in(servers)
ENVS: list[type[mcpgym.Environment]] = [*SERVERS, Hostile]
TOOLS = [(cls, spec.definition) for cls in ENVS for spec in cls.__mcpgym_tools__.values()]


# --- the round-trip oracle: what the model sees plus the docstring JSON equals the MCP schema


@pytest.mark.parametrize(("env_cls", "tool"), TOOLS, ids=[f"{c.__name__}.{t.name}" for c, t in TOOLS])
def test_schema_round_trip_for_every_tool(env_cls: type[mcpgym.Environment], tool: types.Tool) -> None:
    Env = mcpgym.trl.environment_class(env_cls)
    methods = {m.__name__: m for _, m in inspect.getmembers(Env, inspect.isfunction)}
    assert_round_trip(tool, methods[tool.name])


@pytest.mark.parametrize("env_cls", ENVS, ids=lambda c: c.__name__)
def test_the_kit_round_trips_every_tool_of_a_class(env_cls: type[mcpgym.Environment]) -> None:
    assert_trl_round_trip(env_cls)


def test_what_the_model_sees_for_the_hostile_tools() -> None:
    Env = mcpgym.trl.environment_class(Hostile)
    shown = get_json_schema(Env.tool_search_docs)["function"]  # type: ignore[attr-defined]
    assert shown["name"] == "search-docs"
    assert shown["description"] == "Search the docs. Args - are not a section here. Returns - neither is this."
    props = shown["parameters"]["properties"]
    assert shown["parameters"]["required"] == ["query"]
    assert props["query"] == {
        "type": "string",
        "description": 'What to look for {"maxLength":50,"minLength":1,"pattern":"^\\\\w+$"}',
    }
    assert props["mode"] == {"type": "string", "enum": ["fast", "exact"], "description": 'Mode {"default":"fast"}'}
    assert props["colour"]["enum"] == ["red", "green"]
    assert props["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "nullable": True,
        "description": 'Tags {"default":null}',
    }
    assert props["weights"]["additionalProperties"] == {"type": "number"}
    assert props["value"]["type"] == ["integer", "string"]
    # Nested objects: the hint says "object", the docstring carries the shape, $refs inlined.
    assert props["address"]["type"] == "object" and props["address"]["nullable"] is True
    address = _docstring_json(props["address"]["description"])
    assert address["anyOf"][0]["properties"]["street"] == {"description": "Street and number", "type": "string"}
    assert "$ref" not in json.dumps(address) and "title" not in json.dumps(address)
    assert props["points"]["items"] == {"type": "object"}
    assert _docstring_json(props["points"]["description"])["items"]["required"] == ["x"]


def test_hand_written_schemas() -> None:
    """Schemas from non-pydantic servers: type lists, const, oneOf, recursive $ref, tuples, no items."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"], "maxLength": 3},
            "b": {"const": "x"},
            "c": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
            "d": {"$ref": "#/$defs/Node"},
            "e": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
            "f": {"type": "array"},
            "g": {},
            "h": {"enum": [1, "two", None]},
            "i": True,
            "1st": {"type": "boolean", "description": "Multi\n  line\tdescription. Raises: nothing"},
            "class": {"type": "number", "exclusiveMinimum": 0},
        },
        "required": ["a", "1st"],
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
    }
    tool = types.Tool(name="odd.tool", description="Line one.\n\nLine two.", input_schema=schema)
    shape = tool_shape(tool)
    assert [p.name for p in shape.params] == ["a", "b", "c", "d", "e", "f", "g", "h", "i", "_1st", "class_"]
    assert shape.params[3].lost["properties"] == {"next": {"$ref": "#/$defs/Node"}}  # inlined once, not forever

    class Holder:
        pass

    method = mcpgym.trl._tool_class.tool_method(shape)
    Holder.odd_tool = method  # type: ignore[attr-defined]
    shown = get_json_schema(Holder().odd_tool)["function"]  # type: ignore[attr-defined]
    assert shown["name"] == "odd.tool"
    assert shown["description"] == "Line one.\n\nLine two."
    props = shown["parameters"]["properties"]
    assert props["a"] == {"type": "string", "nullable": True, "description": 'a {"maxLength":3}'}
    assert props["b"] == {"type": "string", "enum": ["x"], "description": 'b {"const":"x"}'}
    assert props["c"]["type"] == ["integer", "string"]
    assert props["g"] == {"description": "g"} and props["i"] == {"description": "i"}
    assert props["_1st"]["description"] == "Multi line description. Raises - nothing"
    # The round trip holds for every property except `i` (`true` has no keywords to compare).
    schema["properties"].pop("i")
    tool = types.Tool(name="odd.tool", description="Line one.\n\nLine two.", input_schema=schema)
    Holder.odd_tool = mcpgym.trl._tool_class.tool_method(tool_shape(tool))  # type: ignore[attr-defined]
    assert_round_trip(tool, Holder().odd_tool)  # type: ignore[attr-defined]


def _shown(schema: dict[str, Any], description: str = "Run it.") -> dict[str, Any]:
    tool = types.Tool(name="t", description=description, input_schema=schema)
    return get_json_schema(mcpgym.trl._tool_class.tool_method(tool_shape(tool)))["function"]  # type: ignore[no-any-return]


def test_section_words_inside_words_and_json_are_defused() -> None:
    """transformers matches `Args:`/`Returns:` anywhere; a match must neither cut nor break the schema."""
    shown = _shown({"type": "object", "properties": {"tag": {"type": "string"}}}, "Pass buildArgs: as KEY=VALUE.")
    assert shown["description"] == "Pass buildArgs - as KEY=VALUE."
    default = {"type": "string", "default": "Returns: {x} (choices: no)"}
    shown = _shown({"type": "object", "properties": {"fmt": default, "n": {"type": "integer"}}, "required": ["n"]})
    assert _docstring_json(shown["parameters"]["properties"]["fmt"]["description"]) == {"default": default["default"]}
    assert shown["parameters"]["required"] == ["n"]
    hook = {"type": "string", "description": "see onReturns: hook"}
    shown = _shown({"type": "object", "properties": {"a": hook, "b": {"type": "integer"}}})
    assert shown["parameters"]["properties"]["a"]["description"] == "see onReturns - hook"
    assert shown["parameters"]["properties"]["b"] == {"type": "integer", "description": "b"}


def test_top_level_keywords_without_properties_reach_the_description() -> None:
    either = [{"properties": {"path": {"type": "string"}}, "required": ["path"]}, {"required": ["url"]}]
    shown = _shown({"type": "object", "anyOf": either, "$schema": "https://json-schema.org/draft-07/schema"})
    assert shown["description"].startswith("Run it. ") and _docstring_json(shown["description"]) == {"anyOf": either}
    shown = _shown({"type": "object", "additionalProperties": {"type": "string", "default": "Args: x"}})
    assert _docstring_json(shown["description"]) == {"additionalProperties": {"type": "string", "default": "Args: x"}}
    assert _shown({"type": "object", "properties": {}})["description"] == "Run it."


def test_names_reach_the_server_as_wire_names() -> None:
    Env = mcpgym.trl.environment_class(Hostile)
    public = {n: m.__name__ for n, m in inspect.getmembers(Env, inspect.isfunction) if not n.startswith("_")}
    assert public == {
        "get_reward": "get_reward",
        "reset": "reset",
        "tool__private": "_private",
        "tool_reset": "reset",
        "tool_search_docs": "search-docs",
    }
    env = Env()
    assert env.reset(seed=3, options={"k": 1}) == 'seed=3 options={"k": 1}'
    assert env.tool_search_docs(query="x", address={"street": "Main 1"}) == (  # type: ignore[attr-defined]
        '{"query": "x", "mode": "fast", "limit": 10, "address": "Main 1"}'
    )
    assert env.tool__private(n=4) == "4"  # type: ignore[attr-defined]
    with pytest.raises(mcpgym.trl.ToolCallError, match="n must be >= 0"):
        env.tool__private(n=-1)  # type: ignore[attr-defined]
    assert (env.get_reward(), env.step_count, env.done) == (4.0, 3, False)
    assert env.tool_reset() == "reset tool ran"  # type: ignore[attr-defined]
    assert (env.get_reward(), env.done) == (6.5, True)
    with pytest.raises(mcpgym.trl.EpisodeOverError):
        env.tool__private(n=1)  # type: ignore[attr-defined]
    env._close()


def _plain_mcp_server() -> Server[Any]:
    """A plain MCP server (no mcpgym) whose parameter names Python cannot spell."""
    schema = {
        "type": "object",
        "properties": {
            "file-path": {"type": "string", "description": "Path to open (choices: [1, 2])"},
            "from": {"type": "integer", "default": 0},
            "self": {"type": "boolean"},
        },
        "required": ["file-path"],
    }
    tool = types.Tool(name="open-file", description="Open a file from a line.", input_schema=schema)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    return Server("plain-files", instructions="Files.", on_list_tools=list_tools)


def test_unpythonic_parameter_names_are_mapped_back_to_wire_names() -> None:
    # A plain MCP server can be listed (not reset: it has no mcpgym control plane), so the
    # call is recorded at the class boundary. (mcpgym's own @tool cannot declare such names
    # yet: a pydantic alias is advertised but the call fails, a core bug.)
    calls: list[tuple[str, dict[str, Any]]] = []

    class Recording(mcpgym.trl.environment_class(_plain_mcp_server())):  # type: ignore[misc]
        def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
            calls.append((name, arguments))
            return "ok"

    assert (Recording.__mro__[1].__name__, Recording._instructions) == ("plainfilesEnv", "Files.")
    shown = get_json_schema(Recording().tool_open_file)["function"]
    assert shown["name"] == "open-file"
    assert shown["parameters"]["required"] == ["file_path"]
    assert shown["parameters"]["properties"] == {
        "file_path": {"type": "string", "description": "Path to open (choices - [1, 2])"},
        "from_": {"type": "integer", "description": 'from {"default":0}'},
        "self_": {"type": "boolean", "description": "self"},
    }
    assert Recording().tool_open_file(file_path="a.py", from_=7, self_=True) == "ok"
    assert calls == [("open-file", {"file-path": "a.py", "from": 7, "self": True})]


def _episode(Env: type[mcpgym.trl.MCPEnvironment]) -> list[Any]:
    """One scripted Echo rollout as TRL drives it; returns what a trainer would record."""
    env = Env()
    prompt = [{"role": "user", "content": "Play."}]
    first = env.reset(prompt=prompt, seed=0, options=None)
    assert first is not None
    target = json.loads(first)["target"]
    log: list[Any] = [first]
    script: list[tuple[str, dict[str, Any]]] = [
        ("repeat", {"message": "ab", "times": 3}),
        ("repeat", {"message": "ab", "times": 11}),  # out of bounds: an isError result
        ("echo_message", {"message": "nope"}),
        ("echo_message", {"message": target}),  # reward 1, done
        ("echo_message", {"message": "again"}),  # after done
    ]
    for name, arguments in script:
        method: Callable[..., str] = getattr(env, name)
        try:
            log.append(method(**arguments))
        except mcpgym.trl.EnvironmentToolError as exc:
            log.append((type(exc).__name__, str(exc)))
        log.append((env.get_reward(), env.step_count, env.done))
    env.reset(seed=1)
    log.append((env.get_reward(), env.step_count, env.done))
    env._close()
    return log


@pytest.mark.anyio
@pytest.mark.parametrize("kind", DOORS)
async def test_an_echo_episode_is_the_same_over_every_door(kind: str) -> None:
    async with door(kind, Echo) as target:
        Env = await anyio.to_thread.run_sync(mcpgym.trl.environment_class, target)
        log = await anyio.to_thread.run_sync(_episode, Env)
    assert Env.__name__ == "EchoEnv"
    assert log == [
        '\n\n{"prompt": "Say the word \'orbit\' using echo_message.", "target": "orbit"}',
        "ab ab ab",
        (0.0, 1, False),
        ("ToolCallError", "Invalid arguments for tool 'repeat': times: Input should be less than or equal to 10"),
        (0.0, 2, False),
        "nope",
        (0.0, 3, False),
        "orbit",
        (1.0, 4, True),
        ("EpisodeOverError", "The episode is over: stop calling tools and give your final answer."),
        (1.0, 4, True),
        (0.0, 0, False),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("env_cls", SERVERS, ids=[c.__name__ for c in SERVERS])
async def test_every_server_looks_the_same_over_every_door(env_cls: type[mcpgym.Environment]) -> None:
    def view(Env: type[mcpgym.trl.MCPEnvironment]) -> tuple[Any, ...]:
        tools = [
            get_json_schema(m)
            for _, m in inspect.getmembers(Env, inspect.isfunction)
            if not _.startswith("_") and _ not in ("reset", "get_reward")
        ]
        env = Env()
        first = env.reset(seed=0)
        env._close()
        return Env.__name__, Env._instructions, tools, first

    views = []
    for kind in DOORS:
        async with door(kind, env_cls) as target:
            Env = await anyio.to_thread.run_sync(mcpgym.trl.environment_class, target)
            views.append(await anyio.to_thread.run_sync(view, Env))
    assert all(v == views[0] for v in views), views


@pytest.mark.parametrize("target", ["mcpgym.servers.echo", "mcpgym.servers.echo:Echo"])
def test_text_targets_run_in_process_through_the_one_parser(target: str) -> None:
    Env = mcpgym.trl.environment_class(target)
    assert getattr(Env, "_target") is Echo  # noqa: B009 - the class, not the text: in-process, picklable
    env = Env()
    env.reset(seed=0)
    assert env.echo_message(message="orbit") == "orbit" and env.get_reward() == 1.0  # type: ignore[attr-defined]


def test_reset_info_reaches_reward_functions_not_the_model() -> None:
    from tests.envs import Briefed

    env = mcpgym.trl.environment_class(Briefed)()
    assert env.reset(seed=3) == '{"prompt": "call noop"}'
    assert env.reset_info == {"task_id": "t-1", "seed": 3}


def test_a_tool_call_before_reset_fails() -> None:
    env = mcpgym.trl.environment_class(Echo)()
    with pytest.raises(mcpgym.trl.EnvironmentToolError, match="reset"):
        env.echo_message(message="hi")  # type: ignore[attr-defined]


def test_reset_reads_seed_options_and_option_columns() -> None:
    Env = mcpgym.trl.environment_class(Hostile, option_columns=["task_id"], name="Custom")
    assert Env.__name__ == "Custom"
    env = Env()
    row = {"prompt": [{"role": "user", "content": ""}], "seed": 5, "options": {"a": 1}, "task_id": "t7", "other": 1}
    assert env.reset(**row) == 'seed=5 options={"a": 1, "task_id": "t7"}'  # empty prompt: no separator
    assert env.reset() == "seed=None options=null"


def test_dataset_rows_start_groups_identically() -> None:
    Env = mcpgym.trl.environment_class(Echo)
    ds = mcpgym.trl.dataset(Env, 3, options=[{"target": "apple"}, {"target": "river"}, {"target": "stone"}])
    assert ds.column_names == ["prompt", "seed", "options"]
    assert ds[1]["prompt"] == [{"role": "user", "content": Echo.__doc__}]
    first = [Env().reset(**ds[i]) for i in (0, 1, 1)]  # TRL repeats each row for the G rollouts of a group
    assert first[1] == first[2] != first[0]
    assert '"target": "river"' in str(first[1])
    plain = mcpgym.trl.dataset("mcpgym.servers.echo:Echo", [7, 8], prompt="Go.", system="Be brief.")
    assert plain[0] == {
        "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Go."}],
        "seed": 7,
    }
    with pytest.raises(ValueError, match="one per seed"):
        mcpgym.trl.dataset(Env, 2, options=[{}])


def test_dataset_options_keep_their_shape_and_types() -> None:
    Env = mcpgym.trl.environment_class(Hostile)
    options: list[dict[str, Any]] = [{"task_id": 3}, {"task_id": "HumanEval/3", "hint": "x"}]
    ds = mcpgym.trl.dataset(Env, 2, options=options)  # an Arrow struct would refuse the mixed types
    assert [str(Env().reset(**row)).strip() for row in ds] == [
        'seed=0 options={"task_id": 3}',  # and no invented `"hint": null`
        'seed=1 options={"hint": "x", "task_id": "HumanEval/3"}',
    ]


def test_an_instance_reopens_after_close() -> None:
    env = mcpgym.trl.environment_class(Echo)()
    env.reset(seed=0)
    mcpgym.trl.close()
    assert "Say the word" in str(env.reset(seed=1))  # not "This portal is not running"
    assert env.echo_message(message="x") is not None  # type: ignore[attr-defined]


def test_a_tool_call_after_close_fails_the_episode_without_hanging() -> None:
    env = mcpgym.trl.environment_class(Echo)()
    env.reset(seed=0)
    mcpgym.trl.close()
    with pytest.raises(RuntimeError, match="reset"):
        env.echo_message(message="x")  # type: ignore[attr-defined]
    assert env.failed and env.get_reward() is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_reopens_its_own_connection() -> None:
    env = mcpgym.trl.environment_class(Echo)()
    env.reset(seed=0)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        signal.alarm(20)  # a hang (the bug) fails the test instead of blocking it
        try:
            os._exit(0 if "Say the word" in str(env.reset(seed=1)) else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert "Say the word" in str(env.reset(seed=2))  # the parent's connection is untouched


def test_close_closes_every_session_and_stops_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    from mcpgym.trl._runtime import Session, runtime

    closed: list[str] = []

    class Exits:
        def __init__(self, name: str, error: Exception | None = None) -> None:
            self.name, self.error = name, error

        async def __aenter__(self) -> Exits:
            return self

        async def __aexit__(self, *exc_info: object) -> None:
            closed.append(self.name)
            if self.error is not None:
                raise self.error

    for env in (Exits("gone", ConnectionError("server already gone")), Exits("fine")):
        runtime._sessions.append(Session(runtime, env))  # type: ignore[arg-type]
    mcpgym.trl.close()
    assert closed == ["gone", "fine"] and runtime._portal is None and runtime._sessions == []
    assert "closing a connection failed" in caplog.text


def test_an_infrastructure_failure_leaves_the_episode_unscored() -> None:
    env = mcpgym.trl.environment_class(Echo)()
    env.reset(seed=0)
    assert env._session is not None
    env._session.call(env._session.env.close_episode)  # as if the server restarted under the episode
    with pytest.raises(Exception) as raised:
        env.echo_message(message="hi")  # type: ignore[attr-defined]
    assert not isinstance(raised.value, mcpgym.trl.EnvironmentToolError)
    assert env.failed and env.get_reward() is None
    env.reset(seed=1)
    assert not env.failed and env.get_reward() == 0.0


def test_a_structured_only_result_is_shown_as_json() -> None:
    rollout = importlib.import_module("mcpgym.harness.rollout")  # `harness.rollout` the attribute is the function

    result = types.CallToolResult(content=[], structured_content={"rows": [1, 2]})
    assert mcpgym.trl.tool_text(result) == '{"rows": [1, 2]}'
    assert rollout.tool_text is mcpgym.trl.tool_text  # the model reads the same text in training and in rollouts


def _run_in_child(factory: mcpgym.trl.EnvironmentFactory) -> tuple[str, str | None, str]:
    env = factory()
    first = env.reset(seed=0)
    return type(env).__name__, first, env.echo_message(message="hi")  # type: ignore[attr-defined]


def test_factory_pickles_and_builds_in_a_child_process() -> None:
    factory = mcpgym.trl.EnvironmentFactory(Echo, option_columns=["target"])
    assert factory().__class__ is factory().__class__  # one class per process: TRL matches get_reward by type
    clone = pickle.loads(pickle.dumps(factory))
    assert clone._cls is None and clone.kwargs == {"option_columns": ["target"]}
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        name, first, echoed = pool.apply(_run_in_child, (factory,))
    assert (name, echoed) == ("EchoEnv", "hi") and first is not None and "orbit" in first


def test_importing_mcpgym_trl_imports_no_trainer_stack() -> None:
    heavy = "{'trl', 'torch', 'transformers', 'datasets'}"
    code = f"import sys, mcpgym, mcpgym.trl; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_public_names() -> None:
    assert mcpgym.trl.__all__ == [
        "EnvironmentFactory",
        "EnvironmentToolError",
        "EpisodeOverError",
        "MCPEnvironment",
        "ToolCallError",
        "close",
        "component_rewards",
        "dataset",
        "environment_class",
        "episode_return",
        "multimodal_content",
        "rollout_func",
        "tool_text",
    ]


def test_observation_renders_the_first_observation() -> None:
    def prompt_only(observation: Any) -> str:
        return str(observation["prompt"])

    env = mcpgym.trl.environment_class(Echo, observation=prompt_only)()
    assert env.reset(seed=0, options={"target": "tiger"}) == "Say the word 'tiger' using echo_message."
    assert mcpgym.trl.environment_class(Echo, observation=lambda _: None)().reset(seed=0) is None
