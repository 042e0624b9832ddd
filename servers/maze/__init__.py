"""`python -m servers.maze` from a checkout.

Installed: `python -m mcpgym.servers.maze` or `mcpgym-maze`.
"""

from servers import forward

__getattr__ = forward("mcpgym.servers.maze")
