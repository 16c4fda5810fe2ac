"""Live ActiveMQ Classic broker over STOMP: `collect` browses queues and DLQs into
`jms_queue_snapshots` landing files, `actions` executes JMS remediation actions on the broker
exactly once (driven by `live.LiveRunner` from `poisonwatch apply`), `kit` records a Python
consumer's delivery attempts as `jms_receive_attempts`; `profiles` reads brokers.yml.
ActiveMQ Artemis: `collect` browses it through its management API (`artemis`, Jolokia over
HTTP) into the same files (`landing`), `artemis_actions` runs the same actions exactly once
there; `artemis_dist` fetches the distribution for tests.

May import: poisonwatch.config, poisonwatch.textsafe, poisonwatch.warehouse; other jobs only
through their package (`from poisonwatch.ingest import ingest`). Imported by remediation (apply),
serve (`--broker`) and the CLI, through this package only.
"""

from poisonwatch.broker.actions import LIVE_ACTION_TYPES, Outcome, ParkRecord, is_live_action
from poisonwatch.broker.client import BrokerError
from poisonwatch.broker.collect import CollectResult, collect, print_result
from poisonwatch.broker.live import LiveRunner, resume_queue
from poisonwatch.broker.profiles import BrokerTarget, live_brokers, resolve_broker

__all__ = [
    "LIVE_ACTION_TYPES",
    "BrokerError",
    "BrokerTarget",
    "CollectResult",
    "LiveRunner",
    "Outcome",
    "ParkRecord",
    "collect",
    "is_live_action",
    "live_brokers",
    "print_result",
    "resolve_broker",
    "resume_queue",
]
