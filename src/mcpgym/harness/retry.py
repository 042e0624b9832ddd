"""Retrying transient failures: exponential backoff with jitter and a cap.

Layer: utility. The implementation is mcpgym's (`mcpgym._core.chat`, shared with the LLM judge);
re-exported here, where `OpenAIPolicy` users and custom policies have always found it.
"""

from __future__ import annotations

from mcpgym._core.chat import Backoff, retry_after_seconds

__all__ = ["Backoff", "retry_after_seconds"]
