"""An independent re-implementation of docs/rules.md over landing files, for tests.

It reads a landing folder the way a consumer of the landing contract would (every format:
.jsonl, .jsonl.gz, .csv, .parquet), reads the policy seeds itself, and derives the labels
(messages, queues, consumers) from the records alone — nothing from the generator's state.
Kept deliberately plain and unoptimised: it is the second opinion, not the product.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import statistics
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

SB_FAILURES = {"rolled_back", "rolled_back_to_savepoint"}
JMS_FAILURES = {"rolled_back", "temporarily_unavailable"}
RANK = ["transient", "unknown", "permanent", "validation"]


def to_micros(value: Any) -> int:
    """ISO-8601 text (any fraction length, Z or offset) or a datetime -> UTC microseconds."""
    if isinstance(value, datetime):
        return (value - _EPOCH) // timedelta(microseconds=1)
    m = _TIME.match(value)
    if not m:
        raise ValueError(f"not an ISO-8601 time: {value!r}")
    base = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    micros = int((base - _EPOCH).total_seconds()) * 1_000_000
    frac = (m.group(2) or "").ljust(9, "0")
    micros += int(frac) // 1000
    tz = m.group(3)
    if tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        hours, minutes = int(tz[1:3]), int(tz[4:6])
        micros -= sign * (hours * 3600 + minutes * 60) * 1_000_000
    return micros


def _csv_value(text: str) -> Any:
    if text == "":
        return None
    if text in ("true", "false"):
        return text == "true"
    return text


def read_dataset(landing: Path, dataset: str) -> list[dict[str, Any]]:
    """Every record of a dataset folder, files in name order, each with `_order`."""
    rows: list[dict[str, Any]] = []
    for path in sorted((landing / dataset).iterdir()):
        name = path.name
        if name.endswith(".jsonl.gz"):
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                rows.extend(json.loads(line) for line in fh if line.strip())
        elif name.endswith(".jsonl"):
            with path.open(encoding="utf-8") as fh:
                rows.extend(json.loads(line) for line in fh if line.strip())
        elif name.endswith(".csv"):
            with path.open(newline="", encoding="utf-8") as fh:
                rows.extend({k: _csv_value(v) for k, v in r.items()} for r in csv.DictReader(fh))
        elif name.endswith(".parquet"):
            rows.extend(pq.read_table(path).to_pylist())
        else:
            raise ValueError(f"unexpected file {path}")
    for i, r in enumerate(rows):
        r["_order"] = i
    return rows


# ------------------------------------------------------------------ policies


def _seed_rows(seeds: Path, name: str) -> list[dict[str, str]]:
    with (seeds / name).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


class Policy:
    def __init__(self, seeds: Path):
        self.failure = {
            (r["broker_kind"], r["queue_name"]): r
            for r in _seed_rows(seeds, "failure_policies.csv")
        }
        self.classes = {
            (r["broker_kind"], r["error_key"]): r["failure_class"]
            for r in _seed_rows(seeds, "error_classes.csv")
        }
        self.consumers = {r["consumer_id"]: r for r in _seed_rows(seeds, "consumer_policies.csv")}
        self.disposable = {
            (r["broker_kind"], r["queue_name"], r["message_type_name"])
            for r in _seed_rows(seeds, "disposable_message_types.csv")
        }

    def failure_row(self, kind: str, queue: str) -> dict[str, str]:
        return self.failure.get((kind, queue)) or self.failure[(kind, "*")]

    def max_delivery_attempts(self, queue: str, broker: dict[str, int]) -> int:
        """A JMS queue's row for the queue, else its broker's setting (newest snapshot, -1
        and blanks ignored), else the `*` row; 10 when the row used leaves it blank."""
        own = self.failure.get(("jms", queue))
        if own is None and broker.get(queue, -1) > 0:
            return broker[queue]
        value = _num((own or self.failure[("jms", "*")])["max_delivery_attempts"], 10)
        assert value is not None
        return value

    def is_disposable(self, kind: str, queue: str, message_type: str | None) -> bool:
        return (kind, queue, message_type) in self.disposable or (
            kind,
            "*",
            message_type,
        ) in self.disposable

    def consumer(self, cid: str) -> dict[str, str]:
        return self.consumers.get(cid) or self.consumers["*"]


def _num(text: str, default: int | None) -> int | None:
    return int(text) if text.strip() else default


# ------------------------------------------------------------------ messages


def _attempt_key(r: dict[str, Any]) -> tuple[int, str, int]:
    return (to_micros(r["attempted_at"]), r.get("attempt_id") or "", r["_order"])


def broker_settings(landing: Path) -> dict[str, int]:
    """Per queue, max_delivery_attempts of the newest jms_address_settings row (any broker)."""
    newest: dict[str, tuple[int, str, int]] = {}
    for r in read_dataset(landing, "jms_address_settings"):
        key = (to_micros(r["snapshot_at"]), r["broker_name"])
        value = r.get("max_delivery_attempts")
        if r["queue_name"] not in newest or key > newest[r["queue_name"]][:2]:
            newest[r["queue_name"]] = (*key, -1 if value is None else int(value))
    return {queue: v[2] for queue, v in newest.items()}


def _classify_message(
    kind: str,
    queue: str,
    attempts: list[dict[str, Any]],
    policy: Policy,
    broker: dict[str, int] | None = None,
) -> tuple[str, str] | None:
    failure_outcomes = SB_FAILURES if kind == "service_broker" else JMS_FAILURES
    success = "committed" if kind == "service_broker" else "acknowledged"
    failed = [a for a in attempts if a["outcome"] in failure_outcomes]
    if not failed:
        return None
    row = policy.failure_row(kind, queue)
    classes = []
    for a in failed:
        if kind == "service_broker":
            key = None if a.get("error_number") is None else str(a["error_number"])
        else:
            key = a.get("exception_class")
        classes.append(_failure_class(kind, a, key, policy.classes))
    if attempts[-1]["outcome"] == success:
        return "recovered", "succeeded_after_failures"
    if "validation" in classes and row["validation_is_poison"].strip().lower() == "true":
        return "poison", "invalid_content"
    pet = _num(row["permanent_error_threshold"], None)
    if pet is not None and classes.count("permanent") >= pet:
        return "poison", "permanent_error"
    type_col = "message_type_name" if kind == "service_broker" else "message_type"
    if policy.is_disposable(kind, queue, attempts[-1].get(type_col)):
        return "poison", "disposable"
    if kind == "service_broker":
        threshold = _num(row["failure_threshold"], 3)
        assert threshold is not None
        if len(failed) > threshold:
            return "poison", "threshold_exceeded"
        if len(failed) == threshold:
            return "suspect", "at_threshold"
        return "retrying", "below_threshold"
    mda = policy.max_delivery_attempts(queue, broker or {})
    deliveries = max(len(failed), max(int(a.get("delivery_count") or 0) for a in failed))
    if deliveries >= mda:
        return "poison", "max_deliveries"
    if deliveries == mda - 1:
        return "suspect", "at_threshold"
    return "retrying", "below_threshold"


def _failure_class(
    kind: str, attempt: dict[str, Any], key: str | None, classes: dict[tuple[str, Any], str]
) -> str:
    """A failure's class: the seed's for its error, `unknown` when unlisted; a JMS
    temporarily-unavailable outcome is always transient."""
    if kind == "jms" and attempt["outcome"] == "temporarily_unavailable":
        return "transient"
    return classes.get((kind, key), "unknown")


def _message_attempts(landing: Path) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """Every message's attempts, in attempt order, by its identity (rules.md)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in read_dataset(landing, "ssb_receive_attempts"):
        key = (
            "service_broker",
            r["server_name"],
            r["database_name"],
            r["queue_name"],
            r["conversation_handle"].upper(),
            int(r["message_sequence_number"]),
        )
        groups[key].append(r)
    for r in read_dataset(landing, "jms_receive_attempts"):
        groups[("jms", r["broker_name"], r["queue_name"], r["message_id"])].append(r)
    for attempts in groups.values():
        attempts.sort(key=_attempt_key)
    return groups


