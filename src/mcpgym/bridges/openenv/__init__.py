"""OpenEnv, both ways: its clients against any mcpgym server, its environments as mcpgym environments.

- Serving: `mcpgym serve ENV --http --openenv` (or `python -m mcpgym.servers.NAME --http
  --openenv`) adds OpenEnv's HTTP and WebSocket API beside `/mcp` (`_serve`), so OpenEnv's own
  `MCPToolClient` and `GenericEnvClient` drive mcpgym episodes unchanged.
- Importing: the target `openenv:URL` (a running OpenEnv server) or `openenv:module:Class` (an
  OpenEnv environment class, started in an interpreter that has `openenv`) is an mcpgym
  environment whose tools are its tools (`_environment`).

The `openenv` package itself never runs in mcpgym's process: it needs the MCP SDK 1.x, mcpgym
2.x. Both directions speak OpenEnv's wire protocol instead (`_wire`). rfcs/0017-bridges.md.
"""
