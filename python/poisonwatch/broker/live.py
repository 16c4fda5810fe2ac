"""The live half of `poisonwatch apply`: which pending actions run on a broker, and running them
(one connection per broker, opened on first use: STOMP to ActiveMQ Classic, Jolokia to
Artemis). The ledger stays apply's business."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from poisonwatch.broker.actions import (
    ACTION_PROPERTY,
    JOURNAL_QUEUE,
    LiveAction,
    Outcome,
    ParkRecord,
    Release,
    execute,
    is_live_action,
    prune_journal,
    release_parked,
)
from poisonwatch.broker.artemis_actions import ArtemisActions
from poisonwatch.broker.client import StompClient
from poisonwatch.broker.profiles import BrokerTarget


class BrokerSession(Protocol):
    """What apply needs of one live broker, whatever its kind."""

    def journal_ids(self) -> list[str]: ...
    def prune(self, action_ids: set[str]) -> int: ...
    def release_parked(self, parked: list[ParkRecord]) -> Release: ...
    def execute(self, action: LiveAction) -> Outcome: ...
    def close(self) -> None: ...


class ClassicSession:
    """ActiveMQ Classic over STOMP (poisonwatch.broker.actions)."""

    def __init__(self, target: BrokerTarget) -> None:
        self.target = target
        self.client = StompClient(target).connect()

    def journal_ids(self) -> list[str]:
        return [m.properties.get(ACTION_PROPERTY, "") for m in self.client.browse(JOURNAL_QUEUE)]

    def prune(self, action_ids: set[str]) -> int:
        return prune_journal(self.client, action_ids)

    def release_parked(self, parked: list[ParkRecord]) -> Release:
        return release_parked(self.client, parked)

    def execute(self, action: LiveAction) -> Outcome:
        return execute(self.client, self.target, action)

    def close(self) -> None:
        self.client.close()


def open_session(target: BrokerTarget) -> BrokerSession:
    """Classic over STOMP, or Artemis through Jolokia (poisonwatch.broker.artemis_actions)."""
    return ArtemisActions(target) if target.kind == "artemis" else ClassicSession(target)


def resume_queue(target: BrokerTarget, name: str) -> bool:
    """`poisonwatch resume` on Artemis: resume the queue; whether it was paused."""
    return ArtemisActions(target).resume_queue(name)


class LiveRunner:
    def __init__(self, brokers: dict[str, BrokerTarget]) -> None:
        self.brokers = brokers
        self._sessions: dict[str, BrokerSession] = {}
        self.released: list[str] = []
        self.release_failures: list[str] = []

    def is_live(self, action: dict[str, Any]) -> bool:
        return is_live_action(action, self.brokers)

    def session(self, broker_name: str) -> BrokerSession:
        if broker_name not in self._sessions:
            self._sessions[broker_name] = open_session(self.brokers[broker_name])
        return self._sessions[broker_name]

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
            session = self.session(name)
            ids = session.journal_ids()
            if ids:
                session.prune(committed(ids))
            if parked is None:
                continue
            records = parked(name)
            if records:
                release = session.release_parked(records)
                self.released += release.released
                self.release_failures += [f"{name}: {f}" for f in release.failures]

    def run(self, action: dict[str, Any]) -> Outcome:
        live = LiveAction.from_row(action)
        return self.session(live.broker_name).execute(live)

    def forget(self, broker_name: str, action_ids: set[str]) -> None:
        """After the ledger write: drop the journal markers of these actions (best effort; the
        next run's `prepare` removes any left)."""
        if action_ids and broker_name in self._sessions:
            self._sessions[broker_name].prune(action_ids)

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()
