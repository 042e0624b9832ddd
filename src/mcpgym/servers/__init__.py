"""Environments that ship with mcpgym; each runs with `python -m mcpgym.servers.NAME` (or `mcpgym-NAME`).

A checkout also has the short name `python -m servers.NAME`: the root `servers/` package
aliases this one (mcpgym._alias).
"""
