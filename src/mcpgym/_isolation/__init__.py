"""OS plumbing shared by every sandbox mcpgym builds (servers.coding's and `mcpgym wrap`'s):
uids claimed host-wide, a memory cgroup per episode, size-limited tmpfs workspaces, and tree
removal that no directory depth defeats.

Layer: imports nothing from the package; both sandboxes import it (rfcs/0003-security.md).
"""
