"""The Dockerfiles, checked without a container engine (none is reachable here): each is parsed
and held to the rules below, its sources exist, and each image's command is run outside a
container, where it must serve and answer the HEALTHCHECK's /healthz. What is NOT tested: building
an image, its base or apt/pip steps, and running it under Docker or Kubernetes."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from mcpgym._cli.init import scaffold

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "deploy" / "Dockerfile"


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[Instruction]

    def last(self, keyword: str) -> Instruction | None:
        return next((i for i in reversed(self.instructions) if i.keyword == keyword), None)


def parse(text: str) -> list[Instruction]:
    """Dockerfile instructions: comments dropped, backslash continuations joined."""
    out: list[Instruction] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        start = start or number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
        pending, start = "", 0
    assert not pending, "a continuation line ends the file"
    return out


def stages(instructions: list[Instruction]) -> list[Stage]:
    """Each FROM opens a stage; a stage built FROM an earlier one inherits its instructions."""
    found: list[Stage] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            base, _, name = ins.args.partition(" AS ")
            parent = next((s for s in found if s.name == base.strip()), None)
            inherited = list(parent.instructions) if parent else []
            found.append(Stage(name.strip() or base.strip(), base.strip(), inherited))
        else:
            assert found, f"line {ins.line}: {ins.keyword} before FROM"
            found[-1].instructions.append(ins)
    return found


def exec_form(ins: Instruction) -> list[str]:
    """CMD / ENTRYPOINT / HEALTHCHECK CMD in JSON (exec) form: signals reach the server, no shell."""
    args = ins.args
    if ins.keyword == "HEALTHCHECK":
        args = args[args.index("CMD ") + 4 :]
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), ins
    return value


def _scaffold_dockerfile(tmp_path: Path) -> Path:
    scaffold("box-env", tmp_path / "box-env")
    return tmp_path / "box-env" / "Dockerfile"


@pytest.fixture(params=["shipped", "scaffold"])
def dockerfile(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return SHIPPED if request.param == "shipped" else _scaffold_dockerfile(tmp_path)


def _serving_stages(path: Path) -> list[Stage]:
    found = stages(parse(path.read_text()))
    return [s for s in found if s.last("CMD") or s.last("ENTRYPOINT")]


def test_parse_joins_continuations_and_skips_comments() -> None:
    text = "# c\nFROM x AS a\nRUN one \\\n    # inner\n    two\nFROM a AS b\nUSER 5\n"
    (a, b) = stages(parse(text))
    assert [(i.keyword, i.args, i.line) for i in a.instructions] == [("RUN", "one  two", 3)]
    assert [i.keyword for i in b.instructions] == ["RUN", "USER"] and b.base == "a"


def test_bases_are_slim_python_pinned_to_a_minor_release(dockerfile: Path) -> None:
    for ins in parse(dockerfile.read_text()):
        if ins.keyword == "FROM" and ":" in ins.args.split()[0]:
            assert re.fullmatch(r"python:3\.1[1-9]-slim", ins.args.split()[0]), ins


def test_every_serving_stage_has_a_healthcheck_on_healthz_and_exposes_its_port(dockerfile: Path) -> None:
    for stage in _serving_stages(dockerfile):
        health, expose = stage.last("HEALTHCHECK"), stage.last("EXPOSE")
        assert health is not None and expose is not None, stage.name
        probe = " ".join(exec_form(health))
        assert f"http://127.0.0.1:{expose.args}/healthz" in probe, probe
        command = exec_form(stage.last("ENTRYPOINT") or stage.last("CMD"))  # type: ignore[arg-type]
        assert command[command.index("--port") + 1] == expose.args
        assert command[command.index("--host") + 1] == "0.0.0.0" and "--http" in command


def test_the_token_is_never_baked_into_an_image(dockerfile: Path) -> None:
    for ins in parse(dockerfile.read_text()):
        if ins.keyword in ("ENV", "ARG", "LABEL"):
            assert "TOKEN" not in ins.args.upper(), ins
        if ins.keyword in ("CMD", "ENTRYPOINT"):
            assert "--token" not in ins.args, ins  # the server reads MCPGYM_TOKEN at run time


def test_stages_run_unprivileged_unless_the_sandbox_needs_root(dockerfile: Path) -> None:
    for stage in _serving_stages(dockerfile):
        user = stage.last("USER")
        assert user is not None, f"{stage.name}: no USER: it would run as root by default"
        if stage.name == "coding":  # mcpgym.servers.coding's sandbox: a uid per submission, tmpfs quotas
            assert user.args == "root"
            assert "docs/containers.md" in dockerfile.read_text()
        else:
            assert user.args.isdigit() and int(user.args) >= 1000, (stage.name, user.args)
            assert f"--uid {user.args}" in " ".join(i.args for i in stage.instructions if i.keyword == "RUN")


def test_what_is_copied_exists_and_the_context_leaves_local_state_out(dockerfile: Path) -> None:
    root = dockerfile.parent if dockerfile != SHIPPED else REPO
    for ins in parse(dockerfile.read_text()):
        if ins.keyword == "COPY":
            *sources, _ = shlex.split(ins.args)
            for source in sources:
                assert (root / source).exists(), (dockerfile, source)
    ignored = (root / ".dockerignore").read_text().split()
    assert {".venv", "**/__pycache__"} <= set(ignored)
    if root == REPO:
        assert {".git", "tests/interop/node_modules"} <= set(ignored)


def test_k8s_runs_the_echo_image_as_its_user_with_its_command() -> None:
    (echo,) = [s for s in _serving_stages(SHIPPED) if s.name == "echo"]
    resources = list(yaml.safe_load_all((REPO / "deploy" / "k8s" / "statefulset.yaml").read_text()))
    (container,) = resources[0]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "mcpgym-env:0.1.0" and "-t mcpgym-env:0.1.0" in SHIPPED.read_text()
    command = exec_form(echo.last("CMD"))  # type: ignore[arg-type]
    assert container["args"][: len(command)] == command  # the image's command, plus --allowed-host
    assert container["securityContext"]["runAsUser"] == int(echo.last("USER").args)  # type: ignore[union-attr]
    (token,) = [e for e in container["env"] if e["name"] == "MCPGYM_TOKEN"]
    assert token["valueFrom"]["secretKeyRef"]["optional"] is False  # bound beyond loopback: a token is required


def _shipped_commands() -> list[tuple[str, list[str]]]:
    return [(s.name, exec_form(s.last("CMD"))) for s in _serving_stages(SHIPPED)]  # type: ignore[arg-type]


def _run_outside_a_container(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> Any:
    argv = [sys.executable if command[0] == "python" else command[0], *command[1:]]
    argv[argv.index("--host") + 1] = "127.0.0.1"  # tests bind loopback only
    argv[argv.index("--port") + 1] = "0"
    return subprocess.Popen(argv, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)


def test_image_commands_name_what_the_installed_package_has() -> None:
    """The image pip-installs the package, which ships only `mcpgym` (test_packaging): a checkout's
    short `servers.NAME` would not import there, though it serves in the test below."""
    for stage, command in _shipped_commands():
        named = [word for word in command if word.split(".")[0] in ("servers", "harness")]
        assert not named and "mcpgym.servers." in " ".join(command), (stage, command)


@pytest.mark.parametrize(("stage", "command"), _shipped_commands(), ids=[n for n, _ in _shipped_commands()])
def test_each_image_command_serves_and_answers_its_healthcheck(stage: str, command: list[str]) -> None:
    with _run_outside_a_container(command, REPO) as server:
        try:
            assert server.stderr is not None
            line = ""
            while not line.startswith("serving "):  # coding logs its sandbox first
                line = server.stderr.readline()
                assert line, f"{stage}: the server exited before serving"
            base = line.split()[-1].removesuffix("/mcp")
            assert httpx2.get(f"{base}/healthz", timeout=10).json()["status"] == "ok"
        finally:
            server.terminate()
            server.wait(timeout=30)