def message_labels(landing: Path, policy: Policy) -> dict[tuple[Any, ...], tuple[str, str]]:
    out: dict[tuple[Any, ...], tuple[str, str]] = {}
    broker = broker_settings(landing)
    for key, attempts in _message_attempts(landing).items():
        queue = key[3] if key[0] == "service_broker" else key[2]
        verdict = _classify_message(key[0], queue, attempts, policy, broker)
        if verdict is not None:
            out[key] = verdict
    return out


# ------------------------------------------------------------------ queues


def queue_labels(landing: Path) -> dict[tuple[str, str, str], tuple[bool, bool]]:
    attempts: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in read_dataset(landing, "ssb_receive_attempts"):
        attempts[(r["server_name"], r["database_name"], r["queue_name"])].append(r)
    states: dict[tuple[str, str, str], list[tuple[int, bool]]] = defaultdict(list)
    # POISON_MESSAGE_HANDLING as the latest state says (on when no state says off).
    handling: dict[tuple[str, str, str], tuple[int, bool]] = {}
    for r in read_dataset(landing, "ssb_queue_states"):
        k = (r["server_name"], r["database_name"], r["queue_name"])
        states[k].append((to_micros(r["snapshot_at"]), bool(r["is_receive_enabled"])))
        flag = r.get("is_poison_message_handling_enabled")
        if flag is not None and to_micros(r["snapshot_at"]) >= handling.get(k, (0, True))[0]:
            handling[k] = (to_micros(r["snapshot_at"]), bool(flag))
    snap_times: dict[tuple[str, str, str], int] = {}
    for r in read_dataset(landing, "ssb_queue_snapshots"):
        k = (r["server_name"], r["database_name"], r["queue_name"])
        snap_times[k] = max(snap_times.get(k, 0), to_micros(r["snapshot_at"]))
    events: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for r in read_dataset(landing, "ssb_broker_events"):
        if r["event_type"] == "BROKER_QUEUE_DISABLED":
            events[(r["server_name"], r["database_name"], r["queue_name"])].append(
                to_micros(r["event_time"])
            )
    out = {}
    for q in set(attempts) | set(states):
        latest = max([t for t, _ in states.get(q, [])] + [snap_times.get(q, 0)])
        run = 0
        for a in sorted(attempts.get(q, []), key=_attempt_key):
            if to_micros(a["attempted_at"]) > latest:
                break
            run = run + 1 if a["outcome"] == "rolled_back" else 0
        observed = any(t == latest and not enabled for t, enabled in states.get(q, []))
        for ev in events.get(q, []):
            if ev <= latest and not any(
                t > ev and t <= latest and enabled for t, enabled in states.get(q, [])
            ):
                observed = True
        handled = handling.get(q, (0, True))[1]
        # (is_disabled, loops_forever_risk): with handling off five rollbacks disable nothing.
        out[q] = (observed or (handled and run >= 5), not handled)
    return out


