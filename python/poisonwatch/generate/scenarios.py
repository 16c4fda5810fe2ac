"""The seed documents' own examples, as fixed named scenarios present at every seed.

Their identifiers do not depend on the seed: Service Broker handles and group ids are
`scenario_guid(name)`; JMS message ids are fixed. The label of each message carries
`"scenario": <name>`. `EXPECTED` says what the seeds say each one must come out as.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from poisonwatch.generate.bodies import expense_report_xml
from poisonwatch.generate.catalog import (
    END_DIALOG,
    EXPENSE_REPORT,
    PROGRESS_REPORT,
    SB_ERROR_TYPE,
    TUE,
    jms_error,
    sb_error,
)
from poisonwatch.generate.model import (
    Consumer,
    ErrorSpec,
    JMessage,
    JQueue,
    SBMessage,
    SBQueue,
)

if TYPE_CHECKING:
    from poisonwatch.generate.state import Engine

_NS = uuid.UUID("6f1d1c52-4a0e-4f57-9d0e-2b7c3f5e9a11")
MINUTE_US = 60_000_000
T0_US = 1_772_323_200 * 1_000_000

SERVER = "SQLPROD01"
DATABASE = "AdventureWorks2008R2"
EXPENSE_QUEUE = "ExpenseQueue"
INVENTORY_QUEUE = "InventoryQueue"
JMS_BROKER = "artemis-prod-1"

# "<scenario>/<message_sequence_number>" (Service Broker) or "<scenario>" (JMS)
# -> (classification, reason)
EXPECTED: dict[str, tuple[str, str]] = {
    "seed000-deadlocks-recover/0": ("recovered", "succeeded_after_failures"),
    "seed000-deadlocks-recover/1": ("recovered", "succeeded_after_failures"),
    "seed000-duplicate-key/1": ("poison", "permanent_error"),
    "seed000-unknown-past-threshold/0": ("poison", "threshold_exceeded"),
    "seed000-still-retrying/0": ("retrying", "below_threshold"),
    "seed000-suspect/0": ("suspect", "at_threshold"),
    "seed000-invalid-missing-employee/0": ("poison", "invalid_content"),
    "seed000-invalid-negative-employee/0": ("poison", "invalid_content"),
    "seed000-progress-disposable/0": ("poison", "disposable"),
    "seed000-trackmessage-ends/0": ("poison", "threshold_exceeded"),
    "seed000-ended-after-failures/0": ("retrying", "below_threshold"),
    "seed001-retired-item/0": ("poison", "permanent_error"),
    "seed002-document-sync": ("retrying", "below_threshold"),
    "seed002-report-builder": ("poison", "max_deliveries"),
    "seed002-replica-recovers": ("recovered", "succeeded_after_failures"),
    "seed002-replica-lagging": ("poison", "max_deliveries"),
    "seed002-orders-one-server": ("recovered", "succeeded_after_failures"),
    "seed002-nightly-export": ("retrying", "below_threshold"),
    "jms-max-deliveries-mixed": ("poison", "max_deliveries"),
    "jms-heartbeat-disposable": ("poison", "disposable"),
}
EXPECTED_QUEUES = {
    (SERVER, DATABASE, INVENTORY_QUEUE): True,
    (SERVER, DATABASE, EXPENSE_QUEUE): False,
}
EXPECTED_CONSUMERS: dict[str, str | None] = {
    "agent.document-sync": "same_exception_type",
    "agent.report-builder": "any_exception_types",
    "agent.replica-reader": None,
    "agent.orders": None,
    "agent.nightly-export": "same_exception_type",
    "agent.nightly-cleanup": "scheduled_group",
    "agent.nightly-archive": "scheduled_group",
    "agent.pdf-renderer": None,
}


SB_ERROR_BODY = (
    '<Error xmlns="http://schemas.microsoft.com/SQL/ServiceBroker/Error"><Code>-8489</Code>'
    "<Description>The dialog has exceeded the specified LIFETIME.</Description></Error>"
)


def scenario_guid(name: str) -> str:
    """The fixed, upper-case GUID of a named scenario's handle or group id."""
    return str(uuid.uuid5(_NS, name)).upper()


