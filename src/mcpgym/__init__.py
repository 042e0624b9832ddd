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
from mcpgym._errors import AT_CAPACITY, HTTP_ERROR, MCPError, ToolError
from mcpgym._process import ServerProcess
from mcpgym._protocol import EPISODE_HEADER, EPISODE_KEY, STEP_KEY
from mcpgym._recording import StepRecord, Trajectory, read_trajectories
from mcpgym._server import GymServer
from mcpgym._sync import SyncEnv, connect_sync
from mcpgym._tools import tool
from mcpgym._types import Action, CallToolAction, EpisodeState, JSONValue, ListToolsAction, StepResult

__version__ = "0.1.0"

__all__ = [
    "AT_CAPACITY",
    "EPISODE_HEADER",
    "EPISODE_KEY",
    "HTTP_ERROR",
    "STEP_KEY",
    "Action",
    "AsyncEnv",
    "CallToolAction",
    "Environment",
    "EpisodeState",
    "GymServer",
    "JSONValue",
    "ListToolsAction",
    "MCPError",
    "ServerProcess",
    "StepRecord",
    "StepResult",
    "SyncEnv",
    "Target",
    "ToolError",
    "Trajectory",
    "__version__",
    "check_environment",
    "connect",
    "connect_sync",
    "load_environment",
    "read_trajectories",
    "run",
    "tool",
]
