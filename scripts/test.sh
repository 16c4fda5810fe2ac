#!/usr/bin/env bash
# The whole test suite: ruff, the dbt unit tests on an empty store (a failure stops the run
# there), then two lanes side by side: pytest in two workers, and beside it sqlfluff and the
# demo on generated data (dbt build with models and data tests; the label agreement it exits
# on; remediation; the report, checked in Chromium), then the
# great-expectations suites, and the backtest and the alert sequence on the demo's store with
# their commands sent to one `poisonwatch serve` there.
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
# The demo's store; pytest's workers get stores of their own.
export POISONWATCH_HOME="$WORK/store"
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR"
# Test-only Spark settings go in Spark's own configuration folder, which every driver the suite
# starts reads, so that profiles.yml stays what a user runs: on the tests' small inputs compiling
# costs more than it saves, so Spark interprets its plans and the short-lived JVMs compile little
# and collect garbage in one thread, their heap at its full size from the start (a young
# generation of a third of it, not of a small first heap: fewer collections), Delta neither
# writes per-file statistics nor reads them to skip some of a table's few files, and the
# metastore keeps the table definitions it read: each store's embedded Derby admits one process
# at a time, so nothing changes them behind its back.
# A cluster a test starts takes these settings too (`cluster start` copies this file), its
# executors the same JVM options. The demo, the main job, runs without this folder.
export SPARK_CONF_DIR="$WORK/spark-conf"
mkdir -p "$SPARK_CONF_DIR"
cat >"$SPARK_CONF_DIR/spark-defaults.conf" <<'CONF'
spark.sql.codegen.wholeStage false
spark.sql.codegen.factoryMode NO_CODEGEN
spark.driver.defaultJavaOptions -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:CompileThresholdScaling=10 -XX:InitialRAMPercentage=50
spark.executor.defaultJavaOptions -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:CompileThresholdScaling=10 -XX:InitialRAMPercentage=50
spark.databricks.delta.stats.skipping false
spark.databricks.delta.stats.collect false
spark.hadoop.datanucleus.cache.level2 true
spark.hadoop.datanucleus.cache.level2.type soft
CONF
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
    local start=$SECONDS cpu_before
    children_cpu
    cpu_before=$CPU_NOW
    if "$@"; then
        children_cpu
        echo "=== [$name] ok ($((SECONDS - start)) s, $((CPU_NOW - cpu_before)) CPU s)"
        echo "$name ok" >>"$RESULTS"
    else
        children_cpu
        echo "=== [$name] FAILED ($((SECONDS - start)) s, $((CPU_NOW - cpu_before)) CPU s)"
        echo "$name FAILED" >>"$RESULTS"
    fi
}

# CPU_NOW: the CPU seconds (user + system) of the processes this shell has waited for so far,
# from bash's `times`, a builtin that reports the shell it runs in (so never inside a command
# substitution, which is a subshell). A step's CPU is what it cost the two cores, whatever ran
# beside it, plus any background process that ended during it (bash collects a child's times
# when it exits).
children_cpu() {
    local file="$WORK/.times-$BASHPID"
    times >"$file"
    CPU_NOW=$(awk 'NR == 2 {
        total = 0
        for (i = 1; i <= 2; i++) { split($i, t, "m"); total += t[1] * 60 + t[2] }
        printf "%.0f", total
    }' "$file")
}

# Runs a command and passes when it exits with the given code (monitoring-plugin exit codes).
expect_exit() {
    local want=$1
    shift
    "$@"
    local got=$?
    [ "$got" -eq "$want" ] || { echo "expected exit code $want, got $got"; return 1; }
}

# A process and everything it started: the whole tree is listed first, then sent SIGTERM
# (parents first, so none starts another step), and whatever outlives a grace period SIGKILL (a
# server's graceful stop or a JVM's shutdown hook may not end).
kill_tree() {
    local tree=("$1") i=0 child
    while [ "$i" -lt "${#tree[@]}" ]; do
        for child in $(pgrep -P "${tree[$i]}"); do tree+=("$child"); done
        i=$((i + 1))
    done
    kill -TERM "${tree[@]}" 2>/dev/null || true
    for _ in $(seq 20); do
        kill -0 "${tree[@]}" 2>/dev/null || return 0
        sleep 0.5
    done
    kill -KILL "${tree[@]}" 2>/dev/null || true
}

