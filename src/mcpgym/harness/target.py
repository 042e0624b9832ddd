"""Environment targets as the harness accepts them: exactly `mcpgym.connect`'s grammar, which
`mcpgym._targets.target` parses (the one parser; this module only adapts it for the harness).

Layer: glue over `mcpgym._targets.target`; the CLI and the Python API both use it.
"""

from __future__ import annotations

import mcpgym
from mcpgym._targets.spec import is_spec
from mcpgym._targets.target import ParsedTarget, parse, parse_text


def resolve(target: mcpgym.Target) -> mcpgym.Target:
    """`target` parsed once, ready to open many times: an environment named by text becomes
    its class (imported now, not per episode); a run spec goes to `mcpgym.connect` as it is (it
    may carry a token for the server it names); anything else is returned as it is."""
    if is_spec(target):
        return str(target)
    parsed = parse(target)
    return parsed.value if parsed.form == "environment" else target


__all__ = ["ParsedTarget", "parse", "parse_text", "resolve"]
