"""`python -m mcpgym ...` is the `mcpgym` command."""

from mcpgym._cli import main

main()
