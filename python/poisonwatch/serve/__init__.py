"""`poisonwatch serve`: one warm Spark driver that owns the store, serves SQL over Thrift on
loopback and runs the pipeline every cycle (ingest, production build, alerts, report).

Owns the server's loop and its status (`loop`). May import `poisonwatch.config`,
`poisonwatch.textsafe`, `poisonwatch.warehouse` and the jobs it runs through their packages;
other jobs use only what is exported here.
"""

from poisonwatch.serve.loop import ServeOptions, print_status, run_serve, stop_server

__all__ = ["ServeOptions", "print_status", "run_serve", "stop_server"]
