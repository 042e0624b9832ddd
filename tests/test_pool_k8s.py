"""deploy/k8s, checked offline: core resources against the Kubernetes schemas bundled in
`kubernetes-validate`; the Gateway API / Envoy Gateway resources (CRDs, whose schemas no package
we install ships) by the fields we rely on; and the server started with the manifest's own
flags accepts the pod URLs the pool client uses, refuses other hosts, and answers probes."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import kubernetes_validate  # type: ignore[import-untyped]  # ships no type information
import pytest
import yaml

import mcpgym
from mcpgym.pool import statefulset_urls
from mcpgym.servers.echo import Echo
from tests.conftest import serve_app

pytestmark = pytest.mark.anyio

BASE = Path(__file__).resolve().parent.parent / "deploy" / "k8s"
K8S_VERSION = "1.32.0"
CORE_KINDS = {"StatefulSet", "Service"}


def render() -> list[dict[str, Any]]:
    """The base's resources with its common labels, as `kubectl kustomize` would emit them
    (the base uses no patches or generators, so this is the whole rendering)."""
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    labels = {k: v for entry in kustomization.get("labels", []) for k, v in entry["pairs"].items()}
    docs = [doc for name in kustomization["resources"] for doc in yaml.safe_load_all((BASE / name).read_text())]
    for doc in docs:
        doc["metadata"].setdefault("labels", {}).update(labels)
    return docs


@pytest.fixture(scope="module")
def resources() -> dict[str, dict[str, Any]]:
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in render()}


def container(resources: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (env,) = resources["StatefulSet/mcpgym-env"]["spec"]["template"]["spec"]["containers"]
    return dict(env)


def test_every_file_is_in_the_kustomization() -> None:
    listed = set(yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}


def test_core_resources_match_the_kubernetes_schemas(resources: dict[str, dict[str, Any]]) -> None:
    core = [d for d in resources.values() if d["kind"] in CORE_KINDS]
    assert len(core) == 3
    for doc in core:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_schema_check_can_fail(resources: dict[str, dict[str, Any]]) -> None:
    broken = copy.deepcopy(resources["StatefulSet/mcpgym-env"])
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/healthz"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_the_pool_is_a_statefulset_behind_a_headless_service(resources: dict[str, dict[str, Any]]) -> None:
    sts, headless = resources["StatefulSet/mcpgym-env"], resources["Service/mcpgym-env"]
    pods = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["serviceName"] == "mcpgym-env" and headless["spec"]["clusterIP"] == "None"
    for service in (headless, resources["Service/mcpgym-env-lb"]):
        assert service["spec"]["selector"].items() <= pods.items()
    env = container(resources)
    for probe in ("readinessProbe", "livenessProbe"):
        assert env[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
    args = env["args"]
    assert args[args.index("--host") + 1] == "0.0.0.0" and args[args.index("--port") + 1] == "8000"


def test_the_gateway_hashes_on_the_episode_header(resources: dict[str, dict[str, Any]]) -> None:
    route, policy = resources["HTTPRoute/mcpgym"], resources["BackendTrafficPolicy/mcpgym"]
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["spec"]["parentRefs"] == [{"name": resources["Gateway/mcpgym"]["metadata"]["name"]}]
    (rule,) = route["spec"]["rules"]
    assert rule["backendRefs"] == [{"name": "mcpgym-env-lb", "port": 8000}]
    assert policy["apiVersion"] == "gateway.envoyproxy.io/v1alpha1"
    target = {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "mcpgym"}
    assert policy["spec"]["targetRefs"] == [target]
    balancing = policy["spec"]["loadBalancer"]
    assert balancing["type"] == "ConsistentHash" and balancing["consistentHash"]["type"] == "Header"
    assert balancing["consistentHash"]["header"]["name"] == mcpgym.EPISODE_HEADER  # what the client sends


def allowed_hosts(resources: dict[str, dict[str, Any]], pod: str, namespace: str) -> list[str]:
    """The manifest's --allowed-host values as the kubelet expands them for one pod."""
    args, env = container(resources)["args"], {"POD_NAME": pod, "POD_NAMESPACE": namespace}
    values = [args[i + 1] for i, a in enumerate(args) if a == "--allowed-host"]
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], v) for v in values]


def test_each_pod_allows_the_host_the_pool_client_uses(resources: dict[str, dict[str, Any]]) -> None:
    urls = statefulset_urls("mcpgym-env", 3, namespace="rl")
    for i, url in enumerate(urls):
        host = url.split("/")[2]
        assert host in allowed_hosts(resources, f"mcpgym-env-{i}", "rl")
        assert host not in allowed_hosts(resources, f"mcpgym-env-{i + 1}", "rl")  # each pod: its own name


@pytest.fixture
def pod_server(resources: dict[str, dict[str, Any]]) -> Iterator[list[str]]:
    yield allowed_hosts(resources, "mcpgym-env-0", "default")


async def test_a_server_with_the_manifests_flags_checks_hosts_but_not_probes(pod_server: list[str]) -> None:
    app = mcpgym.GymServer(Echo).http_app(allowed_hosts=pod_server)  # what --allowed-host builds
    (pod_url,) = statefulset_urls("mcpgym-env", 1)
    async with serve_app(app) as base, httpx2.AsyncClient() as http:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}

        async def post(host: str) -> int:
            response = await http.post(f"{base}/mcp", json=ping, headers={**headers, "Host": host})
            return response.status_code

        assert await post(pod_url.split("/")[2]) != 421  # the pool client's Host header
        assert await post("mcpgym.example.com") != 421  # through the gateway
        assert await post("attacker.example:8000") == 421  # DNS rebinding: refused
        probe = await http.get(f"{base}/healthz", headers={"Host": "10.244.1.7:8000"})  # kubelet: pod IP
        assert probe.status_code == 200 and probe.json()["status"] == "ok"


def test_pods_require_a_token_from_a_secret(resources: dict[str, dict[str, Any]]) -> None:
    env = container(resources)
    assert env["args"][env["args"].index("--host") + 1] == "0.0.0.0"  # the premise: reachable by other pods
    (token,) = [e for e in env["env"] if e["name"] == "MCPGYM_TOKEN"]  # what `mcpgym serve` reads
    ref = token["valueFrom"]["secretKeyRef"]
    assert ref["name"] == "mcpgym-token" and ref["key"] == "token" and ref.get("optional") is False
    assert not any(d["kind"] == "Secret" for d in resources.values())  # never a shipped default token
    assert "mcpgym-token" in (BASE / "kustomization.yaml").read_text()  # the operator is told to create it


async def test_a_server_with_the_manifests_token_refuses_clients_without_it(pod_server: list[str]) -> None:
    from mcpgym._cli.main import _parser

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MCPGYM_TOKEN", raising=False)
        assert (
            _parser().parse_args(["serve", "mcpgym.servers.echo:Echo", "--http"]).token is None
        )  # no Secret: no token
        patch.setenv("MCPGYM_TOKEN", "from-the-secret")
        args = _parser().parse_args(["serve", "mcpgym.servers.echo:Echo", "--http"])
    app = mcpgym.GymServer(Echo).http_app(allowed_hosts=pod_server, token=args.token)
    async with serve_app(app) as base:
        with pytest.raises(mcpgym.MCPError, match="HTTP 401"):
            async with mcpgym.connect(f"{base}/mcp"):
                pass
        async with mcpgym.connect(f"{base}/mcp", headers={"Authorization": "Bearer from-the-secret"}) as env:
            await env.reset()
