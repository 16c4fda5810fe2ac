"""`poisonwatch serve --port 0` chooses its port just before Thrift binds it, and chooses
again when another program took that port in between (CI once lost a run to that race); an
explicit `--port` that is taken is an error. Real Spark, real Thrift server, a real socket
holding the port."""

from __future__ import annotations

import pytest
from support.child_python import SharedChild

pytestmark = pytest.mark.slow

SCRIPT = """
import json, socket
from poisonwatch.serve import loop
from poisonwatch.warehouse.engine import ThriftEngine, connect

holder = socket.socket()
holder.bind((loop.HOST, 0))
holder.listen()
taken = holder.getsockname()[1]
chosen = iter([taken])
real_free_port = loop._free_port
# The first choice is a port another program holds, as when it took it after the choice.
loop._free_port = lambda: next(chosen, None) or real_free_port()
try:
    with connect("local") as e:
        server, port = loop._start_thrift(e.spark, 0)
        try:
            thrift = ThriftEngine("local", {"host": loop.HOST, "port": port})
            answer = thrift.scalar("select 41 + 1")
            thrift.close()
        finally:
            server.stop()
        try:
            loop._start_thrift(e.spark, taken)
            explicit = None
        except Exception as exc:
            explicit = "BindException" in str(exc)
finally:
    loop._free_port = real_free_port
    holder.close()
print("@@" + json.dumps({"taken": taken, "port": port, "answer": answer, "explicit": explicit}))
"""


def test_a_port_taken_before_the_bind_is_chosen_again(shared_store: SharedChild) -> None:
    result = shared_store.run(SCRIPT)
    assert result["port"] != result["taken"], result
    assert result["answer"] == 42, result
    # An explicit port is the user's choice: its bind failure is raised, not retried.
    assert result["explicit"] is True, result
