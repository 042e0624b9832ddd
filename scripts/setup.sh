#!/usr/bin/env bash
# Idempotent set-up shared by scripts/demo.sh and scripts/test.sh: a .venv with mcpgym
# installed (editable) and, with --test, everything the test suite drives.
set -euo pipefail
cd "$(dirname "$0")/.."

# The oldest and the newest Python we support (pyproject's requires-python): .venv runs the
# oldest with every extra; with --test, .venv-3.13 runs the newest for scripts/test.sh's second pass.
OLDEST=3.11
NEWEST=3.13

# find_python X.Y: $PYTHON_X_Y if set, else the newest pyenv X.Y.* build, else pythonX.Y on PATH.
find_python() {
  local version=$1 override candidate
  override="PYTHON_${version/./_}"
  if [ -n "${!override:-}" ]; then echo "${!override}"; return; fi
  for candidate in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$version".* 2>/dev/null | sort -V -r); do
    if [ -x "$candidate/bin/python$version" ]; then echo "$candidate/bin/python$version"; return; fi
  done
  if command -v "python$version" >/dev/null 2>&1 && "python$version" -c pass 2>/dev/null; then
    command -v "python$version"; return
  fi
  echo "setup: Python $version not found (looked for \$$override, ${PYENV_ROOT:-$HOME/.pyenv}/versions/$version.*," \
    "python$version on PATH); install it, e.g. 'pyenv install $version', or set $override=/path/to/python$version" >&2
  return 1
}

python_bin=${PYTHON:-}
if [ -z "$python_bin" ]; then
  python_bin=$(find_python "$OLDEST")
fi
[ -x .venv/bin/python ] || "$python_bin" -m venv .venv

if [ "${1:-}" = "--test" ]; then
  # mcpgym.servers.coding's strongest sandbox layer (namespaces via bubblewrap); its tests cover it.
  if ! command -v bwrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null) || echo "setup: bubblewrap not installed; sandbox tests will say what they skip" >&2
  fi
  # The web page's browser tests (tests/test_web.py) drive Debian's chromium headless; they
  # fail, never skip, without it.
  if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "setup: chromium not installed; tests/test_web.py will fail" >&2
  fi
  # torch first, pinned: 2.13.0 is the CPU wheel these machines carry; an unpinned torch
  # (asked for by trl) would fetch a multi-GB CUDA build.
  .venv/bin/pip install --quiet --disable-pip-version-check torch==2.13.0
  .venv/bin/pip install --quiet --disable-pip-version-check -e ".[dev,coding,trl,ray,fast,docs,vision,reasoning,gymnasium,textarena]" "torch==2.13.0"
  # The newest supported Python, without the trl and ray extras: their pinned wheels (torch
  # 2.13's CPU build, ray 2.60) exist here for 3.11 only, so scripts/test.sh runs them there.
  newest=$(find_python "$NEWEST")
  [ -x .venv-$NEWEST/bin/python ] || "$newest" -m venv .venv-$NEWEST
  .venv-$NEWEST/bin/pip install --quiet --disable-pip-version-check -e ".[dev,coding,fast,vision,reasoning,gymnasium,textarena]"
  # The OpenEnv bridge (#26): the [openenv] extra here, and the real `openenv` (pinned, with the
  # MCP SDK 1.x it needs) in a venv of its own that tests/test_openenv*.py run its clients in.
  .venv/bin/pip install --quiet --disable-pip-version-check -e ".[openenv]"
  .venv-$NEWEST/bin/pip install --quiet --disable-pip-version-check -e ".[openenv]"
  .venv/bin/python tests/openenv_venv.py >/dev/null
  # The interop test drives the official TypeScript MCP client (pinned by the lock file).
  npm ci --prefix tests/interop --no-audit --no-fund --loglevel=error
  # The third-party MCP server that tests/test_wrap.py wraps as an environment (pinned likewise).
  npm ci --prefix tests/wrapped --no-audit --no-fund --loglevel=error
  # Real servers tests/test_wrap_real.py starts under the sandbox: server-memory from npm, and two
  # from PyPI each in a virtualenv of its own (pinned by tests/wrapped_py/*.txt): mcp-server-time on
  # the system Python, mcp-server-git on the one .venv uses (pyenv here), as users install them.
  npm ci --prefix tests/wrapped_state --no-audit --no-fund --loglevel=error
  system_python=/usr/bin/python3
  "$system_python" -m venv --help >/dev/null 2>&1 || system_python=$python_bin
  for server in time:"$system_python" git:"$python_bin"; do
    name=${server%%:*} base=${server#*:} venv=tests/wrapped_py/${server%%:*}-venv
    [ -x "$venv/bin/mcp-server-$name" ] || { rm -rf "$venv" && "$base" -m venv "$venv" \
      && "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "tests/wrapped_py/mcp-server-$name.txt"; }
  done
  npm ci --prefix tests/everything --no-audit --no-fund --loglevel=error
  # The official MCP conformance suite, run against every shipped server (pinned by its lock file).
  npm ci --prefix tests/conformance --no-audit --no-fund --loglevel=error
else
  .venv/bin/pip install --quiet --disable-pip-version-check -e .
fi
