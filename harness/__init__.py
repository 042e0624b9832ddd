"""`harness` in a checkout is `mcpgym.harness` (the wheel ships only the `mcpgym` namespace).

Kept so a clone's `import harness` and `harness.rollout(...)` work as they always have; every
`harness.X` is the same module object as `mcpgym.harness.X` (mcpgym._alias).
"""

from mcpgym._alias import alias_package

alias_package(__name__, "mcpgym.harness")
