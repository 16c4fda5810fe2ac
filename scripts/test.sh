#!/usr/bin/env bash
# The whole test suite: ruff and sqlfluff, then two lanes side by side: pytest, and beside it the
# broker, tiny-bench and broken-store tests followed by the demo on generated data (dbt build
# with models, data tests and unit tests; remediation; the report, checked in Chromium), the
# label agreement check, the great-expectations suites and the alert sequence on the demo's store.
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
# The demo's store; pytest and the broker tests get stores of their own (each lane one store).
export POISONWATCH_HOME="$WORK/store"
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR"
# Spark without code generation (profiles.yml): on the tests' small inputs compiling each
# query costs more than it saves (the tiny bench: 192 -> 143 CPU-s, 111 -> 85 s; `poisonwatch
# check` on the demo's store: 77 -> 64 user CPU-s). Only the demo, the main job, runs the
# production settings.
export POISONWATCH_SPARK_CODEGEN=off
# The JVMs here are short-lived (a few seconds to two minutes, on small inputs), and most of their
# CPU went to the JIT compiler: the tiny bench's one JVM compiled 66,000 methods in 112 CPU-s of its
# 157. So compile only what runs ten times as often as the defaults ask (CompileThresholdScaling),
# with the quick compiler alone (TieredStopAtLevel=1), and collect garbage in the driver's own
# thread (SerialGC). Alone, the bench at 3,000 attempts used 114 user CPU-s in 94 s, against
# 150-168 in 89-99 s; test_store.py 48 in 49 s against 84 in 52 s. On two cores shared by two
# pytest processes, the CPU is what counts. The demo, the main job, keeps the JVM's defaults.
export POISONWATCH_DRIVER_JAVA_OPTIONS="-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:CompileThresholdScaling=10"
SEED="${POISONWATCH_TEST_SEED:-11}"
ATTEMPTS="${POISONWATCH_TEST_ATTEMPTS:-20000}"

# Each step appends "<name> ok" or "<name> FAILED" here: the steps of the second lane run in a
# background subshell, whose variables the summary would not see.
RESULTS="$WORK/steps.txt"
: >"$RESULTS"
step() {
    local name=$1
    shift
    echo "=== [$name] $*"
    local start=$SECONDS
    if "$@"; then
        echo "=== [$name] ok ($((SECONDS - start)) s)"
        echo "$name ok" >>"$RESULTS"
    else
        echo "=== [$name] FAILED ($((SECONDS - start)) s)"
        echo "$name FAILED" >>"$RESULTS"
    fi
}

# Runs a command and passes when it exits with the given code (monitoring-plugin exit codes).
expect_exit() {
    local want=$1
    shift
    "$@"
    local got=$?
    [ "$got" -eq "$want" ] || { echo "expected exit code $want, got $got"; return 1; }
}

step ruff ruff check python
step ruff-format ruff format --check python
# Two worker processes: the dbt templater renders every file in the main process and the workers
# parse and lint what it rendered (63 s with one process, 38 s with two, same findings;
# sqlfluff#7666 explains why it is not 2x).
step sqlfluff sqlfluff lint models analyses --processes 2

# Then two lanes side by side, each in a store of its own:
#   lane 1: pytest without the broker tests (Spark tests, one at a time);
#   lane 2: the broker tests (they mostly wait on a real broker), the tiny bench and the broken-
#           store tests, then the demo and every step on the demo's store.
# In CI43, with only the broker tests in lane 2, it ended 260 s before lane 1; the tiny bench
# (about 150 s there) moved over to even them out. On 26b9b05 (2026-11-28 20:22, a run that
# shared the machine) lane 2 still ended about 385 s before lane 1 (2,710 s): test_store.py
# (about 175 s of lane 1 there; a store and Spark JVMs of its own) moved over too.
# With the JIT options above, one Spark test at a time keeps the two cores only 55-62 % busy
# (sampled every 5 s in CI42, once the broker tests had ended), so the second lane has a core to
# use. (It did not pay with the JVM's default JIT, which kept them 88 % busy: CI30, a3b1ae8.)
# Lane 2's output is printed after lane 1's. (pytest-xdist over the whole suite gained only 10 %:
# two CPU-bound Spark tests at once each take twice as long.)
# --durations: the slowest tests, so a CI log says where the minutes went.
BESIDE=(
    python/tests/test_broker_e2e.py python/tests/test_broker.py python/tests/test_bench.py
    python/tests/test_store.py
)