# ------------------------------------------------------------------ consumers


def consumer_labels(landing: Path, policy: Policy) -> dict[str, tuple[bool, str | None]]:
    per_server: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in read_dataset(landing, "jms_receive_attempts"):
        per_server[(r["consumer_id"], r["server_name"])].append(r)
    reporting: dict[str, list[bool]] = defaultdict(list)  # consumer -> [reached N?] per server
    consumers = set()
    for (cid, _server), attempts in per_server.items():
        consumers.add(cid)
        m = int(policy.consumer(cid)["max_consecutive_failures"])
        n = m // 3
        same = any_run = longest_same = longest_any = 0
        prev: str | None = None
        for a in sorted(attempts, key=_attempt_key):
            if a["outcome"] == "temporarily_unavailable":
                continue
            if a["outcome"] == "acknowledged":
                same = any_run = 0
                prev = None
                continue
            cls = a.get("exception_class")
            same = same + 1 if prev is not None and cls == prev else 1
            prev = cls
            any_run += 1
            longest_same = max(longest_same, same)
            longest_any = max(longest_any, any_run)
        if longest_same >= n or longest_any >= m:
            reporting[cid].append(longest_same >= n)
    tripped: dict[str, str] = {}
    for cid in consumers:
        mode = (policy.consumer(cid)["breaker_mode"] or "ANY").upper()
        reports = reporting.get(cid, [])
        if len(reports) >= (2 if mode == "MANY" else 1):
            tripped[cid] = "same_exception_type" if any(reports) else "any_exception_types"
    groups = {
        policy.consumer(cid)["scheduled_group"]
        for cid in tripped
        if policy.consumer(cid)["scheduled_group"]
    }
    out: dict[str, tuple[bool, str | None]] = {}
    for cid in consumers:
        group = policy.consumer(cid)["scheduled_group"]
        if cid in tripped:
            out[cid] = (True, tripped[cid])
        elif group and group in groups:
            out[cid] = (True, "scheduled_group")
        else:
            out[cid] = (False, None)
    return out


# ------------------------------------------------------------------ error classes from evidence


def normalize_error_message(text: str) -> str:
    """GUIDs, quoted literals and numbers replaced, whitespace collapsed (as the macro)."""
    text = re.sub(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
                  "<guid>", text)  # fmt: skip
    text = re.sub(r"'[^']*'", "<literal>", text)
    text = re.sub(r'"[^"]*"', "<literal>", text)
    text = re.sub(r"(0x[0-9a-fA-F]+|[0-9]+([.,][0-9]+)*)", "<number>", text)
    return re.sub(r"\s+", " ", text, flags=re.ASCII).strip(" ")


