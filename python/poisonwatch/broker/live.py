"""The live half of `poisonwatch apply`: which pending actions run on a broker, and running them
(one STOMP connection per broker, opened on first use). The ledger stays apply's business."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from poisonwatch.broker.actions import (
    ACTION_PROPERTY,
    JOURNAL_QUEUE,
    LIVE_ACTION_TYPES,
    LiveAction,
    Outcome,
    ParkRecord,
    execute,
    prune_journal,
    release_parked,
)
from poisonwatch.broker.client import StompClient
from poisonwatch.broker.profiles import BrokerTarget


class LiveRunner:
    def __init__(self, brokers: dict[str, BrokerTarget]) -> None:
        self.brokers = brokers
        self._clients: dict[str, StompClient] = {}
        self.released: list[str] = []
        self.release_failures: list[str] = []

    def is_live(self, action: dict[str, Any]) -> bool:
        return (
            action.get("broker_kind") == "jms"
            and action.get("action_type") in LIVE_ACTION_TYPES
            and action.get("broker_name") in self.brokers
            and bool(action.get("message_id"))
        )

    def client(self, broker_name: str) -> StompClient:
        if broker_name not in self._clients:
            self._clients[broker_name] = StompClient(self.brokers[broker_name]).connect()
        return self._clients[broker_name]

    def prepare(
        self,
        broker_names: set[str],
        committed: Callable[[list[str]], set[str]],
        parked: Callable[[str], list[ParkRecord]] | None = None,
    ) -> None:
        """Before a run: markers of actions the ledger already has are removed, and parked
        messages whose time has come go back to the queue their park action recorded in the
        ledger (`parked(broker_name)`; without it nothing is released)."""
        for name in sorted(broker_names):
            client = self.client(name)
            ids = [m.properties.get(ACTION_PROPERTY, "") for m in client.browse(JOURNAL_QUEUE)]
            if ids:
                prune_journal(client, committed(ids))
            if parked is None:
                continue
            records = parked(name)
            if records:
                release = release_parked(client, records)
                self.released += release.released
                self.release_failures += [f"{name}: {f}" for f in release.failures]

    def run(self, action: dict[str, Any]) -> Outcome:
        live = LiveAction.from_row(action)
        return execute(self.client(live.broker_name), self.brokers[live.broker_name], live)

    def forget(self, broker_name: str, action_ids: set[str]) -> None:
        """After the ledger write: drop the journal markers of these actions (best effort; the
        next run's `prepare` removes any left)."""
        if action_ids and broker_name in self._clients:
            prune_journal(self._clients[broker_name], action_ids)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