def jms_scenario_id(k: int) -> str:
    return f"ID:vm-36765-1795236730220-4:1:1:1:{k}"


FIXED_CONSUMERS: list[tuple[str, str, list[str]]] = [
    ("agent.document-sync", "documents", ["SRVAPP01", "SRVAPP02", "SRVAPP03"]),
    ("agent.report-builder", "reports", ["SRVAPP03", "SRVAPP04"]),
    ("agent.replica-reader", "replica", ["SRVAPP03", "SRVAPP04"]),
    ("agent.orders", "orders", ["SRVAPP01", "SRVAPP02", "SRVAPP03"]),
    ("agent.nightly-export", "nightly.export", ["SRVAPP05"]),
    ("agent.nightly-cleanup", "nightly.cleanup", ["SRVAPP05"]),
    ("agent.nightly-archive", "nightly.archive", ["SRVAPP05"]),
    ("agent.pdf-renderer", "renderer", ["SRVAPP02"]),
]


def fixed_world(eng: Engine) -> None:
    """The seed documents' queues and consumer settings (before the background ones)."""
    for name, style, proc in (
        (EXPENSE_QUEUE, "savepoint", "ProcessExpenseReport"),
        (INVENTORY_QUEUE, "whole", "ProcessInventoryRequest"),
    ):
        eng.sb_queues.append(
            SBQueue(
                SERVER,
                DATABASE,
                name,
                style=style,
                service=f"//Adventure-Works.com/{name.removesuffix('Queue')}Service",
                contract=f"//Adventure-Works.com/{name.removesuffix('Queue')}Contract",
                activation_procedure=proc,
                message_types=[(EXPENSE_REPORT, "X")],
                fixed=True,
            )
        )
    for cid, address, servers in FIXED_CONSUMERS:
        c = Consumer(cid, servers, eng.policies.consumer(cid), fixed=True)
        eng.consumers[cid] = c
        queue = f"{address}.{cid.removeprefix('agent.')}"
        eng.jms_queues.append(
            JQueue(JMS_BROKER, address, queue, c, ["com.example.agents.Document"])
        )


Step = tuple[str, ErrorSpec | None]


def _sb(
    eng: Engine,
    queue: str,
    name: str,
    at_min: float,
    convs: list[list[tuple[str, str, str, list[Step]]]],
) -> int:
    """Start one conversation group of a scenario: convs of (type, validation, body, fate)."""
    q = next(x for x in eng.sb_queues if x.name == queue and x.server == SERVER)
    group_id = scenario_guid(f"{name}/group")
    built = []
    planned = 0
    for ci, conv in enumerate(convs):
        handle = scenario_guid(name if ci == 0 else f"{name}/{ci}")
        msgs = []
        for seq, (type_name, validation, body, fate) in enumerate(conv):
            msgs.append(
                SBMessage(q, group_id, handle, seq, type_name, validation, body, fate, name)
            )
            planned += len(fate)
        built.append(msgs)
    t = T0_US + int(at_min * MINUTE_US)
    eng.start(eng.sb_group(built, t, f"{q.activation_procedure}:spid57"))
    return planned


def _jms(
    eng: Engine,
    cid: str,
    name: str,
    k: int,
    at_min: float,
    fate: list[tuple[str, ErrorSpec | None, str | None]],
    body: str = '{"document": "Relatório d\'Alembert"}',
) -> int:
    jq = next(x for x in eng.jms_queues if x.consumer.consumer_id == cid)
    m = JMessage(
        jq,
        jms_scenario_id(k),
        jq.types[0] if "Heartbeat" not in name else "com.example.agents.Heartbeat",
        None,
        None,
        body,
        fate,
        name,
    )
    eng.start(eng.jms_message(m, T0_US + int(at_min * MINUTE_US)))
    return sum(1 for s in fate if s[0] in "AF")


