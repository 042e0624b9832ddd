#!/usr/bin/env bash
# Idempotent set-up shared by scripts/demo.sh and scripts/test.sh: a .venv with mcpgym
# installed (editable) and, with --test, everything the test suite drives.
set -euo pipefail
cd "$(dirname "$0")/.."

python_bin=${PYTHON:-}
if [ -z "$python_bin" ]; then
  for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then python_bin=$candidate; break; fi
  done
fi
[ -x .venv/bin/python ] || "$python_bin" -m venv .venv

if [ "${1:-}" = "--test" ]; then
  # servers.coding's strongest sandbox layer (namespaces via bubblewrap); its tests cover it.
  if ! command -v bwrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null) || echo "setup: bubblewrap not installed; sandbox tests will say what they skip" >&2
  fi
  # torch first, pinned: 2.13.0 is the CPU wheel these machines carry; an unpinned torch
  # (asked for by trl) would fetch a multi-GB CUDA build.
  .venv/bin/pip install --quiet --disable-pip-version-check torch==2.13.0
  .venv/bin/pip install --quiet --disable-pip-version-check -e ".[dev,coding,trl,ray,fast,vision,reasoning]" "torch==2.13.0"
  # The interop test drives the official TypeScript MCP client (pinned by the lock file).
  npm ci --prefix tests/interop --no-audit --no-fund --loglevel=error
  # The official MCP conformance suite, run against every shipped server (pinned by its lock file).
  npm ci --prefix tests/conformance --no-audit --no-fund --loglevel=error
else
  .venv/bin/pip install --quiet --disable-pip-version-check -e .
fi
