#!/usr/bin/env bash
# Set up (first run only), check style and types, then run the whole test suite.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
.venv/bin/ruff check src servers harness tests benchmarks examples
.venv/bin/ruff format --check --quiet src servers harness tests benchmarks examples
.venv/bin/python -m mypy
# The docs site, strictly: a broken link, nav entry or API reference fails the run.
docs_out=$(mktemp -d)
.venv/bin/python -m mkdocs build --strict --site-dir "$docs_out"  # not --quiet: it hides the warnings --strict counts
rm -rf "$docs_out"
exec .venv/bin/python -m pytest "$@"
