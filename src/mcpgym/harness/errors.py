"""Errors the harness raises, by boundary.

    HarnessError                  base class: catch this to catch everything below
    ├── EndpointError             the chat-completions endpoint failed for good: a 4xx other
    │   │                         than 429, a body that is not a chat completion, or transient
    │   │                         errors that outlived every retry. Fails the episode.
    │   └── EndpointTimeout       no response within the policy's timeout (not retried: a
    │                             model that is slow now is usually slow on a second try too)
    └── ConfigError               a harness config cannot be built or written (bad target,
                                  unreadable or non-object config file)

Tool failures are not exceptions here: an unknown tool, malformed arguments or a tool that
fails are answered to the model as error results and recorded in the trajectory. An episode
that fails (any exception while it runs) becomes a `Trajectory` with `status="failed"`; the
rollout goes on.
"""

from __future__ import annotations

from mcpgym._core import chat as _chat


class HarnessError(Exception):
    """Base class of the harness's errors."""


class EndpointError(HarnessError, _chat.EndpointError):
    """The chat-completions endpoint failed and retrying will not help."""


class EndpointTimeout(EndpointError, _chat.EndpointTimeout):
    """The chat-completions endpoint did not answer within the timeout."""


class ConfigError(HarnessError):
    """A harness configuration could not be built or written."""
