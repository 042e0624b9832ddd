"""`gym:ID` targets: Gymnasium environments served as mcpgym environments (#26).

The reference is Gymnasium itself: the same seed and the same actions must give the same
observations, rewards, terminated/truncated flags and info, in-process and over every door.
"""

from __future__ import annotations

import base64
import json
import random
import struct
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

import mcpgym
from mcpgym import CallToolAction
from mcpgym._targets.target import TargetError, parse_text
from mcpgym.bridges.gymnasium import GymnasiumEnvironment
from mcpgym.bridges.gymnasium._spaces import to_json
from mcpgym.testing import assert_doors_agree
from tests.conftest import DOORS, door, stdio

pytestmark = pytest.mark.anyio

TOY_TEXT = [
    "gym:FrozenLake-v1",  # slippery: the seed decides where each move lands
    "gym:FrozenLake-v1?is_slippery=false&map_name=8x8",
    "gym:Taxi-v4",
    "gym:Blackjack-v1",
    "gym:CliffWalking-v1",
]
IMAGE = "gym:CartPole-v1"


def environment(text: str) -> type[GymnasiumEnvironment]:
    cls: type[GymnasiumEnvironment] = parse_text(text).value
    assert issubclass(cls, GymnasiumEnvironment)
    return cls


def reference(text: str, seed: int, actions: list[Any]) -> list[tuple[Any, ...]]:
    """Gymnasium's own episode: (observation, info) after reset, then one row per step until done."""
    cls = environment(text)
    env = gymnasium.make(cls.gym_id, **cls.gym_kwargs)
    observation, info = env.reset(seed=seed)
    rows: list[tuple[Any, ...]] = [(to_json(observation), to_json(info))]
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(action)
        rows.append((to_json(observation), float(reward), terminated, truncated, to_json(info)))
        if terminated or truncated:
            break
    env.close()
    return rows


def actions_for(text: str, seed: int, count: int = 40) -> list[int]:
    space = environment(text).action_space
    assert isinstance(space, spaces.Discrete)
    rng = random.Random(seed)
    return [rng.randrange(int(space.n)) for _ in range(count)]


async def played(target: mcpgym.Target, seed: int, actions: list[Any]) -> list[tuple[Any, ...]]:
    """The same episode through mcpgym: rows shaped like `reference`'s."""
    async with mcpgym.connect(target) as env:
        first = await env.reset(seed=seed)
        rows: list[tuple[Any, ...]] = [(first.observation["observation"], first.info)]
        for action in actions:
            step = await env.call_tool("step", {"action": action})
            assert not step.is_error, step.text
            structured = step.observation.structured_content
            assert structured is not None
            rows.append((structured["observation"], step.reward, step.terminated, step.truncated, structured["info"]))
            if step.done:
                break
    return rows


@pytest.mark.parametrize("text", [*TOY_TEXT, IMAGE])
@pytest.mark.parametrize("seed", [0, 11])
async def test_a_seeded_episode_replays_gymnasiums_own_trajectory(text: str, seed: int) -> None:
    actions = actions_for(text, seed)
    expected = reference(text, seed, actions)
    assert await played(text, seed, actions) == expected
    assert len(expected) >= 2  # the premise: at least one step was compared


@pytest.mark.parametrize("text", ["gym:FrozenLake-v1", IMAGE])
async def test_every_door_gives_the_same_gymnasium_episode(text: str) -> None:
    cls = environment(text)
    actions = actions_for(text, 3, 12)
    script = [("step", {"action": a}) for a in actions] + [("step", {"action": 99})]  # the last is out of range
    rows = await assert_doors_agree(cls, script, seed=3)
    expected = reference(text, 3, actions)
    assert rows[0][1]["observation"] == expected[0][0]
    steps = [row for row in rows if row[0] == "step"]
    for row, want in zip(steps, expected[1:], strict=False):
        assert row[2]["structured_content"]["observation"] == want[0]
        assert row[3:6] == (want[1], want[2] or want[3], want[3])  # reward, done, truncated


async def test_over_stdio_and_http_the_served_text_replays_gymnasium(tmp_path: Path) -> None:
    text = "gym:Taxi-v4"
    actions = actions_for(text, 5)
    expected = reference(text, 5, actions)
    assert await played(stdio(text), 5, actions) == expected
    server = mcpgym.ServerProcess([*_serve(text), "--http", "--host", "127.0.0.1", "--port", "0"])
    server.start()
    try:
        assert await played(server.url, 5, actions) == expected
    finally:
        server.stop()


def _serve(text: str) -> list[str]:
    params = stdio(text)
    return [params.command, *params.args]


