"""`check_environment`: tell an environment author what is wrong with their class.

Layer: tooling over the episode core (cf. gymnasium.utils.env_checker). It drives the class
through the same `Episode` code every door uses, so what passes here serves correctly.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
from collections.abc import Iterator
from typing import Any

import anyio
import jsonschema

from mcpgym._core.errors import MCPError
from mcpgym._episode.catalog import Catalog, Task
from mcpgym._episode.environment import Environment
from mcpgym._episode.episode import Episode
from mcpgym._episode.episode import logger as episode_logger


class EnvironmentCheckError(Exception):
    """Raised by `check_environment` with every problem found, one per line."""

    def __init__(self, env: type, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"{env.__name__} has {len(problems)} problem(s):\n" + "\n".join(f"- {p}" for p in problems))


def check_environment(env: type[Environment], *, raise_on_error: bool = True) -> list[str]:
    """Check an Environment subclass; return its problems (raising `EnvironmentCheckError` unless told not to).

    Checks the tools (names, descriptions, annotated parameters, valid JSON Schemas), that the
    class can be built with no arguments, that `reset` takes `seed` and `options`, returns
    JSON-able observations and is deterministic for a fixed seed, that `close` runs, and that
    the task catalog (if any) holds `mcpgym.Task`s with unique ids whose first task resets.
    """
    if not (inspect.isclass(env) and issubclass(env, Environment)):
        problems = [f"{env!r} is not a subclass of mcpgym.Environment"]
    else:
        with _each_failure_logged_once():
            found = _static_problems(env) + anyio.run(_dynamic_problems, env)
        problems = list(dict.fromkeys(found))  # both instances failing alike is one problem
    if problems and raise_on_error:
        raise EnvironmentCheckError(env if inspect.isclass(env) else type(env), problems)
    return problems


class _Once(logging.Filter):
    """Lets each distinct failure (message and exception) through once: check resets the class
    several times, and one broken reset would otherwise print its traceback at every one."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        key = (record.getMessage(), repr(error))
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


@contextlib.contextmanager
def _each_failure_logged_once() -> Iterator[None]:
    once = _Once()
    episode_logger.addFilter(once)
    try:
        yield
    finally:
        episode_logger.removeFilter(once)


def _static_problems(env: type[Environment]) -> list[str]:
    problems: list[str] = []
    tools = env.__mcpgym_tools__
    if not tools:
        problems.append("no tools: decorate at least one method with @mcpgym.tool (tools are the actions)")
    for spec in tools.values():
        where = f"tool {spec.name!r}"
        if not spec.definition.description:
            problems.append(f"{where} has no description: add a docstring, the agent reads it to choose actions")
        fn = getattr(env, spec.method_name)
        for name, param in list(inspect.signature(fn).parameters.items())[1:]:
            if param.annotation is inspect.Parameter.empty:
                problems.append(f"{where}: parameter {name!r} has no type hint, so its schema accepts anything")
        for schema_name, schema in (("input", spec.definition.input_schema), ("output", spec.definition.output_schema)):
            if schema is None:
                continue
            try:
                jsonschema.Draft202012Validator.check_schema(schema)
            except jsonschema.SchemaError as exc:
                problems.append(f"{where}: its {schema_name} schema is not valid JSON Schema: {exc.message}")
    reset_params = inspect.signature(env.reset).parameters
    if not {"seed", "options"} <= reset_params.keys() and not any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in reset_params.values()
    ):
        problems.append("reset() must accept `seed` and `options` keyword arguments")
    return problems


async def _dynamic_problems(env: type[Environment]) -> list[str]:
    try:
        instances = [env(), env()]
    except Exception as exc:
        return [f"{env.__name__}() failed ({type(exc).__name__}: {exc}); mcpgym builds one instance per episode"]
    observations: list[Any] = []
    problems: list[str] = []
    for number, instance in enumerate(instances):
        episode = Episode(instance, f"check-{number}", owns_env=False)  # we close it ourselves, below
        try:
            observations.append((await episode.start(seed=0, options=None)).observation)
        except MCPError as exc:
            problems.append(exc.message)
        finally:
            await episode.close()
        try:
            close = instance.close()
            if inspect.isawaitable(close):
                await close
        except Exception as exc:
            problems.append(f"close() raised {type(exc).__name__}: {exc}")
    if len(observations) == 2:
        first, second = (json.dumps(o, sort_keys=True) for o in observations)
        if first != second:
            problems.append(
                "reset(seed=0) gave different observations on two instances: seed self.rng, not global state"
            )
    return problems + await _result_problems(env) + await _catalog_problems(env)


async def _result_problems(env: type[Environment]) -> list[str]:
    """Call each tool that takes no arguments (the only calls check can make without guessing)
    after `reset(seed=0)`, and report results that could not be sent: an object JSON cannot
    carry, or a value its output schema refuses. A fresh episode whenever one ends."""
    problems: list[str] = []
    episode: Episode | None = None
    try:
        for spec in env.__mcpgym_tools__.values():
            if spec.definition.input_schema.get("properties"):
                continue
            if episode is None or episode.done:
                if episode is not None:
                    await episode.close()
                episode = Episode(env(), "check-results")
                await episode.start(seed=0, options=None)
            result = (await episode.step(spec.name, {})).observation
            text = " ".join(getattr(block, "text", "") for block in result.content)
            if result.is_error and text.startswith(f"Tool {spec.name!r} returned "):
                problems.append(text)
    except MCPError:
        return problems  # a reset that fails is reported by the checks above
    finally:
        if episode is not None:
            await episode.close()
    return problems


async def _catalog_problems(env: type[Environment]) -> list[str]:
    instance = env()
    try:
        tasks = list(instance.catalog())
        if not all(isinstance(t, Task) for t in tasks):
            return ["catalog() must return mcpgym.Task objects"]
        Catalog(tasks)
    except Exception as exc:
        return [f"catalog() failed: {type(exc).__name__}: {exc}"]
    finally:
        await _close(instance)
    if not tasks:
        return []
    episode = Episode(env(), "check-catalog")
    try:
        await episode.start(tasks[0].seed, dict(tasks[0].options))
    except MCPError as exc:
        return [f"the catalog's first task {tasks[0].id!r} does not reset: {exc.message}"]
    finally:
        await episode.close()
    return []


async def _close(instance: Environment) -> None:
    # A close() that raises is already reported by the checks above: do not report it twice.
    with contextlib.suppress(Exception):
        close = instance.close()
        if inspect.isawaitable(close):
            await close
