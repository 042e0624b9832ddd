"""Run specs: an `mcpgym.yaml` that names an environment and how to run it.

Layer: configuration, below the facades that accept it (`connect`, `mcpgym serve`,
`mcpgym.trl.environment_class`, `mcpgym rollout`); imports only the target loader.

```yaml
environment: mcpgym.servers.coding:Coding    # MODULE:CLASS (in-process), http(s)://.../mcp, or a command
args: {partial_credit: true}          # constructor keyword arguments (MODULE:CLASS only)
tasks: {count: 32, seed: 0}           # the episodes `mcpgym rollout` plays (reset seeds / options)
reward: {hide: false}                 # keep reward stamps out of results sent to plain agents
limits: {max_episodes: 1000, idle_timeout: 900, call_timeout: 300}
serve: {http: true, port: 8000}       # how `mcpgym serve` serves it
curriculum: {sampler: learnability}   # which task a drawn reset plays (uniform by default)
```

Every field is validated; an unknown key, a wrong type or a bad value is a `SpecError` naming
the file, the line and the field (`mcpgym.yaml:7: limits.idle_timout: unknown field (did you
mean 'idle_timeout'?)`). `RunSpec.model_json_schema()` is the schema editors validate against
(docs/mcpgym.schema.json, kept current by a test).
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from pathlib import Path
from typing import Annotated, Any, TypeGuard

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field

from mcpgym._episode.sampler import SamplerConfig
from mcpgym._server.http import DEFAULT_MAX_BODY_BYTES
from mcpgym._targets.target import FILE_FORMATS, SCHEMES, ParsedTarget, TargetError, parse, scheme_target

SUFFIXES = (".yaml", ".yml")
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
JSONObject = dict[str, Any]


class SpecError(ValueError):
    """A run spec that cannot be used; the message names the file, line and field."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tasks(_Section):
    """The episodes to play: `mcpgym rollout` resets episode i with `seed + i` and `options`."""

    count: Annotated[int, Field(ge=1, description="episodes to play")] = 1
    seed: Annotated[int | None, Field(description="episode i is reset with seed + i")] = None
    options: Annotated[
        JSONObject | list[JSONObject] | None,
        Field(description="reset options: one object for every episode, or a list cycled through"),
    ] = None


class Reward(_Section):
    """Reward settings the server applies (the reward itself is the environment's)."""

    hide: Annotated[bool, Field(description="leave reward stamps out of results sent to plain agents")] = False


class Limits(_Section):
    """What one server holds and how long it waits."""

    max_episodes: Annotated[int, Field(ge=1, description="live episodes before resets are refused")] = 10_000
    idle_timeout: Annotated[float, Field(gt=0, description="seconds before an idle episode is closed")] = 900.0
    call_timeout: Annotated[float, Field(gt=0, description="seconds before a tool call fails as timed out")] = 300.0
    max_body_bytes: Annotated[int, Field(ge=1024, description="largest HTTP request body")] = DEFAULT_MAX_BODY_BYTES


class Serve(_Section):
    """How `mcpgym serve` serves the environment, and how clients reach a URL."""

    http: Annotated[bool, Field(description="streamable HTTP instead of stdio")] = False
    host: Annotated[str, Field(description="HTTP bind address (loopback unless told)")] = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535, description="HTTP port; 0 picks a free one")] = 8000
    allowed_hosts: Annotated[
        list[str], Field(description="Host headers accepted besides loopback (DNS-rebinding protection)")
    ] = []
    token_env: Annotated[
        str | None,
        Field(description="environment variable holding the bearer token (the token never goes in the file)"),
    ] = "MCPGYM_TOKEN"
    record: Annotated[str | None, Field(description="record every episode as JSONL under this directory")] = None

    def token(self) -> str | None:
        return os.environ.get(self.token_env) or None if self.token_env else None