def test_discrete_actions_are_bounded_integers_named_as_the_environment_documents_them() -> None:
    tool = environment("gym:FrozenLake-v1").__mcpgym_tools__["step"].definition
    action = tool.input_schema["properties"]["action"]
    assert (action["type"], action["minimum"], action["maximum"]) == ("integer", 0, 3)
    assert "0: Move left, 1: Move down, 2: Move right, 3: Move up" in action["description"]
    assert tool.input_schema["required"] == ["action"]


class SpacesEnv(gymnasium.Env[Any, Any]):
    """A test environment whose action space is every kind the bridge states."""

    def __init__(self) -> None:
        self.metadata = {"render_modes": []}
        self.action_space = spaces.Dict(
            {
                "move": spaces.Discrete(3, start=-1),
                "force": spaces.Box(low=np.array([-1.0, 0.0], np.float32), high=np.array([1.0, 2.0], np.float32)),
                "keys": spaces.MultiDiscrete([2, 5]),
                "flags": spaces.MultiBinary(3),
                "pair": spaces.Tuple((spaces.Discrete(2), spaces.Box(-5, 5, shape=(2, 2), dtype=np.int64))),
            }
        )
        self.observation_space = spaces.Box(-10, 10, shape=(3,), dtype=np.float32)
        self.seen: list[Any] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return self.np_random.uniform(-1, 1, size=3).astype(np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        total = float(action["move"] + action["force"].sum() + action["keys"].sum() + action["pair"][1].sum())
        return np.full(3, total, dtype=np.float32), total, total > 8, False, {"seen": to_json(action)}


def spaces_env(**kwargs: Any) -> SpacesEnv:
    return SpacesEnv(**kwargs)


gymnasium.register("mcpgym-test/Spaces-v0", entry_point=spaces_env, max_episode_steps=4)

GOOD = {"move": -1, "force": [0.5, 1.5], "keys": [1, 4], "flags": [1, 0, 1], "pair": [1, [[1, 2], [3, -4]]]}


def test_box_multidiscrete_dict_and_tuple_spaces_become_array_and_object_schemas() -> None:
    schema = environment("gym:mcpgym-test/Spaces-v0").__mcpgym_tools__["step"].definition.input_schema
    action = schema["$defs"]["DictAction"]
    properties = action["properties"]
    assert sorted(action["required"]) == sorted(GOOD) and action["additionalProperties"] is False
    assert properties["move"]["minimum"] == -1 and properties["move"]["maximum"] == 1
    force = properties["force"]
    assert force["type"] == "array" and force["minItems"] == force["maxItems"] == 2
    assert properties["keys"]["items"] == {"maximum": 4, "minimum": 0, "type": "integer"}
    assert properties["flags"]["items"] == {"maximum": 1, "minimum": 0, "type": "integer"}
    pair = properties["pair"]
    assert pair["type"] == "array" and len(pair["prefixItems"]) == 2
    assert pair["prefixItems"][1]["items"]["type"] == "array" and pair["prefixItems"][1]["minItems"] == 2


async def test_structured_actions_reach_the_environment_and_bad_ones_are_refused_without_a_step() -> None:
    async with mcpgym.connect("gym:mcpgym-test/Spaces-v0") as env:
        await env.reset(seed=1)
        step = await env.call_tool("step", {"action": GOOD})
        assert not step.is_error and step.reward == pytest.approx(-1 + 2.0 + 5 + 2)
        assert step.observation.structured_content["info"]["seen"] == GOOD
        # Out of one entry's own bounds (force[1] must be in [0, 2]): refused, not clipped.
        for bad in (
            {**GOOD, "force": [0.5, -0.5]},
            {**GOOD, "move": 2},
            {**GOOD, "keys": [1, 5]},
            {**GOOD, "extra": 1},
            {k: v for k, v in GOOD.items() if k != "pair"},
        ):
            refused = await env.call_tool("step", {"action": bad})
            assert refused.is_error and refused.reward == 0 and not refused.done, bad
        state = await env.state()
        assert state.step_count == 6 and state.total_reward == pytest.approx(8.0)


async def test_gymnasiums_time_limit_is_truncation_and_its_termination_is_termination() -> None:
    async with mcpgym.connect("gym:mcpgym-test/Spaces-v0") as env:
        await env.reset(seed=1)
        small = {**GOOD, "keys": [0, 0], "pair": [0, [[0, 0], [0, 0]]]}
        steps = [await env.call_tool("step", {"action": small}) for _ in range(4)]
        assert [s.done for s in steps] == [False, False, False, True]
        assert (steps[-1].truncated, steps[-1].terminated) == (True, False)
    async with mcpgym.connect("gym:FrozenLake-v1?is_slippery=false") as env:
        await env.reset(seed=0)
        for action in (1, 1, 2, 2, 1):
            assert not (await env.call_tool("step", {"action": action})).done
        last = await env.call_tool("step", {"action": 2})
        assert (last.reward, last.terminated, last.truncated) == (1.0, True, False)
        again = await env.call_tool("step", {"action": 2})
        assert again.is_error or again.done  # the episode is over: no second reward
        assert (await env.state()).total_reward == 1.0


async def test_a_keyword_time_limit_truncates() -> None:
    async with mcpgym.connect("gym:CliffWalking-v1?max_episode_steps=2") as env:
        await env.reset(seed=0)
        first, second = [await env.call_tool("step", {"action": 0}) for _ in range(2)]
        assert not first.done and (second.done, second.truncated, second.terminated) == (True, True, False)


async def test_results_carry_the_ansi_text_and_the_rgb_array_image() -> None:
    async with mcpgym.connect("gym:FrozenLake-v1") as env:
        first = await env.reset(seed=0)
        assert "S" in first.observation["text"] and "G" in first.observation["text"]
        step = await env.call_tool("step", {"action": 1})
        kinds = [c.type for c in step.observation.content]
        assert kinds == ["text", "text", "image"]
        assert json.loads(step.observation.content[0].text) == step.observation.structured_content  # type: ignore[union-attr]
    async with mcpgym.connect(IMAGE) as env:
        await env.reset(seed=0)
        step = await env.call_tool("step", {"action": 0})
        image = step.observation.content[-1]
        assert image.type == "image" and image.mime_type == "image/png"
        png = base64.b64decode(image.data)
        width, height = struct.unpack(">II", png[16:24])
        frame = gymnasium.make("CartPole-v1", render_mode="rgb_array")
        frame.reset(seed=0)
        frame.step(0)
        assert (height, width) == np.asarray(frame.render()).shape[:2]


@pytest.mark.parametrize("kind", DOORS)
async def test_render_shows_the_current_frame_on_every_door(kind: str) -> None:
    async with door(kind, environment("gym:FrozenLake-v1")) as target, mcpgym.connect(target) as env:
        await env.reset(seed=0)
        before = (await env.state()).render
        step = await env.call_tool("step", {"action": 1})
        after = (await env.state()).render
    assert before is not None and after is not None and before.text != after.text
    assert after.text == step.observation.content[1].text  # type: ignore[union-attr]  # the step's own ansi render
    assert after.image == step.observation.content[2].data  # type: ignore[union-attr]
    assert after.mime_type == "image/png" and base64.b64decode(after.image or "").startswith(b"\x89PNG")


async def test_an_environment_without_render_modes_renders_nothing() -> None:
    async with mcpgym.connect("gym:mcpgym-test/Spaces-v0") as env:
        await env.reset(seed=0)
        assert (await env.state()).render is None


@pytest.mark.parametrize("text", [*TOY_TEXT, IMAGE, "gym:mcpgym-test/Spaces-v0", "gym:Pendulum-v1"])
def test_every_bridged_environment_passes_mcpgym_check(text: str) -> None:
    assert mcpgym.check_environment(environment(text), raise_on_error=False) == []


def test_the_same_text_is_the_same_class_and_keyword_values_are_json() -> None:
    assert environment("gym:FrozenLake-v1?is_slippery=false") is environment("gym:FrozenLake-v1?is_slippery=false")
    cls = environment("gym:FrozenLake-v1?map_name=8x8&is_slippery=false")
    assert cls.gym_kwargs == {"map_name": "8x8", "is_slippery": False}
    assert cls.__mcpgym_target__ == "gym:FrozenLake-v1?is_slippery=false&map_name=%228x8%22"
    assert environment(cls.__mcpgym_target__) is cls


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gym:NoSuchGame-v0", "NoSuchGame"),
        ("gym:FrozenLake-v1?no_such_argument=1", "no_such_argument"),
        ("gym:FrozenLake-v1?=1&&", "key=value"),
        ("gym:Taxi-v3", "Taxi-v4"),  # Gymnasium's own message: a deprecated version names its successor
    ],
)
def test_a_bad_gym_target_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(TargetError, match=says):
        parse_text(text)


async def test_a_run_spec_names_a_gym_target_with_args(tmp_path: Path) -> None:
    spec = tmp_path / "mcpgym.yaml"
    spec.write_text("environment: gym:FrozenLake-v1\nargs: {is_slippery: false, map_name: 8x8}\n")
    cls = parse_text(str(spec)).value
    assert cls is environment("gym:FrozenLake-v1?is_slippery=false&map_name=8x8")
    async with mcpgym.connect(str(spec)) as env:
        assert (await env.reset(seed=0)).observation["observation"] == 0
        step = await env.step(CallToolAction(tool_name="step", arguments={"action": 2}))
        assert step.observation.structured_content["observation"] == 1