def error_evidence(
    landing: Path, seeds: Path, min_messages: int = 5, transient_share: float = 0.9
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Per error signature (broker kind, error key, normalised message): its failures, how many
    a later success of the same message followed, and the class that evidence gives it against
    seeds/error_classes.csv (docs/rules.md, "Error classes from evidence")."""
    classes = Policy(seeds).classes
    stats: dict[tuple[str, str, str], dict[str, Any]] = {}
    for message, attempts in _message_attempts(landing).items():
        kind = message[0]
        failures = SB_FAILURES if kind == "service_broker" else JMS_FAILURES
        success = "committed" if kind == "service_broker" else "acknowledged"
        for i, a in enumerate(attempts):
            if a["outcome"] not in failures:
                continue
            if kind == "service_broker":
                error_key = "" if a.get("error_number") is None else str(int(a["error_number"]))
                text = a.get("error_message") or ""
            else:
                error_key = a.get("exception_class") or ""
                text = a.get("exception_message") or ""
            sig = stats.setdefault(
                (kind, error_key, normalize_error_message(text)),
                {"failure_count": 0, "messages": set(), "recovered": set(), "to_success": [],
                 "class": "transient"},
            )  # fmt: skip
            # The class the live rules give the failure; the signature's is the worst of them.
            cls = _failure_class(kind, a, error_key, classes)
            sig["class"] = max(sig["class"], cls, key=RANK.index)
            sig["failure_count"] += 1
            sig["messages"].add(message)
            after = next(
                (j for j in range(i + 1, len(attempts)) if attempts[j]["outcome"] == success), None
            )
            if after is not None:
                sig["recovered"].add(message)
                seconds = (to_micros(attempts[after]["attempted_at"])
                           - to_micros(a["attempted_at"])) / 1_000_000  # fmt: skip
                sig["to_success"].append((after - i, seconds))
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for (kind, error_key, text), sig in stats.items():
        failures, messages = sig["failure_count"], len(sig["messages"])
        followed = len(sig["to_success"])
        judged = error_key != "" and messages >= min_messages
        evidence = None
        if judged and followed >= transient_share * failures:
            evidence = "transient"
        elif judged and followed == 0:
            evidence = "permanent"
        out[(kind, error_key, text)] = {
            "seed_failure_class": sig["class"],
            "failure_count": failures,
            "message_count": messages,
            "failures_followed_by_success": followed,
            "recovered_message_count": len(sig["recovered"]),
            "success_share": followed / failures,
            "attempts_to_success_mean": (
                statistics.mean(n for n, _ in sig["to_success"]) if followed else None
            ),
            "seconds_to_success_median": (
                statistics.median(s for _, s in sig["to_success"]) if followed else None
            ),
            "evidence_class": evidence,
            "_judged": judged,
        }
    # The seed keys on the error: recommend only where all its judged signatures agree.
    by_error: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for (kind, error_key, _), row in out.items():
        by_error[(kind, error_key)].append(row)
    for rows in by_error.values():
        judged_classes = [r["evidence_class"] for r in rows if r.pop("_judged")]
        agree = len(set(judged_classes)) == 1 and None not in judged_classes
        for r in rows:
            evidence, seed = r["evidence_class"], r["seed_failure_class"]
            recommended = agree and (
                (evidence == "transient" and seed != "transient")
                or (evidence == "permanent" and seed not in ("permanent", "validation"))
            )
            r["recommended_class"] = evidence if recommended else None
            r["attempts_saved"] = (
                r["failure_count"] - r["message_count"]
                if recommended and evidence == "permanent"
                else 0
            )
            r["false_poison_avoided"] = (
                r["recovered_message_count"]
                if recommended and evidence == "transient" and seed in ("permanent", "validation")
                else 0
            )
    return out


def read_labels(landing: Path) -> dict[str, dict[Any, Any]]:
    """labels.jsonl as {message: {key: (cls, reason)}, queue: {...}, consumer: {...}}."""
    out: dict[str, dict[Any, Any]] = {"message": {}, "queue": {}, "consumer": {}}
    with (landing / "labels.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if d["kind"] == "message" and d["broker_kind"] == "service_broker":
                key: Any = (
                    "service_broker",
                    d["server_name"],
                    d["database_name"],
                    d["queue_name"],
                    d["conversation_handle"].upper(),
                    int(d["message_sequence_number"]),
                )
                out["message"][key] = (d["classification"], d["reason"])
            elif d["kind"] == "message":
                key = ("jms", d["broker_name"], d["queue_name"], d["message_id"])
                out["message"][key] = (d["classification"], d["reason"])
            elif d["kind"] == "queue":
                out["queue"][(d["server_name"], d["database_name"], d["queue_name"])] = (
                    d["is_disabled"],
                    d["loops_forever_risk"],
                )
            else:
                out["consumer"][d["consumer_id"]] = (d["is_tripped"], d["trip_reason"])
    return out


def derive_labels(landing: Path, seeds: Path) -> dict[str, dict[Any, Any]]:
    """The labels docs/rules.md gives the landing files, in the shape of `read_labels`."""
    policy = Policy(seeds)
    return {
        "message": message_labels(landing, policy),
        "queue": queue_labels(landing),
        "consumer": consumer_labels(landing, policy),
    }