class RunSpec(_Section):
    """An `mcpgym.yaml`: which environment, built how, played how, served how."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="mcpgym run spec")

    environment: Annotated[
        str,
        Field(
            min_length=1,
            description='MODULE:CLASS (in-process), an http(s)://.../mcp URL, or a command ("python -m pkg")',
        ),
    ]
    args: Annotated[JSONObject, Field(description="constructor keyword arguments (MODULE:CLASS only)")] = {}
    tasks: Tasks = Tasks()
    reward: Reward = Reward()
    limits: Limits = Limits()
    serve: Serve = Serve()
    curriculum: Annotated[
        SamplerConfig, Field(description="the task sampler the server runs for drawn tasks (docs/curriculum.md)")
    ] = SamplerConfig()

    @pydantic.field_validator("args")
    @classmethod
    def _args_need_a_class(cls, args: JSONObject, info: pydantic.ValidationInfo) -> JSONObject:
        environment = info.data.get("environment")
        if args and isinstance(environment, str) and not (_IMPORT_PATH.match(environment) or _bridged(environment)):
            raise ValueError(
                "constructor arguments need an environment class: set environment: MODULE:CLASS (or SCHEME:ID)"
            )
        return args


def is_spec(target: object) -> TypeGuard[str | os.PathLike[str]]:
    """Whether `target` names a run spec file (a str or path ending in .yaml / .yml)."""
    return isinstance(target, str | os.PathLike) and str(target).endswith(SUFFIXES)


def load_spec(path: str | os.PathLike[str]) -> RunSpec:
    """Read and validate a run spec; raise `SpecError` naming the file, line and field on any problem."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{name}: cannot read the run spec: {exc.strerror or exc}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        raise SpecError(f"{where}: not valid YAML: {exc.problem}") from None
    if node is None:
        raise SpecError(f"{name}: the run spec is empty; it needs at least `environment: MODULE:CLASS`")
    _refuse_duplicate_keys(name, node)
    data = yaml.SafeLoader(text).get_single_data()  # the same text again, now as Python values
    try:
        return RunSpec.model_validate(data)
    except pydantic.ValidationError as exc:
        problems = sorted(_describe(node, error) for error in exc.errors())
        raise SpecError("\n".join(f"{name}:{line}: {text}" for line, text in problems)) from None


