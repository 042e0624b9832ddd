"""mcpgym.pool: one environment served by many replicas, with episode-routed clients.

Give a `Pool` the replicas' URLs (plain `mcpgym serve … --http` processes, the actors of
`mcpgym.pool.ray.RayPool`, or a Kubernetes StatefulSet's pods); `pool.connect()` is an
`AsyncEnv` whose `reset()` starts the episode on the replica with the fewest live episodes and
whose every step goes straight to that replica. A dead replica truncates its episodes with an
`MCPError`; new episodes go to live replicas, and a replica that answers `/healthz` again rejoins.
See rfcs/0006-scale-out.md.

This package never imports Ray; `mcpgym.pool.ray` does (install `mcpgym[ray]`).
"""

from mcpgym.pool._k8s import statefulset_urls
from mcpgym.pool._replicas import Discover, Pool, Replica
from mcpgym.pool._routing import EpisodeHandle, PoolEnv

__all__ = ["Discover", "EpisodeHandle", "Pool", "PoolEnv", "Replica", "statefulset_urls"]
