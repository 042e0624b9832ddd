"""`python -m servers.reasoning` from a checkout.

Installed: `python -m mcpgym.servers.reasoning` or `mcpgym-reasoning`.
"""

from servers import forward

__getattr__ = forward("mcpgym.servers.reasoning")
