"""Kubernetes addressing: the stable per-pod URLs of a StatefulSet behind a headless Service.

Layer: pool helpers (strings only). deploy/k8s/ is the matching kustomize base.
"""

from __future__ import annotations


def statefulset_urls(
    name: str = "mcpgym-env",
    replicas: int = 2,
    *,
    service: str | None = None,
    namespace: str = "default",
    port: int = 8000,
    cluster_domain: str = "cluster.local",
) -> list[str]:
    """`http://NAME-i.SERVICE.NAMESPACE.svc.DOMAIN:PORT/mcp` for each pod `i` (what `Pool` takes).

    Each pod must list its own host:port as an `--allowed-host` (deploy/k8s/statefulset.yaml
    does), or its DNS-rebinding protection refuses these requests with 421.
    """
    service = service or name
    return [f"http://{name}-{i}.{service}.{namespace}.svc.{cluster_domain}:{port}/mcp" for i in range(replicas)]
