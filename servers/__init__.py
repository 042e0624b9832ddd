"""`servers` in a checkout is `mcpgym.servers` (the wheel ships only the `mcpgym` namespace).

Kept so a clone runs `python -m servers.coding` and imports `servers.echo:Echo` as it always
has; every `servers.X` is the same module object as `mcpgym.servers.X` (mcpgym._alias).
"""

from mcpgym._alias import alias_package

alias_package(__name__, "mcpgym.servers")
