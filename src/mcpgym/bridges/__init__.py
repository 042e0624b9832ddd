"""Bridges to other frameworks' environments and clients."""
