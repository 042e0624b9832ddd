"""mcpgym: RL and agent environments that are MCP servers.

An environment's tools are its actions; `reset` / `state` ride on a control plane that agents
never see; reward and done travel in every tool result's `_meta`. The same environment is
driven in-process, over stdio or over streamable HTTP with identical results.
"""

from mcpgym._check import check_environment
from mcpgym._cli import run
from mcpgym._connect import Target, connect, load_environment
from mcpgym._env import AsyncEnv
from mcpgym._environment import Environment
from mcpgym._errors import MCPError, ToolError
from mcpgym._process import ServerProcess
from mcpgym._protocol import EPISODE_HEADER, EPISODE_KEY, STEP_KEY
from mcpgym._recording import StepRecord, Trajectory, read_trajectories
from mcpgym._server import GymServer
from mcpgym._shared import SharedClient
from mcpgym._sync import SyncEnv, connect_sync
from mcpgym._tools import tool
from mcpgym._types import Action, CallToolAction, EpisodeState, JSONValue, ListToolsAction, StepResult
from mcpgym._vector import AsyncVectorEnv, VectorStep, connect_vector
from mcpgym._vector_sync import SyncVectorEnv, connect_vector_sync

__version__ = "0.1.0"

__all__ = [
    "EPISODE_HEADER",
    "EPISODE_KEY",
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
    "ServerProcess",
    "SharedClient",
    "StepRecord",
    "StepResult",
    "SyncEnv",
    "SyncVectorEnv",
    "Target",
    "ToolError",
    "Trajectory",
    "VectorStep",
    "__version__",
    "check_environment",
    "connect",
    "connect_sync",
    "connect_vector",
    "connect_vector_sync",
    "load_environment",
    "read_trajectories",
    "run",
    "tool",
]
