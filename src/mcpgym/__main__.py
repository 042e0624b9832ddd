"""`python -m mcpgym ...` is the `mcpgym` command."""

from mcpgym._cli.main import main

main()