# A run that hangs or crawls fails here, showing what was running, rather than being cut off by
# CI's limit with nothing to show: LIMIT seconds (POISONWATCH_TEST_LIMIT) after the script
# started it prints the process tree and lane two's log so far, records itself as a failed
# step, then ends every other process the script started.
LIMIT="${POISONWATCH_TEST_LIMIT:-5250}"
LANE_TWO_LOG="$WORK/lane-two.log"
watchdog() {
    sleep "$((LIMIT > SECONDS ? LIMIT - SECONDS : 1))" </dev/null >/dev/null 2>&1 || return 0
    echo "=== watchdog: the suite has run ${LIMIT} s; ending it. What runs now:"
    ps -eo pid,ppid,etime,time,rss,args --forest | cut -c1-160
    echo "--- lane two so far (tail):"
    tail -n 40 "$LANE_TWO_LOG" 2>/dev/null
    echo "watchdog FAILED" >>"$RESULTS"
    local child
    for child in $(pgrep -P $$); do
        [ "$child" = "$BASHPID" ] || kill_tree "$child"
    done
}
watchdog &
watchdog_pid=$!
# Every way out ends what is still running: the watchdog (its shell holds the script's output
# open while it sleeps), and lane two when the script stops early.
cleanup() {
    local pid
    for pid in "$watchdog_pid" "${lane_two_pid:-}"; do
        [ -n "$pid" ] && kill_tree "$pid"
    done
}
trap cleanup EXIT

step ruff ruff check python
step ruff-format ruff format --check python
# The rules first, so that a broken one fails the run before the long lanes start: the dbt unit
# tests on a store of their own, their parent models built with --empty as Parquet tables (one
# driver JVM; unit_first.py says why).
step dbt-unit-tests env POISONWATCH_HOME="$WORK/store-unit" \
    python python/tests/support/unit_first.py
if grep -q '^dbt-unit-tests FAILED$' "$RESULTS"; then
    echo "poisonwatch tests stopped after ${SECONDS} s: the dbt unit tests failed (the rules)"
    exit 1
fi

# Then two lanes side by side, each in a store of its own:
#   lane 1: pytest over every module but the cluster-marked ones, in two pytest-xdist workers
#           that take whole modules (those on the shared store as one unit) in collection
#           order, the longest first (conftest.py; xdist would otherwise start with the
#           modules of most tests, and the long modules have few), each worker with a store of
#           its own; the broker tests mostly wait on a real broker, so the other worker and
#           lane 2 use the cores meanwhile;
#   lane 2: sqlfluff, then the demo and every step on the demo's store.
# Lane 2's output is printed after lane 1's. --durations lists the slowest tests in the log.
pytest_main() {
    POISONWATCH_HOME="$WORK/store-pytest" POISONWATCH_TEST_CPU_LOG="$CPU_LOG" \
        python -m pytest -q -p no:cacheprovider python/tests -m "not cluster" \
        -n 2 --dist loadfile --no-loadscope-reorder --basetemp "$WORK/pytest" --durations=40
}

# The demo's store is $POISONWATCH_HOME ($WORK/store); nothing else in the suite uses it.
demo_and_its_store() {
    # sqlfluff first, on the demo's store while it is still empty (the models' first-build
    # rendering); two worker processes parse and lint what the dbt templater rendered.
    step sqlfluff sqlfluff lint models analyses --processes 2
    # The pipeline is `poisonwatch demo` (generate → ingest → dbt build → label agreement →
    # plan → apply → dbt build → report) under an 80-column pseudo-terminal: the screen is
    # checked too (no line wider than 80, no dbt log, nothing printed twice, a summary of at
    # most 40 lines), with the production Spark and JVM settings. Its dbt builds leave out the
    # unit tests, which ran first (dbt's own DBT_EXCLUDE_RESOURCE_TYPES). Then the report it
    # wrote is opened in headless Chromium, offline.
    # The workload includes the alert scenarios after its regular traffic.
    step demo env -u SPARK_CONF_DIR DBT_EXCLUDE_RESOURCE_TYPES=unit_test \
        python python/tests/support/terminal_screen.py --transcript "$WORK/demo-screen.txt" -- \
        poisonwatch demo --landing "$WORK/landing" --seed "$SEED" --attempts "$ATTEMPTS" \
        --alert-scenario all --report "$WORK/report.html"
    step report-browser python python/tests/support/browser.py "$WORK/report.html" \
        --screenshot "$WORK/report.png"
    # The incremental models render their `is_incremental()` branch now that their tables
    # exist: lint them again so both renderings are held to the same style (only they render
    # differently, so only they are linted again).
    local incremental_sql
    mapfile -t incremental_sql < <(grep -rl --include='*.sql' 'is_incremental()' models | sort)
    step sqlfluff-built sqlfluff lint "${incremental_sql[@]}" --processes 2
    # The great-expectations suites validate DataFrames in a driver of their own. No
    # `poisonwatch verify` here: the demo exits 1 below 100 % label agreement, and the README's
    # runnable blocks run the command itself.
    step check poisonwatch check --require-all
    # The rest goes through one `poisonwatch serve` on the demo's store, as an operator's
    # commands do while it runs: each command (and dbt, `--target serve`) sends its SQL to the
    # server's warm driver rather than starting a JVM of its own.
    step serve-start serve_start
    step dbt-docs dbt docs generate --profiles-dir "$ROOT" --project-dir "$ROOT" \
        --target serve --target-path "$WORK/dbt-docs"
    # The backtest and the alerts on the demo's store (its workload has the alert scenarios; the
    # demo applied the remediation): the backtest prints a recommendation per queue and agrees
    # with the labels, and its error-class evidence agrees with the landing files; every
    # scenario's alert is open on its own subject (exit 2: critical); after a later snapshot
    # (the follow-up) the spike, the stalled and the looping queue are resolved, not merely
    # absent, and no alert of those kinds is open (alert_steps.py reads the JSON).
    step backtest poisonwatch backtest --labels "$WORK/landing/labels.jsonl"
    step error-evidence error_evidence_step
    step alerts-raised expect_exit 2 poisonwatch alerts
    step alerts-raised-subjects alert_steps raised
    step follow-up poisonwatch generate --out "$WORK/follow-up" --seed "$SEED" \
        --attempts "$ATTEMPTS" --alert-scenario all --follow-up
    step ingest-follow-up poisonwatch ingest --strict "$WORK/follow-up"
    step dbt-run-follow-up dbt run --profiles-dir "$ROOT" --project-dir "$ROOT" \
        --target serve --select +alerts
    step alerts-resolved expect_exit 0 poisonwatch alerts --kind dlq_arrival_spike \
        --kind queue_stalled --kind queue_loops_forever
    step alerts-resolved-subjects alert_steps resolved
    step serve-stop serve_stop
}

