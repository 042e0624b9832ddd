"""`EnvironmentFactory` and `dataset`: the pieces around the generated class.

Layer: top, beside `_tool_class`. `datasets` is imported only when a dataset is built.
"""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mcpgym._core.extras import needs
from mcpgym._core.tasks import CURRICULUM_KEY
from mcpgym._episode.catalog import Task
from mcpgym._targets.connect import Target
from mcpgym._targets.task_list import list_tasks
from mcpgym.trl._runtime import runtime
from mcpgym.trl._tool_class import MCPEnvironment, environment_class

if TYPE_CHECKING:
    from datasets import Dataset  # type: ignore[import-untyped]


class EnvironmentFactory:
    """A picklable zero-argument factory: `GRPOTrainer(environment_factory=EnvironmentFactory(target))`.

    The generated class itself cannot be pickled (it is built at run time), so trainers that
    build environments in child processes get this instead: it pickles as its arguments and
    builds the class once in whichever process first calls it.
    """

    def __init__(self, target: Target, **kwargs: Any) -> None:
        self.target = target
        self.kwargs = kwargs
        self._cls: type[MCPEnvironment] | None = None

    @property
    def environment_class(self) -> type[MCPEnvironment]:
        if self._cls is None:
            self._cls = environment_class(self.target, **self.kwargs)
        return self._cls

    def __call__(self) -> MCPEnvironment:
        return self.environment_class()

    def __getstate__(self) -> dict[str, Any]:
        return {"target": self.target, "kwargs": self.kwargs, "_cls": None}

    def __repr__(self) -> str:
        return f"EnvironmentFactory({self.target!r})"


def dataset(
    env: type[MCPEnvironment] | EnvironmentFactory | Target,
    seeds: int | Iterable[int] | None = None,
    *,
    prompt: str | None = None,
    system: str | None = None,
    options: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    tasks: Sequence[Task] | bool | None = None,
    curriculum: int | None = None,
) -> Dataset:
    """A GRPO dataset with one row per seed: `prompt` (chat messages), `seed`, and `options` if given
    (stored as JSON text, so rows may differ in keys and types).

    TRL repeats each row for the G rollouts of a group, and the generated `reset` starts
    each from the row's `seed` and `options`: one group, one start state. `seeds` is a count
    (`range(seeds)`) or the seeds themselves; `options` one mapping for every row or one per
    seed (task ids, say). The user message is `prompt`, by default the environment's
    instructions; `reset` appends the first observation to it.

    `tasks` gives one row per task instead, with the task's own seed and options: a list (e.g.
    `mcpgym.list_tasks`'s answer, filtered as you like) or True for the environment's whole
    task catalog.

    `curriculum=G` (TRL's `num_generations`) has the server's task sampler choose instead
    (docs/curriculum.md): `seeds` rows (a count), each naming a group of G resets; the first
    reset of a group draws a task, its G-1 siblings play the same task and seed, and a row met
    again (the next epoch) draws afresh. The environment must be a server (a URL or command)
    served with a curriculum (`mcpgym serve ... --curriculum learnability`).
    """
    if curriculum is not None:
        if tasks is not None or options is not None or not isinstance(seeds, int) or curriculum < 1:
            raise ValueError("curriculum=G needs seeds=N (how many groups) and no tasks or options")
        run = secrets.token_urlsafe(8)  # groups of different datasets never meet on the server
        options = [{CURRICULUM_KEY: {"group": f"{run}/{i}", "size": curriculum}} for i in range(seeds)]
    if tasks is True:
        tasks = runtime.run(functools.partial(list_tasks, _target(env), prompts=False))
    if tasks is not None and tasks is not False:
        if seeds is not None or options is not None:
            raise ValueError("give tasks, or seeds (and options), not both")
        seeds, options = [t.seed for t in tasks], [t.options for t in tasks]  # type: ignore[misc]
    if seeds is None:
        raise ValueError("dataset() needs seeds (a count or the seeds) or tasks")
    with needs("trl", "mcpgym.trl.dataset (the datasets package)"):
        import datasets
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    text = prompt if prompt is not None else _instructions(env)
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
    rows: dict[str, list[Any]] = {"prompt": [messages] * len(seed_list), "seed": seed_list}
    if options is None:
        return datasets.Dataset.from_dict(rows)
    per_row = [dict(options)] * len(seed_list) if isinstance(options, Mapping) else [dict(o) for o in options]
    if len(per_row) != len(seed_list):
        raise ValueError(f"options has {len(per_row)} entries for {len(seed_list)} seeds: give one per seed")
    # Stored as JSON text: an Arrow struct column would add every key to every row (as None) and
    # refuse a key whose type differs between rows (task ids 3 and "HumanEval/3"). datasets' `Json`
    # feature (where it exists) decodes the text back to the dict on access; `reset` decodes plain text.
    rows["options"] = [json.dumps(o) for o in per_row]
    features = datasets.Dataset.from_dict(rows).features
    if hasattr(datasets, "Json"):
        features["options"] = datasets.Json()
        rows["options"] = per_row
    return datasets.Dataset.from_dict(rows, features=features)


def _target(env: type[MCPEnvironment] | EnvironmentFactory | Target) -> Target:
    if isinstance(env, EnvironmentFactory):
        return env.target
    if isinstance(env, type) and issubclass(env, MCPEnvironment):
        return env._target
    return env


def _instructions(env: type[MCPEnvironment] | EnvironmentFactory | Target) -> str:
    if isinstance(env, EnvironmentFactory):
        env = env.environment_class
    if not (isinstance(env, type) and issubclass(env, MCPEnvironment)):
        env = environment_class(env)
    return env._instructions or "Use the tools to complete the task."
