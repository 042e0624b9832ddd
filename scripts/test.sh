#!/usr/bin/env bash
# Set up (first run only), check style and types, then run the whole test suite on the oldest
# (3.11, .venv, every extra) and the newest (3.13, .venv-3.13) supported Python.
# Extra arguments go to both pytest runs.
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
echo "== pytest on $(.venv/bin/python -V): the whole suite" >&2
.venv/bin/python -m pytest "$@"
# On 3.13 the trl and ray extras are not installed (no wheels for their pins: see setup.sh), so
# their tests are left out here on purpose and by name; everything else runs again. test_trl*.py
# import their extra at module level (a missing extra must fail a run that expects it), hence
# --ignore rather than only -m. test_gateway_model.py imports torch at module level for the same reason.
# system_python tests run /usr/bin/python3 (3.11 on Debian) as an unprivileged user with this
# environment's packages, which only a 3.11 environment has; the 3.11 run above covers them.
echo "== pytest on $(.venv-3.13/bin/python -V): all but the trl, ray and system-Python tests" >&2
exec .venv-3.13/bin/python -m pytest -p no:cacheprovider \
  --ignore=tests/test_trl.py --ignore=tests/test_trl_grpo.py --ignore=tests/test_gateway_model.py \
  -m "not trl and not ray and not system_python" "$@"
