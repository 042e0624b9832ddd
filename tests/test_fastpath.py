"""The in-process step's shortcuts change nothing: turns keep steps apart and in order, and
objects built without re-validation are the objects validation builds (rfcs/0002, "Cost")."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
import mcp_types as types
import pytest
from pydantic import BaseModel, Field, ValidationError

import mcpgym
from mcpgym._core.fastpath import Turns
from mcpgym._core.types import StepResult, ToolStep, tool_step
from mcpgym._episode.episode import Episode

# --------------------------------------------------------------------------- turns


class Gated(mcpgym.Environment):
    """Each `work` call runs until the test opens its gate; the log shows any overlap."""

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.log: list[str] = []
        self.gates: dict[str, anyio.Event] = {}

    @mcpgym.tool
    async def work(self, label: str) -> str:
        """Wait for this label's gate."""
        self.log.append(f"start {label}")
        await self.gates.setdefault(label, anyio.Event()).wait()
        self.log.append(f"end {label}")
        return label


async def gated_episode() -> tuple[Episode, Gated]:
    env = Gated()
    episode = Episode(env, "gated")
    await episode.start(None, None)
    return episode, env


@pytest.mark.anyio
async def test_contended_steps_of_one_episode_run_one_at_a_time_in_arrival_order() -> None:
    episode, env = await gated_episode()
    outcomes: dict[str, ToolStep] = {}

    async def step(label: str) -> None:
        outcomes[label] = await episode.step("work", {"label": label})

    with anyio.fail_after(5):  # a bound, should turns ever deadlock
        async with anyio.create_task_group() as tg:
            for label in "abcd":
                tg.start_soon(step, label)
            await anyio.wait_all_tasks_blocked()
            assert env.log == ["start a"] and episode.busy
            for label in "dcba":  # opened last-first: only arrival order can explain the log
                env.gates.setdefault(label, anyio.Event()).set()
    assert env.log == [f"{edge} {label}" for label in "abcd" for edge in ("start", "end")]
    assert {label: o.info["step"] for label, o in outcomes.items()} == {"a": 1, "b": 2, "c": 3, "d": 4}
    assert [outcomes[label].observation.content[0] for label in "abcd"] == [
        types.TextContent(type="text", text=label) for label in "abcd"
    ]
    assert not episode.busy


@pytest.mark.anyio
async def test_a_step_cancelled_in_line_leaves_the_line_intact() -> None:
    episode, env = await gated_episode()
    scopes = {label: anyio.CancelScope() for label in "abc"}

    async def step(label: str) -> None:
        with scopes[label]:
            await episode.step("work", {"label": label})

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for label in "abc":
                tg.start_soon(step, label)
            await anyio.wait_all_tasks_blocked()
            scopes["b"].cancel()  # b is waiting in line behind a
            await anyio.wait_all_tasks_blocked()
            for label in "ac":
                env.gates.setdefault(label, anyio.Event()).set()
    assert env.log == ["start a", "end a", "start c", "end c"]
    assert episode.step_count == 2 and not episode.busy


@pytest.mark.anyio
async def test_a_turn_handed_to_a_cancelled_waiter_passes_on() -> None:
    turns = Turns()
    assert turns.take_nowait() and not turns.take_nowait()
    ran: list[str] = []
    scopes = {label: anyio.CancelScope() for label in "ab"}

    async def wait(label: str) -> None:
        with scopes[label]:
            await turns.wait()
            try:
                ran.append(label)
            finally:
                turns.release()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for label in "ab":
                tg.start_soon(wait, label)
            await anyio.wait_all_tasks_blocked()
            scopes["a"].cancel()  # a is cancelled, and before it runs again ...
            turns.release()  # ... is handed the turn: it must pass it on to b
    assert ran == ["b"]
    assert not turns.busy and not turns._waiting


# --------------------------------------------------------------------------- trusted objects


class Texts(mcpgym.Environment):
    @mcpgym.tool
    async def typed(self, s: str) -> str:
        """`-> str`: text content plus structured `{"result": s}`."""
        return s

    @mcpgym.tool
    async def untyped(self, s: str):  # type: ignore[no-untyped-def]  # no annotation: text only
        """Unannotated return: text content only."""
        return s

    @mcpgym.tool(structured_output=False)
    async def unstructured(self, s: str) -> str:
        """`-> str` without structured output."""
        return s

    @mcpgym.tool
    async def pair(self, a: str, b: str) -> str:
        """Two plain strings."""
        return a + b

    @mcpgym.tool
    async def bounded(self, a: Annotated[str, Field(max_length=3)]) -> str:
        """A constrained string: always validated by the model."""
        return a

    @mcpgym.tool
    async def defaulted(self, a: str, b: str = "x") -> str:
        """A defaulted string: the shortcut needs every parameter given."""
        return a + b

    @mcpgym.tool
    async def aliased(self, path: Annotated[str, Field(alias="file-path")]) -> str:
        """An aliased string."""
        return path


