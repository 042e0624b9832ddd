"""Bridges to other frameworks' environments and clients."""

__all__: list[str] = []
