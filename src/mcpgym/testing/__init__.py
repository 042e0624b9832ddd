"""mcpgym.testing: test an environment through every door in a few lines.

```python
from mcpgym.testing import assert_doors_agree, assert_trl_round_trip

SCRIPT = [("guess", {"number": 50}), ("guess", {"number": "fifty"}), ("no_such_tool", {})]

def test_checks() -> None:
    mcpgym.check_environment(MyEnv)        # tools, schemas, reset determinism, close
    assert_trl_round_trip(MyEnv)           # TRL shows the model exactly the MCP schemas (needs mcpgym[trl])

@pytest.mark.anyio
async def test_every_door_gives_the_same_episode() -> None:
    await assert_doors_agree(MyEnv, SCRIPT, seed=0)   # in-process, in-memory MCP, stdio, HTTP
```

- `door(kind, Env)`: a target for `mcpgym.connect` reaching `Env` through one door;
  `DOORS` names them all. `serve_gym` / `serve_app` run a server on a free loopback port in
  the test's event loop.
- `transcript(env, script)` plays reset + tools/list + the script + state and returns the
  rows; `transcripts` does it per door; `assert_doors_agree` fails naming the first difference.
- `environments_in(package)` lists the Environment classes a package defines (check them all).
- `mcpgym.testing.plugin` (a pytest plugin) adds the `mcpgym_door` and `mcpgym_env` fixtures.

Layer: testing tools over the public API; `import mcpgym` does not import it.
"""

from mcpgym.testing._discover import environments_in
from mcpgym.testing._doors import DOORS, Door, door, serve_app, serve_gym
from mcpgym.testing._transcript import Script, assert_doors_agree, transcript, transcripts
from mcpgym.testing._trl import assert_tool_round_trip, assert_trl_round_trip

__all__ = [
    "DOORS",
    "Door",
    "Script",
    "assert_doors_agree",
    "assert_tool_round_trip",
    "assert_trl_round_trip",
    "door",
    "environments_in",
    "serve_app",
    "serve_gym",
    "transcript",
    "transcripts",
]