# `poisonwatch serve` on the demo's store, in the background, with no landing folder (cycles
# only post alerts), until its first cycle is done; POISONWATCH_SERVE_PORT then names its port
# for dbt's `serve` target. That cycle must have built nothing: the demo recorded its builds.
SERVE_LOG="$WORK/serve.log"
serve_start() {
    poisonwatch serve --port 0 --every 1h >"$SERVE_LOG" 2>&1 &
    serve_pid=$!
    local status ready
    for _ in $(seq 1800); do
        kill -0 "$serve_pid" 2>/dev/null || { cat "$SERVE_LOG"; return 1; }
        status=$(poisonwatch serve --status --format json 2>/dev/null)
        POISONWATCH_SERVE_PORT=$(python python/tests/support/serve_ready.py "$status")
        ready=$?
        if [ "$ready" -eq 0 ]; then
            export POISONWATCH_SERVE_PORT
            echo "serving on port $POISONWATCH_SERVE_PORT (pid $serve_pid)"
            return 0
        fi
        [ "$ready" -eq 1 ] || { cat "$SERVE_LOG"; return 1; }
        sleep 1
    done
    echo "poisonwatch serve did not finish its first cycle in 30 minutes"
    cat "$SERVE_LOG"
    return 1
}

# `serve --stop` (SIGTERM, then it waits until the server let the store go); the server exits 0.
# A server that did not stop is ended with its JVM, not left behind.
serve_stop() {
    [ -n "${serve_pid:-}" ] || return 1
    poisonwatch serve --stop || { kill_tree "$serve_pid"; return 1; }
    wait "$serve_pid"
    local got=$?
    cat "$SERVE_LOG"
    [ "$got" -eq 0 ] || { echo "poisonwatch serve exited $got"; return 1; }
}

# error_class_evidence, which the backtest built, against the demo's landing files, signature by
# signature (evidence_check.py derives the counts and classes from the records alone).
error_evidence_step() {
    local file="$WORK/error-evidence.jsonl"
    poisonwatch sql "select * from poisonwatch.error_class_evidence" --format json >"$file" ||
        return 1
    python python/tests/support/evidence_check.py "$WORK/landing" "$file"
}

# The mart's alerts, open and recently resolved, as JSON lines, checked by kind and subject.
alert_steps() {
    local file="$WORK/alerts-$1.jsonl"
    poisonwatch alerts --format json --include-resolved >"$file"
    local got=$?
    [ "$got" -le 2 ] || { echo "poisonwatch alerts failed (exit $got)"; return 1; }
    python python/tests/support/alert_steps.py "$1" "$file"
}

demo_and_its_store >"$LANE_TWO_LOG" 2>&1 &
lane_two_pid=$!
CPU_LOG="$WORK/pytest-cpu.tsv"
step pytest pytest_main
lane_one_seconds=$SECONDS
echo "--- pytest's CPU seconds by module (each worker's and its children's, test by test):"
(cd python/tests && python -m support.cpu_log "$CPU_LOG")
# A lane-two shell that was killed (the watchdog) wrote no FAILED line for its step.
wait "$lane_two_pid" || echo "lane-two FAILED" >>"$RESULTS"
lane_two_pid=
cleanup
trap - EXIT
echo "--- lane two (the demo and the steps on its store; it ran beside"
echo "--- pytest, which finished at ${lane_one_seconds} s, and ended at ${SECONDS} s):"
cat "$LANE_TWO_LOG"

passed=$(grep -c ' ok$' "$RESULTS")
mapfile -t failed < <(grep ' FAILED$' "$RESULTS" | cut -d' ' -f1)
children_cpu
echo "poisonwatch tests finished in ${SECONDS} s, ${CPU_NOW} CPU s${failed:+; failed steps: ${failed[*]}}"
echo "steps: $passed passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