pytest_main() {
    local ignore=()
    for path in "${BESIDE[@]}"; do ignore+=(--ignore "$path"); done
    POISONWATCH_HOME="$WORK/store-pytest" \
        python -m pytest -q -p no:cacheprovider python/tests -m "not cluster" "${ignore[@]}" \
        --basetemp "$WORK/pytest-main" --durations=25
}

pytest_beside() {
    POISONWATCH_HOME="$WORK/store-beside" \
        python -m pytest -q -p no:cacheprovider "${BESIDE[@]}" -m "not cluster" \
        --basetemp "$WORK/pytest-beside" --durations=12
}

# The demo's store is $POISONWATCH_HOME ($WORK/store); nothing else in the suite uses it.
demo_and_its_store() {
    # The pipeline is `poisonwatch demo` (generate → ingest → dbt build with unit tests → label
    # agreement → plan → apply → dbt build → report) under an 80-column pseudo-terminal: the
    # screen is checked too (no line wider than 80, no dbt log, nothing printed twice, a summary
    # of at most 40 lines), with the production Spark and JVM settings. Then the report it wrote
    # is opened in headless Chromium, offline.
    # The workload includes the alert scenarios (after its regular traffic; issue 18).
    step demo env POISONWATCH_SPARK_CODEGEN=on POISONWATCH_DRIVER_JAVA_OPTIONS= \
        python python/tests/terminal_screen.py --transcript "$WORK/demo-screen.txt" -- \
        poisonwatch demo --landing "$WORK/landing" --seed "$SEED" --attempts "$ATTEMPTS" \
        --alert-scenario all --report "$WORK/report.html"
    step report-browser python python/tests/browser.py "$WORK/report.html" \
        --screenshot "$WORK/report.png"
    # The incremental models render their `is_incremental()` branch now that their tables
    # exist: lint them again so both renderings are held to the same style (issue 16). Only
    # they render differently, so only they are linted again (the whole folder took 89-115 s,
    # 45 files).
    local incremental_sql
    mapfile -t incremental_sql < <(grep -rl --include='*.sql' 'is_incremental()' models | sort)
    step sqlfluff-built sqlfluff lint "${incremental_sql[@]}" --processes 2
    step dbt-docs dbt docs generate --profiles-dir "$ROOT" --project-dir "$ROOT" \
        --target-path "$WORK/dbt-docs"
    step verify poisonwatch verify "$WORK/landing/labels.jsonl"
    step check poisonwatch check
    # Issue 18 on the demo's store (its workload has the alert scenarios; the demo applied the
    # remediation): the backtest prints a recommendation per queue and agrees with the labels;
    # the alerts are raised (exit 2: critical); after a later snapshot (the follow-up) the spike
    # and the stalled queues have resolved (exit 0 for those kinds).
    step backtest poisonwatch backtest --labels "$WORK/landing/labels.jsonl"
    step alerts-raised expect_exit 2 poisonwatch alerts
    step follow-up poisonwatch generate --out "$WORK/follow-up" --seed "$SEED" \
        --attempts "$ATTEMPTS" --alert-scenario all --follow-up
    step ingest-follow-up poisonwatch ingest --strict "$WORK/follow-up"
    step dbt-run-follow-up dbt run --profiles-dir "$ROOT" --project-dir "$ROOT" --select +alerts
    step alerts-resolved expect_exit 0 poisonwatch alerts --kind dlq_arrival_spike \
        --kind queue_stalled
}

lane_two() {
    step pytest-beside pytest_beside
    demo_and_its_store
}

LANE_TWO_LOG="$WORK/lane-two.log"
lane_two >"$LANE_TWO_LOG" 2>&1 &
lane_two_pid=$!
trap "pkill -P $lane_two_pid 2>/dev/null; kill $lane_two_pid 2>/dev/null" EXIT
step pytest pytest_main
lane_one_seconds=$SECONDS
wait "$lane_two_pid"
trap - EXIT
echo "--- lane two (the broker tests and the tiny bench, then the demo and the steps on its store; it ran beside"
echo "--- pytest, which finished at ${lane_one_seconds} s, and ended at ${SECONDS} s):"
cat "$LANE_TWO_LOG"

passed=$(grep -c ' ok$' "$RESULTS")
mapfile -t failed < <(grep ' FAILED$' "$RESULTS" | cut -d' ' -f1)
echo "poisonwatch tests finished in ${SECONDS} s${failed:+; failed steps: ${failed[*]}}"
echo "steps: $passed passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
