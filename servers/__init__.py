"""Environments that ship with mcpgym; each runs with `python -m servers.NAME`."""
