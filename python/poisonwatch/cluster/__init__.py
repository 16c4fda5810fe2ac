"""`poisonwatch cluster start|stop|status`: a real Spark standalone cluster and Thrift server on
127.0.0.1, from the pyspark the venv installed (`manager`).

May import `poisonwatch.config` and `poisonwatch.warehouse`; nothing else of poisonwatch.
"""

from poisonwatch.cluster.manager import (
    Layout,
    State,
    Status,
    beeline,
    beeline_path,
    leftover_pids,
    print_started,
    print_status,
    run_cluster,
    start,
    status,
    stop,
)

__all__ = [
    "Layout",
    "State",
    "Status",
    "beeline",
    "beeline_path",
    "leftover_pids",
    "print_started",
    "print_status",
    "run_cluster",
    "start",
    "status",
    "stop",
]
