"""`python -m servers.coding` from a checkout.

Installed: `python -m mcpgym.servers.coding` or `mcpgym-coding`.
"""

from servers import forward

__getattr__ = forward("mcpgym.servers.coding")
