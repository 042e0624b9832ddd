"""mcpgym.gateway: token-faithful traces of the model calls an agent harness makes.

An OpenAI-compatible reverse proxy in front of an inference engine (vLLM, SGLang, any
OpenAI-compatible server). It asks the engine for the token ids and logprobs it ran, records
every call per episode as it happens, and merges an episode's calls into one token sequence
with a loss mask (model tokens 1, everything else 0), branching where a prompt diverges.

    mcpgym gateway --upstream http://127.0.0.1:8000/v1 --record runs/traces
    mcpgym rollout mcpgym.servers.echo:Echo --base-url http://127.0.0.1:8100/v1 --model M
    traces = mcpgym.read_traces("runs/traces")

See docs/traces.md and rfcs/0018-token-faithful-traces.md.
"""

from mcpgym.gateway.app import TOKENS_HEADER, Gateway, GatewayConfig
from mcpgym.gateway.merge import merge
from mcpgym.gateway.record import read_calls
from mcpgym.gateway.serve import running, serve
from mcpgym.gateway.traces import Trace, read_traces
from mcpgym.gateway.types import Call, Choice, TokenSequence

__all__ = [
    "TOKENS_HEADER",
    "Call",
    "Choice",
    "Gateway",
    "GatewayConfig",
    "TokenSequence",
    "Trace",
    "merge",
    "read_calls",
    "read_traces",
    "running",
    "serve",
]
