"""Live ActiveMQ Classic broker over STOMP (issue 19): `collect` browses queues and DLQs into
`jms_queue_snapshots` landing files, `actions` executes JMS remediation actions on the broker
exactly once, `kit` records a Python consumer's delivery attempts as `jms_receive_attempts`.

May import: poisonwatch.config, poisonwatch.textsafe, poisonwatch.warehouse; other jobs only
through their package (`from poisonwatch.ingest import ingest`). Imported by remediation (apply)
and the CLI.
"""
