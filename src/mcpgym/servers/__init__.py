"""Environments that ship with mcpgym; each runs with `python -m mcpgym.servers.NAME` (or `mcpgym-NAME`).

From a checkout's root, `python -m servers.NAME` runs the same command: the root `servers/`
folder holds launchers only (rfcs/0016-layout.md).
"""
