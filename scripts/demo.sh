#!/usr/bin/env bash
# Set up (first run only) and run the main demo: RL episodes against mcpgym.servers.echo, in-process and over HTTP.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/demo.py "$@"
