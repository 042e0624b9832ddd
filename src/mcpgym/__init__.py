"""mcpgym: RL and agent environments that are MCP servers.

An environment's tools are its actions; `reset` / `state` ride on a control plane that agents
never see; reward and done travel in every tool result's `_meta`. The same environment is
driven in-process, over stdio or over streamable HTTP with identical results.
"""

from mcpgym._catalog import Task
from mcpgym._check import check_environment
from mcpgym._cli import run
from mcpgym._connect import Target, TargetError, connect, load_environment
from mcpgym._env import AsyncEnv
from mcpgym._environment import Environment, Reset
from mcpgym._errors import AT_CAPACITY, HTTP_ERROR, MCPError, ToolError
from mcpgym._process import ServerProcess
from mcpgym._protocol import EPISODE_HEADER, EPISODE_KEY, RUBRIC_KEY, STEP_KEY
from mcpgym._recording import StepRecord, Trajectory, read_trajectories
from mcpgym._server import GymServer
from mcpgym._shared import SharedClient
from mcpgym._spec import RunSpec, SpecError, load_spec
from mcpgym._sync import SyncEnv, connect_sync
from mcpgym._task_list import list_tasks
from mcpgym._tools import tool
from mcpgym._types import Action, CallToolAction, EpisodeState, JSONValue, ListToolsAction, StepResult
from mcpgym._vector import AsyncVectorEnv, VectorStep, connect_vector
from mcpgym._vector_sync import SyncVectorEnv, connect_vector_sync
from mcpgym._wrap import wrap

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
    "Reset",
    "RunSpec",
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
    "Trajectory",
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
    "read_trajectories",
    "run",
    "tool",
    "wrap",
]
