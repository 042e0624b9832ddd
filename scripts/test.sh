#!/usr/bin/env bash
# Set up (first run only), check style and types, then run the whole test suite.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
.venv/bin/ruff check src servers harness tests benchmarks examples
.venv/bin/ruff format --check --quiet src servers harness tests benchmarks examples
.venv/bin/python -m mypy
exec .venv/bin/python -m pytest "$@"
