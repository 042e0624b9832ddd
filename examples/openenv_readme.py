"""OpenEnv's README quick start, run against an mcpgym server.

    python -m mcpgym.servers.echo --http --port 8000 --openenv   # in mcpgym's venv
    python examples/openenv_readme.py http://127.0.0.1:8000      # in a venv with `pip install openenv`

The README imports `EchoEnv` and `CallToolAction` from OpenEnv's echo package (a Hugging Face
Space); `EchoEnv` is OpenEnv's `MCPToolClient` under another name, and `CallToolAction` is
OpenEnv's own, so the imports below name them where `openenv` keeps them and the server URL is
a local one. Everything else is the README's code as it stands. tests/test_openenv_serve.py runs it.
"""

# --8<-- [start:readme]
import asyncio
import sys

from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient as EchoEnv

BASE_URL = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000"


async def main() -> None:
    # Connect to a running Space (async context manager)
    async with EchoEnv(base_url=BASE_URL) as client:
        # Reset the environment
        result = await client.reset()
        print(result.observation.metadata["message"])  # "Echo environment ready!"

        # Send messages
        result = await client.step(
            CallToolAction(
                tool_name="echo_message",
                arguments={"message": "Hello, World!"},
            )
        )
        print(result.observation.result["data"])  # "Hello, World!"
        print(result.reward)


asyncio.run(main())

# Use .sync() for synchronous context manager
with EchoEnv(base_url=BASE_URL).sync() as client:
    result = client.reset()
    result = client.step(
        CallToolAction(
            tool_name="echo_message",
            arguments={"message": "Hello, World!"},
        )
    )
    print(result.observation.result["data"])
# --8<-- [end:readme]
