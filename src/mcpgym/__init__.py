"""mcpgym: RL and agent environments that are MCP servers.

An environment's tools are its actions; `reset` / `state` ride on a control plane that agents
never see; reward and done travel in every tool result's `_meta`. The same environment is
driven in-process, over stdio or over streamable HTTP with identical results.

Names: a `Recording` is the server's record of one episode (`read_recordings`); a rollout's
episode is `mcpgym.harness.Trajectory`. The old `Trajectory` / `read_trajectories` still
import, with a `DeprecationWarning`, until 0.2.
"""

import typing as _typing

from mcpgym._core.deprecated import deprecated_names as _deprecated_names
from mcpgym._core.errors import AT_CAPACITY, HTTP_ERROR, MCPError, ToolError
from mcpgym._core.protocol import EPISODE_HEADER, EPISODE_KEY, RUBRIC_KEY, STEP_KEY
from mcpgym._core.types import Action, CallToolAction, EpisodeState, JSONValue, ListToolsAction, Rendering, StepResult
from mcpgym._episode.catalog import Task
from mcpgym._episode.environment import Environment, Reset
from mcpgym._episode.render import Render
from mcpgym._episode.tools import tool

if _typing.TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from mcpgym._cli.process import ServerProcess
    from mcpgym._cli.serve import run
    from mcpgym._client.api import AsyncEnv
    from mcpgym._client.shared import SharedClient
    from mcpgym._client.sync import SyncEnv, connect_sync
    from mcpgym._client.vector import AsyncVectorEnv, VectorStep, connect_vector
    from mcpgym._client.vector_sync import SyncVectorEnv, connect_vector_sync
    from mcpgym._episode.check import check_environment
    from mcpgym._episode.sampler import SamplerConfig
    from mcpgym._recording.recording import Recording, StepRecord, read_recordings
    from mcpgym._server.gym_server import GymServer
    from mcpgym._targets.connect import Target, TargetError, connect, load_environment
    from mcpgym._targets.curriculum import task_stats
    from mcpgym._targets.spec import RunSpec, SpecError, load_spec
    from mcpgym._targets.task_list import list_tasks
    from mcpgym.gateway.traces import read_traces
    from mcpgym.wrapping import wrap

# `import mcpgym` loads the author's side (what an environment module needs) and nothing else:
# the client doors, the server and its HTTP stack, run specs (yaml), the CLI and the wrap proxy
# load when one of their names is first used (issue #22: the eager import cost 775 modules).
_LAZY = {
    "task_stats": "mcpgym._targets.curriculum",
    "SamplerConfig": "mcpgym._episode.sampler",
    "read_traces": "mcpgym.gateway.traces",
    "AsyncEnv": "mcpgym._client.api",
    "AsyncVectorEnv": "mcpgym._client.vector",
    "GymServer": "mcpgym._server.gym_server",
    "Recording": "mcpgym._recording.recording",
    "RunSpec": "mcpgym._targets.spec",
    "ServerProcess": "mcpgym._cli.process",
    "SharedClient": "mcpgym._client.shared",
    "SpecError": "mcpgym._targets.spec",
    "StepRecord": "mcpgym._recording.recording",
    "SyncEnv": "mcpgym._client.sync",
    "SyncVectorEnv": "mcpgym._client.vector_sync",
    "Target": "mcpgym._targets.connect",
    "TargetError": "mcpgym._targets.connect",
    "VectorStep": "mcpgym._client.vector",
    "check_environment": "mcpgym._episode.check",
    "connect": "mcpgym._targets.connect",
    "connect_sync": "mcpgym._client.sync",
    "connect_vector": "mcpgym._client.vector",
    "connect_vector_sync": "mcpgym._client.vector_sync",
    "list_tasks": "mcpgym._targets.task_list",
    "load_environment": "mcpgym._targets.connect",
    "load_spec": "mcpgym._targets.spec",
    "read_recordings": "mcpgym._recording.recording",
    "run": "mcpgym._cli.serve",
    "wrap": "mcpgym.wrapping",
}

__version__ = "0.1.0"

__all__ = [
    "AT_CAPACITY",
    "EPISODE_HEADER",
    "EPISODE_KEY",
    "HTTP_ERROR",
    "RUBRIC_KEY",
    "STEP_KEY",
    "Action",
    "AsyncEnv",
    "AsyncVectorEnv",
    "CallToolAction",
    "Environment",
    "EpisodeState",
    "GymServer",
    "JSONValue",
    "ListToolsAction",
    "MCPError",
    "Recording",
    "Render",
    "Rendering",
    "Reset",
    "RunSpec",
    "SamplerConfig",
    "ServerProcess",
    "SharedClient",
    "SpecError",
    "StepRecord",
    "StepResult",
    "SyncEnv",
    "SyncVectorEnv",
    "Target",
    "TargetError",
    "Task",
    "ToolError",
    "VectorStep",
    "__version__",
    "check_environment",
    "connect",
    "connect_sync",
    "connect_vector",
    "connect_vector_sync",
    "list_tasks",
    "load_environment",
    "load_spec",
    "read_recordings",
    "read_traces",
    "run",
    "task_stats",
    "tool",
    "wrap",
]

if _typing.TYPE_CHECKING:  # the deprecated names, typed; at run time `__getattr__` resolves them and warns
    Trajectory = Recording
    read_trajectories = read_recordings
else:
    __getattr__ = _deprecated_names(
        __name__,
        {
            "Trajectory": (
                "Recording",
                "the server's record of an episode; a rollout's is harness.Trajectory",
            ),
            "read_trajectories": ("read_recordings", "it returns Recordings"),
        },
        lazy=_LAZY,
    )

    def __dir__() -> list[str]:
        return sorted({*globals(), *_LAZY})