def _refuse_duplicate_keys(name: str, node: yaml.Node) -> None:
    """YAML keeps the last of two equal keys silently; a spec with one is almost always a mistake."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if key.value in seen:
                raise SpecError(f"{name}:{key.start_mark.line + 1}: {key.value}: given twice")
            seen.add(key.value)
            _refuse_duplicate_keys(name, value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _refuse_duplicate_keys(name, item)


def _describe(root: yaml.Node, error: Any) -> tuple[int, str]:
    """(line, "field: what is wrong") for one pydantic error, located in the YAML source."""
    loc = [part for part in error["loc"] if not (isinstance(part, str) and "[" in part)]  # drop union tags
    node, parent = _locate(root, loc)
    field = ".".join(str(part) for part in loc) or "(top level)"
    line = (node or parent).start_mark.line + 1
    if error["type"] == "extra_forbidden":
        return line, f"{field}: unknown field{_suggestion(loc)}"
    if error["type"] == "missing":
        return line, f"{field}: required field is missing"
    return line, f"{field}: {str(error['msg']).removeprefix('Value error, ')}"


def _locate(root: yaml.Node, loc: list[Any]) -> tuple[yaml.Node | None, yaml.Node]:
    """The node at `loc` (a key's node for an unknown key) and its nearest existing ancestor."""
    node: yaml.Node = root
    for depth, part in enumerate(loc):
        child: yaml.Node | None = None
        last = depth == len(loc) - 1
        if isinstance(node, yaml.MappingNode):
            child = next((k if last else v for k, v in node.value if k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
        if child is None:
            return None, node
        node = child
    return node, node


def _suggestion(loc: list[Any]) -> str:
    """The closest known field to an unknown one, else the known fields."""
    model: type[BaseModel] = RunSpec
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return ""
        model = annotation
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (expected one of: {', '.join(model.model_fields)})"


def spec_target(spec: RunSpec) -> Any:
    """What `mcpgym.connect` should open for `spec`: a class (or partial with `args`), URL or command."""
    if _bridged(spec.environment):  # `gym:ID` and the like: the bridge takes `args` (rfcs/0017-bridges.md)
        bridged = scheme_target(spec.environment, spec.args)
        assert bridged is not None
        return bridged.value
    if _IMPORT_PATH.match(spec.environment):
        from mcpgym._targets.target import load_environment

        cls = load_environment(spec.environment)
        return functools.partial(cls, **spec.args) if spec.args else cls
    return spec.environment


def _bridged(environment: str) -> bool:
    scheme, colon, _ = environment.partition(":")
    return bool(colon) and scheme in SCHEMES


def connect_options(spec: RunSpec) -> dict[str, Any]:
    """Client options for `spec`: the bearer token (from `serve.token_env`) for a URL."""
    token = spec.serve.token()
    if token and spec.environment.startswith(("http://", "https://")):
        return {"headers": {"Authorization": f"Bearer {token}"}}
    return {}


def open_spec(path: str | os.PathLike[str], headers: dict[str, str] | None) -> tuple[Any, dict[str, str] | None]:
    """`connect`'s hook: the target a spec names, and the headers to send (the caller's win)."""
    spec = load_spec(path)
    merged = {**connect_options(spec).get("headers", {}), **(headers or {})}
    return spec_target(spec), merged or None


def _spec_file(path: Path, name: str | None) -> ParsedTarget:
    """The run-spec form of the one target grammar: what the spec's `environment` names."""
    if name is not None:
        raise TargetError(f"{path}: a run spec names one environment; drop ':{name}'", forms=False)
    try:
        return parse(spec_target(load_spec(path)))
    except SpecError as exc:
        raise TargetError(str(exc), forms=False) from None


FILE_FORMATS.update({suffix: _spec_file for suffix in SUFFIXES})


def spec_defaults(command: str, spec: RunSpec) -> dict[str, Any]:
    """Option defaults that `spec` gives `mcpgym COMMAND` (serve or rollout)."""
    return serve_defaults(spec) if command == "serve" else rollout_defaults(spec)


def serve_defaults(spec: RunSpec) -> dict[str, Any]:
    """`mcpgym serve`'s option defaults from `spec` (flags given on the command line still win)."""
    return {
        "http": spec.serve.http,
        "host": spec.serve.host,
        "port": spec.serve.port,
        "allowed_host": list(spec.serve.allowed_hosts),
        "record": spec.serve.record,
        "token": spec.serve.token(),
        "hide_rewards": spec.reward.hide,
        "max_episodes": spec.limits.max_episodes,
        "idle_timeout": spec.limits.idle_timeout,
        "call_timeout": spec.limits.call_timeout,
        "curriculum": spec.curriculum.sampler,
        "explore": spec.curriculum.explore,
        "decay": spec.curriculum.decay,
        "curriculum_seed": spec.curriculum.seed,
        "max_body_bytes": spec.limits.max_body_bytes,
    }


def json_schema() -> str:
    """The JSON Schema of a run spec, as checked in at docs/mcpgym.schema.json."""
    import json

    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **RunSpec.model_json_schema()}
    return json.dumps(schema, indent=2) + "\n"


def rollout_defaults(spec: RunSpec) -> dict[str, Any]:
    """`mcpgym rollout`'s option defaults from `spec.tasks`."""
    import json

    options = json.dumps(spec.tasks.options) if spec.tasks.options is not None else None
    return {"episodes": spec.tasks.count, "seed": spec.tasks.seed, "options": options}