def fixed_scenarios(eng: Engine) -> int:
    """Start every named scenario; returns the number of attempts they plan."""
    p = eng.policies
    ok: Step = ("C", None)
    end: Step = ("E", None)

    def f(number: int, n: int = 0) -> Step:
        return ("F", sb_error(p, number, n=n, db=DATABASE))

    def report(emp: int | None = 42) -> str:
        return expense_report_xml(emp, "125.40", "Dinner at O'Brien's ';-- café")

    x = "X"
    planned = 0
    exp = EXPENSE_QUEUE
    planned += _sb(
        eng,
        exp,
        "seed000-deadlocks-recover",
        5,
        [
            [
                (EXPENSE_REPORT, x, report(), [f(1205, 57), f(1205, 61), ok]),
                (EXPENSE_REPORT, x, report(), [f(1222), ok]),
                (EXPENSE_REPORT, x, report(), [ok]),
                (END_DIALOG, "E", "", [end]),
            ]
        ],
    )
    planned += _sb(
        eng,
        exp,
        "seed000-duplicate-key",
        6,
        [
            [
                (EXPENSE_REPORT, x, report(), [ok]),
                (EXPENSE_REPORT, x, report(1042), [f(2627, 1042), f(2627, 1042)]),
                (EXPENSE_REPORT, x, report(), [ok]),
            ],
            [(EXPENSE_REPORT, x, report(77), [ok])],
        ],
    )
    planned += _sb(
        eng,
        exp,
        "seed000-unknown-past-threshold",
        7,
        [
            [
                (EXPENSE_REPORT, x, report(), [f(50000)] * 4),
                (EXPENSE_REPORT, x, report(), [ok]),
            ]
        ],
    )
    planned += _sb(
        eng, exp, "seed000-still-retrying", 8, [[(EXPENSE_REPORT, x, report(), [f(1222)] * 2)]]
    )
    planned += _sb(
        eng, exp, "seed000-suspect", 9, [[(EXPENSE_REPORT, x, report(), [f(50000)] * 3)]]
    )
    planned += _sb(
        eng,
        exp,
        "seed000-invalid-missing-employee",
        10,
        [[(EXPENSE_REPORT, x, report(None), [f(50001), end])]],
    )
    planned += _sb(
        eng,
        exp,
        "seed000-invalid-negative-employee",
        11,
        [[(EXPENSE_REPORT, x, report(-17), [f(50002, 17)])]],
    )
    planned += _sb(
        eng,
        exp,
        "seed000-progress-disposable",
        12,
        [
            [
                (
                    PROGRESS_REPORT,
                    x,
                    "<ProgressReport><Percent>40</Percent></ProgressReport>",
                    [f(1205, 63)],
                ),
            ]
        ],
    )
    planned += _sb(
        eng,
        exp,
        "seed000-trackmessage-ends",
        13,
        [[(EXPENSE_REPORT, x, report(), [f(50000)] * 4 + [end])]],
    )
    planned += _sb(
        eng,
        exp,
        "seed000-ended-by-application",
        14,
        [
            [
                (EXPENSE_REPORT, x, report(), [ok]),
                (
                    SB_ERROR_TYPE,
                    x,
                    SB_ERROR_BODY,
                    [end],
                ),
            ]
        ],
    )
    planned += _sb(
        eng,
        exp,
        "seed000-ended-after-failures",
        15,
        [[(EXPENSE_REPORT, x, report(), [f(1205, 70), f(1205, 71), end])]],
    )
    inv = INVENTORY_QUEUE
    req = "//Adventure-Works.com/Inventory/InventoryRequest"
    item = "<InventoryRequest><ProductID>{}</ProductID><Qty>3</Qty></InventoryRequest>"
    planned += _sb(
        eng,
        inv,
        "seed001-before",
        30,
        [[(req, x, item.format(7), [ok]), (req, x, item.format(8), [ok])]],
    )
    planned += _sb(
        eng,
        inv,
        "seed001-retired-item",
        31,
        [
            [
                (req, x, item.format(999), [f(547)] * 5),
                (req, x, item.format(12), [ok]),
            ]
        ],
    )
    planned += _sb(eng, inv, "seed001-after", 33, [[(req, x, item.format(13), [ok])]])

    def j(cls: str, server: str | None, n: int = 4711) -> tuple[str, ErrorSpec | None, str | None]:
        return ("F", jms_error(p, cls, n=n), server)

    def a(server: str | None) -> tuple[str, ErrorSpec | None, str | None]:
        return ("A", None, server)

    ise, npe, dse, sto = (
        "java.lang.IllegalStateException",
        "java.lang.NullPointerException",
        "com.example.agents.DocumentServiceException",
        "java.net.SocketTimeoutException",
    )
    con, sqlr = "java.net.ConnectException", "java.sql.SQLRecoverableException"
    # seed 002: agent.document-sync (MANY, M = 9, N = 3): one exception type on two servers.
    planned += _jms(eng, "agent.document-sync", "seed002-document-sync-ok", 1, 10, [a("SRVAPP01")])
    planned += _jms(eng, "agent.document-sync", "seed002-document-sync-ok", 2, 11, [a("SRVAPP02")])
    planned += _jms(
        eng,
        "agent.document-sync",
        "seed002-document-sync",
        3,
        12,
        [j(ise, s) for s in ["SRVAPP01", "SRVAPP02"] * 5],
    )
    planned += _jms(eng, "agent.document-sync", "seed002-document-sync-behind", 4, 50, [a(None)])
    # agent.report-builder (ANY, M = 10): ten consecutive failures of mixed types on one server.
    planned += _jms(
        eng, "agent.report-builder", "seed002-report-builder-ok", 5, 10, [a("SRVAPP04")]
    )
    planned += _jms(
        eng,
        "agent.report-builder",
        "seed002-report-builder",
        6,
        15,
        [j([npe, sto, dse][i % 3], "SRVAPP04") for i in range(10)],
    )
    # agent.replica-reader: only TemporaryUnavailableException, never trips.
    planned += _jms(
        eng,
        "agent.replica-reader",
        "seed002-replica-recovers",
        7,
        10,
        [j(TUE, "SRVAPP03")] * 4 + [a("SRVAPP04")],
    )
    planned += _jms(
        eng,
        "agent.replica-reader",
        "seed002-replica-lagging",
        8,
        20,
        [j(TUE, s) for s in ["SRVAPP03", "SRVAPP04"] * 5],
    )
    # agent.orders (MANY): one server's local trouble does not stop the setting.
    planned += _jms(eng, "agent.orders", "seed002-orders-ok", 9, 10, [a("SRVAPP01")])
    planned += _jms(
        eng,
        "agent.orders",
        "seed002-orders-one-server",
        10,
        16,
        [j(sqlr, "SRVAPP02")] * 4 + [a("SRVAPP03")],
    )
    planned += _jms(eng, "agent.orders", "seed002-orders-ok", 11, 25, [a("SRVAPP03")])
    # the `nightly` scheduled group: export trips, cleanup and archive go with it.
    planned += _jms(
        eng,
        "agent.nightly-cleanup",
        "seed002-nightly-cleanup",
        12,
        20,
        [j(TUE, "SRVAPP05"), a("SRVAPP05")],
    )
    planned += _jms(
        eng, "agent.nightly-archive", "seed002-nightly-archive", 13, 21, [a("SRVAPP05")]
    )
    planned += _jms(
        eng, "agent.nightly-export", "seed002-nightly-export", 14, 40, [j(npe, "SRVAPP05")] * 10
    )
    planned += _jms(
        eng, "agent.nightly-cleanup", "seed002-nightly-cleanup-after", 15, 55, [a(None)]
    )
    # ten deliveries, temporarily-unavailable ones among them: max_deliveries, DLQ count reset.
    mixed = [TUE, TUE, con, TUE, sto, TUE, TUE, con, TUE, sto]
    planned += _jms(
        eng,
        "agent.pdf-renderer",
        "jms-max-deliveries-mixed",
        16,
        18,
        [j(cls, "SRVAPP02") for cls in mixed],
    )
    # a heartbeat that failed once and expired: disposable.
    planned += _jms(
        eng,
        "agent.monitor",
        "jms-heartbeat-disposable",
        17,
        19,
        [j(sto, None), ("X", None, None)],
        body='{"beat": 1}',
    )
    return planned
