#!/usr/bin/env bash
# The whole test suite, in order: ruff, sqlfluff, pytest, then on generated data dbt build
# (models, data tests, unit tests), the label agreement check and the great-expectations suites.
# Prints one summary line at the end and exits non-zero when any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH="$ROOT/.venv/bin:$PATH"
export POISONWATCH_TARGET=local
# The suite never touches the user's store: it gets one of its own, fresh each run.
WORK="${POISONWATCH_TEST_WORK:-$ROOT/.poisonwatch/test-run}"
rm -rf "$WORK"
mkdir -p "$WORK"
export POISONWATCH_HOME="$WORK/store"
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR"
SEED="${POISONWATCH_TEST_SEED:-11}"
ATTEMPTS="${POISONWATCH_TEST_ATTEMPTS:-20000}"

passed=0
failed=()
step() {
    local name=$1
    shift
    echo "=== [$name] $*"
    local start=$SECONDS
    if "$@"; then
        echo "=== [$name] ok ($((SECONDS - start)) s)"
        passed=$((passed + 1))
    else
        echo "=== [$name] FAILED ($((SECONDS - start)) s)"
        failed+=("$name")
    fi
}

step ruff ruff check python
step ruff-format ruff format --check python
step sqlfluff sqlfluff lint models analyses --processes 1
# --durations: the slowest tests, so a CI log says where the minutes went.
step pytest python -m pytest -q -p no:cacheprovider python/tests -m "not cluster" --durations=12
step generate poisonwatch generate --out "$WORK/landing" --seed "$SEED" --attempts "$ATTEMPTS"
step ingest poisonwatch ingest --strict "$WORK/landing"
step dbt-build dbt build --profiles-dir "$ROOT" --project-dir "$ROOT"
step dbt-docs dbt docs generate --profiles-dir "$ROOT" --project-dir "$ROOT" --target-path "$WORK/dbt-docs"
step verify poisonwatch verify "$WORK/landing/labels.jsonl"
step check poisonwatch check

echo "poisonwatch tests finished in ${SECONDS} s${failed:+; failed steps: ${failed[*]}}"
echo "steps: $passed passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
