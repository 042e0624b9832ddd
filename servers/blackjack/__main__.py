"""`python -m servers.blackjack`: the same command as `python -m mcpgym.servers.blackjack`."""

from mcpgym.servers.blackjack.__main__ import main

main()
