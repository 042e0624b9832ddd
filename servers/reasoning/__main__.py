"""`python -m servers.reasoning`: the same command as `python -m mcpgym.servers.reasoning`."""

from mcpgym.servers.reasoning.__main__ import main

main()
