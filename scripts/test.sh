#!/usr/bin/env bash
# The whole test suite, in order: lint, pytest. Prints one summary line at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
# Tests get a store of their own, never the user's .poisonwatch/.
export POISONWATCH_HOME="${POISONWATCH_TEST_HOME:-$PWD/.poisonwatch/test}"
rm -rf "$POISONWATCH_HOME"

failed=()
step() {
    local name=$1; shift
    echo "=== $name: $*"
    local start=$SECONDS
    if "$@"; then
        echo "=== $name: ok ($((SECONDS - start)) s)"
    else
        echo "=== $name: FAILED ($((SECONDS - start)) s)"
        failed+=("$name")
    fi
}

step ruff ruff check python
step ruff-format ruff format --check python
step pytest python -m pytest -q python/tests

if [ ${#failed[@]} -eq 0 ]; then
    echo "poisonwatch tests: all steps passed ($SECONDS s)"
else
    echo "poisonwatch tests: FAILED steps: ${failed[*]} ($SECONDS s)"
    exit 1
fi
