"""`python -m servers.echo` from a checkout.

Installed: `python -m mcpgym.servers.echo` or `mcpgym-echo`.
"""

from servers import forward

__getattr__ = forward("mcpgym.servers.echo")
