"""`python -m servers.maze`: the same command as `python -m mcpgym.servers.maze`."""

from mcpgym.servers.maze.__main__ import main

main()
