"""OpenEnv's side of `bench_vector`: an echo environment on OpenEnv's server, driven by its
WebSocket client, n episodes at once. Runs under a Python with `openenv-core` installed (a
throwaway venv: it is no dependency of ours), started by `benchmarks.bench_vector`:

    OPENENV_PYTHON -m benchmarks.openenv_echo run N SECONDS   # prints one JSON line

`run` starts `serve` in a child process on a free loopback port (as our benchmarks run servers),
opens N `EnvClient`s (one WebSocket session each), resets them, steps them all concurrently for
SECONDS, and reports steps, wall time, its own CPU seconds and the server's.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

CLK_TCK = os.sysconf("SC_CLK_TCK")


class EchoAction(Action):  # type: ignore[misc]
    message: str


class EchoObservation(Observation):  # type: ignore[misc]
    echoed: str = ""


class Echo(Environment):  # type: ignore[misc]
    """The echo step of our benchmarks: say a message back, no reward, never done."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id="e", step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
        self._state = State(episode_id=episode_id or "e", step_count=0)
        return EchoObservation(echoed="ready")

    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:
        self._state.step_count += 1
        return EchoObservation(echoed=action.message, reward=0.0)

    @property
    def state(self) -> Any:
        return self._state


class EchoClient(EnvClient):  # type: ignore[misc]
    def _step_payload(self, action: EchoAction) -> dict[str, Any]:
        return {"message": action.message}

    def _parse_result(self, payload: dict[str, Any]) -> Any:
        observation = EchoObservation(**payload.get("observation", {}))
        return StepResult(observation=observation, reward=payload.get("reward"), done=bool(payload.get("done")))

    def _parse_state(self, payload: dict[str, Any]) -> Any:
        return State(**payload)


def serve(port: int, sessions: int) -> None:
    import uvicorn

    app = create_fastapi_app(Echo, EchoAction, EchoObservation, max_concurrent_envs=sessions)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


async def _connected(url: str, deadline: float) -> EchoClient:
    while True:
        try:
            client = EchoClient(base_url=url)
            await client.connect()
            return client
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)  # the child server is still starting (a start-up wait, not a sync)


async def drive(url: str, n: int, seconds: float, server_pid: int) -> dict[str, float]:
    first = await _connected(url, time.monotonic() + 30)
    clients = [first, *[EchoClient(base_url=url) for _ in range(n - 1)]]
    for client in clients[1:]:
        await client.connect()
    for client in clients:
        await client.reset()
    action = EchoAction(message="hi")
    steps = 0

    async def loop(client: EchoClient, until: float) -> None:
        nonlocal steps
        while time.perf_counter() < until:
            await client.step(action)
            steps += 1

    await asyncio.gather(*(loop(c, time.perf_counter() + min(0.3, seconds / 4)) for c in clients))  # warm
    steps = 0
    cpu0, server0, start = time.process_time(), _cpu(server_pid), time.perf_counter()
    await asyncio.gather(*(loop(c, start + seconds) for c in clients))
    wall, cpu, server = time.perf_counter() - start, time.process_time() - cpu0, _cpu(server_pid) - server0
    for client in clients:
        await client.close()
    return {"steps": steps, "wall": wall, "client_cpu": cpu, "server_cpu": server}


def run(n: int, seconds: float) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = subprocess.Popen([sys.executable, "-m", "benchmarks.openenv_echo", "serve", str(port), str(n)])
    try:
        result = asyncio.run(drive(f"http://127.0.0.1:{port}", n, seconds, child.pid))
    finally:
        child.kill()
        child.wait()
    print(json.dumps(result))


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if command == "serve":
        serve(int(rest[0]), int(rest[1]))
    else:
        run(int(rest[0]), float(rest[1]))
