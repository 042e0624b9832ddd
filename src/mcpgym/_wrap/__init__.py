"""Any MCP server as an environment: `mcpgym.wrap(command, tasks=..., rubric=...)`.

Layer: an application of the public Environment API (plus `Host`, for what an episode holds
across requests). Nothing in the core imports it except `mcpgym/__init__` and the CLI. Its
public names are listed once, in `mcpgym.wrapping`.
"""
