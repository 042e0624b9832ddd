"""`python -m servers.echo`: the same command as `python -m mcpgym.servers.echo`."""

from mcpgym.servers.echo.__main__ import main

main()
