"""The simulated world of `poisonwatch generate`: queues, consumers, messages, errors and bodies.

Plain objects with `__slots__`: one per queue / consumer setting / in-flight message. Strings that
go into every record (JSON fragments of constant fields) are built once per object.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from poisonwatch.generate.bodies import sb_body
from poisonwatch.generate.policy import ConsumerPolicy


def js(value: Any) -> str:
    """A JSON literal (strings keep their Unicode)."""
    return json.dumps(value, ensure_ascii=False)


@lru_cache(maxsize=4096)
def js_name(value: str | None) -> str:
    """`js` for the few names that repeat on every record (types, queues, consumers)."""
    return js(value)


@dataclass(frozen=True)
class ErrorSpec:
    """One error as it appears in an attempt record: SB error number or JMS exception class."""

    key: str  # error number as text, or exception class
    failure_class: str  # from seeds/error_classes.csv, or unknown
    message: str
    message_json: str
    number_json: str = "null"  # SB error_number literal
    stack_json: str = "null"  # JMS stack_trace literal
    temporary: bool = False  # JMS TemporaryUnavailableException -> temporarily_unavailable


# ---------------------------------------------------------------- Service Broker


class SBQueue:
    __slots__ = (
        "activation_procedure",
        "contract",
        "database",
        "disabled",
        "disabled_at",
        "errors",
        "fixed",
        "guarded",
        "inqueue",
        "key_json",
        "max_readers",
        "message_types",
        "name",
        "offset_style",
        "order",
        "poison_message_handling",
        "run",
        "server",
        "service",
        "style",
    )

    def __init__(
        self,
        server: str,
        database: str,
        name: str,
        *,
        style: str,
        service: str,
        contract: str,
        activation_procedure: str,
        message_types: list[tuple[str, str]],
        errors: dict[str, list[ErrorSpec]] | None = None,
        fixed: bool = False,
        offset_style: bool = False,
        max_readers: int = 5,
        poison_message_handling: bool = True,
    ):
        self.server = server
        self.database = database
        self.name = name
        self.style = style  # "savepoint" (seed 000) or "whole" (whole-transaction rollbacks)
        self.guarded = not fixed  # background never reaches five rollbacks
        self.fixed = fixed
        self.service = service
        self.contract = contract
        self.activation_procedure = activation_procedure
        self.max_readers = max_readers
        self.message_types = message_types  # (type name, validation)
        self.errors = errors or {}
        self.offset_style = offset_style
        # ALTER QUEUE … WITH POISON_MESSAGE_HANDLING (STATUS = OFF): five rollbacks disable nothing.
        self.poison_message_handling = poison_message_handling
        self.key_json = (
            f'"server_name":{js(server)},"database_name":{js(database)},"queue_name":{js(name)}'
        )
        self.run = 0
        self.disabled = False
        self.disabled_at: int | None = None
        self.inqueue: dict[tuple[str, int], SBMessage] = {}
        self.order = 0


class SBMessage:
    """One Service Broker message and, once attempted, its running failure state."""

    __slots__ = (
        "body",
        "body_b64",
        "classes",
        "conversation",
        "enqueued_us",
        "failures",
        "fate",
        "group_id",
        "handle",
        "last_success",
        "prefix",
        "queue",
        "queuing_order",
        "scenario",
        "seq",
        "type_name",
        "validation",
    )

    def __init__(
        self,
        queue: SBQueue,
        group_id: str,
        handle: str,
        seq: int,
        type_name: str,
        validation: str,
        body: str | bytes | int,
        fate: list[tuple[str, ErrorSpec | None]],
        scenario: str | None = None,
    ):
        self.queue = queue
        self.group_id = group_id
        self.handle = handle
        self.seq = seq
        self.type_name = type_name
        self.validation = validation
        self.body = body
        self.body_b64: str | None = None
        self.fate = fate  # steps: ("C", None) commit, ("F", err) failure, ("E", None) end conv
        self.scenario = scenario
        self.prefix = (
            f'{queue.key_json},"conversation_group_id":"{group_id}",'
            f'"conversation_handle":"{handle}","message_sequence_number":{seq},'
            f'"message_type_name":{js_name(type_name)}'
        )
        self.failures = 0
        self.classes: dict[str, int] = {}
        self.last_success = False
        self.enqueued_us = 0
        self.queuing_order = 0
        self.conversation: list[SBMessage] = []

    def encoded_body(self) -> str:
        if self.body_b64 is None:
            if isinstance(self.body, int):
                self.body = sb_body(self.body, self.type_name, self.validation)
            if self.validation == "X":
                raw = str(self.body).encode("utf-16-le")
            elif self.validation == "E":
                raw = b""
            else:
                raw = self.body if isinstance(self.body, bytes) else str(self.body).encode()
            self.body_b64 = base64.b64encode(raw).decode("ascii")
        return self.body_b64


# ---------------------------------------------------------------- JMS


class ServerRun:
    """Circuit-breaker runs and the current activation of one consumer setting on one server."""

    __slots__ = (
        "act_failed",
        "act_id",
        "act_last_us",
        "act_start",
        "act_window",
        "any",
        "last_class",
        "longest_any",
        "longest_same",
        "reported",
        "same",
    )

    def __init__(self) -> None:
        self.same = 0
        self.any = 0
        self.last_class: str | None = None
        self.longest_same = 0
        self.longest_any = 0
        self.reported = False
        self.act_window = -1
        self.act_id = ""
        self.act_start = 0
        self.act_last_us = 0
        self.act_failed = False


class Consumer:
    __slots__ = (
        "buggy",
        "consumer_id",
        "disabled",
        "fixed",
        "guarded",
        "id_json",
        "policy",
        "runs",
        "servers",
        "tripped_itself",
    )

    def __init__(self, consumer_id: str, servers: list[str], policy: ConsumerPolicy, fixed: bool):
        self.consumer_id = consumer_id
        self.servers = servers
        self.policy = policy
        self.fixed = fixed
        self.guarded = not fixed
        self.id_json = js(consumer_id)
        self.disabled = False
        self.tripped_itself = False
        self.buggy: tuple[int, ErrorSpec] | None = None  # (from when, the exception it throws)
        self.runs: dict[str, ServerRun] = {s: ServerRun() for s in servers}


class JQueue:
    __slots__ = ("address", "broker", "consumer", "inqueue", "key_json", "name", "types")

    def __init__(
        self, broker: str, address: str, name: str, consumer: Consumer, types: list[str]
    ) -> None:
        self.broker = broker
        self.address = address
        self.name = name
        self.consumer = consumer
        self.types = types
        self.key_json = (
            f'"broker_name":{js(broker)},"address":{js(address)},"queue_name":{js(name)}'
        )
        self.inqueue: dict[str, JMessage] = {}


def _id_json(value: str | None) -> str:
    """Ids the generator makes are plain ASCII without quotes or backslashes."""
    return "null" if value is None else f'"{value}"'


class JMessage:
    """One JMS message on one subscription queue, with its delivery state."""

    __slots__ = (
        "body",
        "classes",
        "deliveries",
        "enqueued_us",
        "failures",
        "fate",
        "group_id",
        "last_success",
        "max_failed_dc",
        "message_id",
        "prefix1",
        "prefix2",
        "queue",
        "scenario",
        "type_name",
    )

    def __init__(
        self,
        queue: JQueue,
        message_id: str,
        type_name: str,
        group_id: str | None,
        correlation_id: str | None,
        body: str,
        fate: list[tuple[str, ErrorSpec | None, str | None]],
        scenario: str | None = None,
    ):
        self.queue = queue
        self.message_id = message_id
        self.type_name = type_name
        self.group_id = group_id
        self.body = body
        self.fate = fate  # ("A"|"F"|"L"|"X", error, server or None)
        self.scenario = scenario
        self.prefix1 = (
            f'{queue.key_json},"message_id":{_id_json(message_id)},'
            f'"correlation_id":{_id_json(correlation_id)},"group_id":{_id_json(group_id)}'
        )
        self.prefix2 = (
            f'"orig_address":null,"orig_queue":null,"message_type":{js_name(type_name)},'
            f'"consumer_id":{queue.consumer.id_json}'
        )
        self.deliveries = 0
        self.failures = 0
        self.max_failed_dc = 0
        self.classes: dict[str, int] = {}
        self.last_success = False
        self.enqueued_us = 0


class DeadLetter:
    """What a DLQ browse shows of a dead-lettered message (kept small: DLQs grow)."""

    __slots__ = ("address", "body", "group_id", "message_id", "queue_name", "type_name")

    def __init__(
        self,
        message_id: str,
        group_id: str | None,
        type_name: str,
        body: str,
        address: str,
        queue_name: str,
    ):
        self.message_id = message_id
        self.group_id = group_id
        self.type_name = type_name
        self.body = body
        self.address = address
        self.queue_name = queue_name