def dumps(model: BaseModel) -> tuple[Any, ...]:
    """Everything about a model instance that a user or the wire can observe."""
    return (
        type(model),
        model.model_dump(),
        model.model_dump(mode="json", by_alias=True, exclude_none=True),
        model.model_dump(exclude_unset=True),
        model.model_dump_json(by_alias=True),
        model.model_fields_set,
        model.__pydantic_extra__,
        model.__pydantic_private__,
    )


@pytest.mark.parametrize("name", ["typed", "untyped", "unstructured"])
@pytest.mark.parametrize("text", ["hi", "", 'ünïcödé\n{"json": 1}'])
def test_text_results_equal_the_sdks_validated_conversion(name: str, text: str) -> None:
    spec = Texts.__mcpgym_tools__[name]
    ours, sdk = spec.convert(text), spec.metadata.convert_result(text)
    assert isinstance(sdk, types.CallToolResult)
    assert ours == sdk and dumps(ours) == dumps(sdk)
    assert dumps(ours.content[0]) == dumps(sdk.content[0])


def test_a_trusted_result_is_its_own_object_and_takes_a_meta_stamp() -> None:
    spec = Texts.__mcpgym_tools__["typed"]
    first, second = spec.convert("hi"), spec.convert("hi")
    first.meta = {"stamp": 1}  # what the server does to each step's result
    sdk = spec.metadata.convert_result("hi")
    assert isinstance(sdk, types.CallToolResult)
    sdk.meta = {"stamp": 1}
    assert dumps(first) == dumps(sdk)
    assert second.meta is None and "meta" not in second.model_fields_set


@pytest.mark.parametrize(
    ("result", "reward", "done", "truncated", "step", "components"),
    [
        (Texts.__mcpgym_tools__["typed"].convert("hi"), 0.0, False, False, 1, None),
        (types.CallToolResult(content=[], is_error=True), 1.5, True, True, 8, None),
        (types.CallToolResult(content=[]), 2.0, True, False, 3, {"correct": 1.0, "judge": None}),
    ],
)
def test_step_results_equal_validated_ones_and_stay_frozen(
    result: types.CallToolResult,
    reward: float,
    done: bool,
    truncated: bool,
    step: int,
    components: dict[str, float | None] | None,
) -> None:
    ours = tool_step(result, reward, done, truncated, step, components)
    validated = StepResult[types.CallToolResult](
        observation=result,
        reward=reward,
        done=done,
        truncated=truncated,
        info={"step": step},
        terminated=done and not truncated,
        components=components or {},
    )
    assert ours == validated and dumps(ours) == dumps(validated)
    assert (ours.text, ours.is_error) == (validated.text, validated.is_error)
    with pytest.raises(ValidationError):
        ours.reward = 2.0
    assert ours.model_copy(update={"reward": 2.0}).reward == 2.0


# --------------------------------------------------------------------------- argument validation


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("typed", {"s": "hi"}),
        ("pair", {"a": "x", "b": "y"}),
        ("pair", {"b": "y", "a": "x"}),
        ("defaulted", {"a": "x"}),
        ("defaulted", {"a": "x", "b": "y"}),
        ("bounded", {"a": "abc"}),
        ("aliased", {"file-path": "f"}),
        ("typed", {"s": '["json", "in", "a", "string"]'}),
    ],
)
def test_validated_arguments_equal_the_sdks(name: str, arguments: dict[str, Any]) -> None:
    spec = Texts.__mcpgym_tools__[name]
    sdk = spec.metadata.validate_arguments(arguments)
    renamed = {"file-path": "path"}
    assert spec.validate(arguments) == {renamed.get(k, k): v for k, v in sdk.items()}


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("typed", {"s": 5}),
        ("typed", {}),
        ("pair", {"a": "x", "b": None}),
        ("bounded", {"a": "abcd"}),
        ("typed", {"s": "hi", "extra": 1}),  # undeclared arguments are refused (additionalProperties: false)
    ],
)
def test_invalid_arguments_fail_as_the_sdks_do(name: str, arguments: dict[str, Any]) -> None:
    spec = Texts.__mcpgym_tools__[name]
    with pytest.raises(ValidationError) as sdk:
        spec.metadata.validate_arguments(arguments)
    with pytest.raises(ValidationError) as ours:
        spec.validate(arguments)
    assert ours.value.errors(include_url=False) == sdk.value.errors(include_url=False)


