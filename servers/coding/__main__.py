"""`python -m servers.coding`: the same command as `python -m mcpgym.servers.coding`."""

from mcpgym.servers.coding.__main__ import main

main()
