"""A new store's first dbt run starts from the project's last parse (dbtrun.parse_cache) instead of
parsing every file again, and dbt still parses what changed since: real dbt, `dbt parse` in two
stores of one child process (no Spark: parsing opens no connection)."""

from __future__ import annotations

import os
from pathlib import Path

from support.child_python import run_py

CODE = """
import json, os
from poisonwatch.warehouse import dbtrun
out = {}
for name in ("first", "second", "vars"):
    os.environ["POISONWATCH_HOME"] = os.path.join(STORES, name)
    args = ["parse"] if name != "vars" else ["parse", "--vars", "{message_partition_seconds: 300}"]
    cached_before = dbtrun.parse_cache("local").read_bytes()
    dbtrun.run_dbt(args, target="local", quiet=True)
    log = dbtrun.dbt_log_path().read_text()
    out[name] = {
        "seeded": "Partial parsing enabled" in log,
        "full": "Unable to do partial parsing" in log,
        "cache_kept": dbtrun.parse_cache("local").read_bytes() == cached_before,
    }
print("@@" + json.dumps(out))
"""


def test_a_new_store_starts_from_the_cached_parse(tmp_path: Path) -> None:
    env = {**os.environ, "POISONWATCH_TARGET": "local"}
    # The cache holds some parse of this checkout before the first store: the suite's earlier
    # runs write it; the first `parse` here makes it this checkout's current one either way.
    prime = {**env, "POISONWATCH_HOME": str(tmp_path / "prime")}
    run_py(
        "from poisonwatch.warehouse.dbtrun import run_dbt\nrun_dbt(['parse'], quiet=True)", prime
    )
    out = run_py(f"STORES = {str(tmp_path)!r}\n" + CODE, env)
    # Each store is new, and none parses the whole project: dbt took the cached parse and
    # found nothing changed.
    assert out["first"] == {"seeded": True, "full": False, "cache_kept": True}, out
    assert out["second"] == {"seeded": True, "full": False, "cache_kept": True}, out
    # Variables of a run's own change what dbt renders: it parses again, and the cache keeps
    # the parse the next store without them can use.
    assert out["vars"] == {"seeded": False, "full": True, "cache_kept": True}, out