def test_only_bare_str_parameters_take_the_type_check() -> None:
    tools = Texts.__mcpgym_tools__
    assert tools["pair"].str_params == frozenset("ab") and tools["defaulted"].str_params == frozenset("ab")
    assert tools["bounded"].str_params is None and tools["aliased"].str_params is None


# --------------------------------------------------------------------------- failures, told apart


class Point(BaseModel):
    x: int


class Parsing(mcpgym.Environment):
    @mcpgym.tool
    async def parse(self, raw: str) -> str:
        """Parse `raw` as a Point: a bad one raises pydantic's ValidationError inside the tool."""
        return repr(Point.model_validate_json(raw))


@pytest.mark.anyio
@pytest.mark.parametrize("in_memory", [False, True])
async def test_a_validation_error_inside_a_tool_is_the_tools_failure_not_invalid_arguments(in_memory: bool) -> None:
    # The step validates arguments and runs the tool in one `try`; which of the two raised
    # decides the message.
    target: Any = mcpgym.GymServer(Parsing) if in_memory else Parsing
    async with mcpgym.connect(target) as env:
        await env.reset()
        bad_arguments = await env.call_tool("parse", {"raw": 5})
        bad_point = await env.call_tool("parse", {"raw": '{"x": "nope"}'})
        good = await env.call_tool("parse", {"raw": '{"x": 1}'})
    assert bad_arguments.is_error and bad_arguments.text.startswith("Invalid arguments for tool 'parse': raw:")
    assert bad_point.is_error and bad_point.text.startswith("Tool 'parse' raised ValidationError:")
    assert not good.is_error and good.text == "Point(x=1)"
    assert [r.info["step"] for r in (bad_arguments, bad_point, good)] == [1, 2, 3]


@pytest.mark.anyio
async def test_a_malformed_call_in_process_is_a_protocol_error_not_a_step() -> None:
    async with mcpgym.connect(Parsing) as env:
        await env.reset()
        with pytest.raises(mcpgym.MCPError) as caught:
            await env.call_tool("parse", ["not", "an", "object"])  # type: ignore[arg-type]
        assert caught.value.code == -32602 and "Malformed call of tool 'parse'" in caught.value.message
        assert (await env.state()).step_count == 0


# --------------------------------------------------------------------------- frozen steps stay as built


class _Sealed(dict[str, Any]):
    """A step's `info` that refuses writes: a frozen StepResult is complete when it is built."""

    def __setitem__(self, key: str, value: Any) -> None:
        raise AssertionError(f"info[{key!r}] written after the step was built")


@pytest.mark.anyio
async def test_an_unknown_tools_step_is_complete_when_built(monkeypatch: pytest.MonkeyPatch) -> None:
    import mcpgym._core.types as types_module
    import mcpgym._episode.episode as episode_module

    real = types_module.tool_step

    def sealed(*args: Any, **kwargs: Any) -> ToolStep:
        step = real(*args, **kwargs)
        return step.model_copy(update={"info": _Sealed(step.info)})

    monkeypatch.setattr(episode_module, "tool_step", sealed)
    monkeypatch.setattr(types_module, "tool_step", sealed)
    async with mcpgym.connect(Gated) as env:
        await env.reset()
        step = await env.call_tool("no_such_tool")
    assert step.is_error and step.info["unknown_tool"] is True and step.info["step"] == 1


@pytest.mark.anyio
async def test_each_step_after_the_end_has_a_ledger_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    import mcpgym._episode.episode as episode_module

    made: list[object] = []
    real = episode_module.StepLedger  # type: ignore[attr-defined]

    def counted() -> Any:
        made.append(ledger := real())
        return ledger

    monkeypatch.setattr(episode_module, "StepLedger", counted)
    async with mcpgym.connect(Ends) as env:
        await env.reset()
        await env.call_tool("end")
        before = len(made)
        for _ in range(3):
            over = await env.call_tool("end")
            assert over.is_error and over.done
    assert len(made) == before + 3 and len({id(x) for x in made[before:]}) == 3


class Ends(mcpgym.Environment):
    @mcpgym.tool
    async def end(self) -> str:
        """End the episode."""
        self.finish(reward=1.0)
        return "ended"
