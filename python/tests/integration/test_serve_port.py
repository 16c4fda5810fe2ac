"""`poisonwatch serve --port 0` leaves the port to the kernel at Thrift's bind (a port chosen
earlier can be taken before the bind) and reports the port Thrift listens on, whether or not
the starting thread has a Hive session; an explicit `--port` that is taken fails. Real Spark,
real Thrift servers, a real socket holding the explicit port; on the shared store."""

from __future__ import annotations

import pytest
from support.child_python import SharedChild

pytestmark = pytest.mark.slow

SCRIPT = """
import json, socket, threading
from poisonwatch.serve import loop
from poisonwatch.warehouse.engine import ThriftEngine, connect

def serve_and_ask(spark, port):
    server, bound = loop._start_thrift(spark, port)
    try:
        thrift = ThriftEngine("local", {"host": loop.HOST, "port": bound})
        answer = thrift.scalar("select 41 + 1")
        thrift.close()
    finally:
        server.stop()
    return {"port": bound, "answer": answer}

with connect("local") as e:
    result = {"main": serve_and_ask(e.spark, 0)}
    # A thread of its own has no Hive session in the JVM: the context's configuration counts.
    worker = threading.Thread(target=lambda: result.update(thread=serve_and_ask(e.spark, 0)))
    worker.start()
    worker.join()
    holder = socket.socket()
    holder.bind((loop.HOST, 0))
    holder.listen()
    taken = holder.getsockname()[1]
    try:
        loop._start_thrift(e.spark, taken)
        result["explicit"] = None
    except Exception as exc:
        result["explicit"] = "BindException" in str(exc)
    finally:
        holder.close()
print("@@" + json.dumps(result))
"""


def test_port_0_is_chosen_at_the_bind_and_reported(shared_store: SharedChild) -> None:
    result = shared_store.run(SCRIPT)
    for started in ("main", "thread"):
        assert result[started]["answer"] == 42, result
        assert 0 < result[started]["port"] < 65536, result
    # An explicit port is the user's choice: its bind failure is raised.
    assert result["explicit"] is True, result
