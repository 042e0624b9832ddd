"""`python -m servers.blackjack` from a checkout.

Installed: `python -m mcpgym.servers.blackjack` or `mcpgym-blackjack`.
"""

from servers import forward

__getattr__ = forward("mcpgym.servers.blackjack")
