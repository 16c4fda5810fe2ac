"""A real ActiveMQ Artemis broker for tests: an instance created in a temp folder, every
acceptor and the web console on free loopback ports, started and stopped by its PID.

The distribution comes from Maven Central through `poisonwatch.broker.artemis_dist` (what
`make setup` runs; a second call finds its stamp and fetches nothing). `ensure_artemis()` says
why not when `mvn` is missing or the fetch fails; under CI=true that skip is a failure
(support/ci_strict.py).

`started(folder, ...)` runs `artemis create` (login required, one acceptor on 127.0.0.1 that
speaks every protocol, STOMP included with `/queue/` and `/topic/` prefixes so the project's
`StompClient` works unchanged, the console's Jolokia on another 127.0.0.1 port), writes the
redelivery and dead-letter settings into `etc/broker.xml`, runs `bin/artemis run` in its own
process group and waits for `AMQ221007: Server is now active` and the console's Jolokia in its log.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import pytest

from support.ports import free_port

ACTIVE = "AMQ221007: Server is now active"
# The console's Jolokia comes up after the server: management calls wait for both.
JOLOKIA = "AMQ241002: Artemis Jolokia REST API available"
_ARTEMIS_HOME: Path | None = None


def ensure_artemis() -> str | None:
    """Fetch (once) and unpack the pinned distribution; None when ready, else why not."""
    global _ARTEMIS_HOME
    from poisonwatch.broker.artemis_dist import fetch_artemis
    from poisonwatch.config import PoisonwatchError

    if _ARTEMIS_HOME is not None:
        return None
    try:
        _ARTEMIS_HOME = fetch_artemis()
    except PoisonwatchError as exc:
        return f"ActiveMQ Artemis is not available: {exc}"
    return None


def artemis_home() -> Path:
    why = ensure_artemis()
    if why:
        raise RuntimeError(why)
    assert _ARTEMIS_HOME is not None
    return _ARTEMIS_HOME


@dataclass
class AddressSetting:
    """The redelivery and dead-letter settings of one `address-setting match=...`."""

    max_delivery_attempts: int = 10
    redelivery_delay_ms: int = 100
    redelivery_multiplier: float = 1.0
    max_redelivery_delay_ms: int = 1000
    dead_letter_address: str = "DLQ"
    auto_create_dead_letter_resources: bool = True

    def xml(self, match: str) -> str:
        auto = "true" if self.auto_create_dead_letter_resources else "false"
        return (
            f"\n         <address-setting match={quoteattr(match)}>"
            f"\n            <dead-letter-address>{escape(self.dead_letter_address)}"
            "</dead-letter-address>"
            f"\n            <auto-create-dead-letter-resources>{auto}"
            "</auto-create-dead-letter-resources>"
            f"\n            <max-delivery-attempts>{self.max_delivery_attempts}"
            "</max-delivery-attempts>"
            f"\n            <redelivery-delay>{self.redelivery_delay_ms}</redelivery-delay>"
            f"\n            <redelivery-delay-multiplier>{self.redelivery_multiplier}"
            "</redelivery-delay-multiplier>"
            f"\n            <max-redelivery-delay>{self.max_redelivery_delay_ms}"
            "</max-redelivery-delay>"
            "\n         </address-setting>"
        )


@dataclass
class Artemis:
    """One broker instance in `folder/broker`; `default` applies to every address (`#`),
    `overrides` to the addresses they match (Artemis merges the two, the closer match first)."""

    folder: Path
    name: str = "pwartemis"
    user: str = "pwadmin"
    password: str = "pw-secret"
    default: AddressSetting = field(default_factory=AddressSetting)
    overrides: dict[str, AddressSetting] = field(default_factory=dict)
    port: int = 0
    http_port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def instance(self) -> Path:
        return self.folder / "broker"

    @property
    def url(self) -> str:
        """The `collect --broker` URL (the password in it: tests only)."""
        return f"artemis://{self.user}:{self.password}@127.0.0.1:{self.http_port}?name={self.name}"

    @property
    def stomp_url(self) -> str:
        return f"stomp://{self.user}:{self.password}@127.0.0.1:{self.port}?name={self.name}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def create(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        self.http_port = self.http_port or free_port()
        cmd = [
            str(artemis_home() / "bin" / "artemis"), "create", "--silent", "--force",
            "--user", self.user, "--password", self.password, "--require-login",
            "--name", self.name, "--host", "127.0.0.1", "--default-port", str(self.port),
            "--http-host", "127.0.0.1", "--http-port", str(self.http_port),
            # One acceptor (the default port) for every protocol, none on a fixed port.
            "--no-amqp-acceptor", "--no-mqtt-acceptor", "--no-stomp-acceptor",
            "--no-hornetq-acceptor", "--no-autotune", "--no-fsync",
            str(self.instance),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"artemis create failed: {(proc.stdout + proc.stderr)[-2000:]}")
        self.write_config()

    def write_config(self) -> None:
        etc = self.instance / "etc"
        broker_xml = etc / "broker.xml"
        text = broker_xml.read_text()
        # STOMP clients name queues /queue/NAME (as on Classic): the acceptor strips it.
        text, n = re.subn(
            r"(<acceptor name=\"artemis\">tcp://127\.0\.0\.1:\d+\?[^<]*)</acceptor>",
            r"\1;anycastPrefix=/queue/;multicastPrefix=/topic/</acceptor>",
            text,
        )
        acceptors = re.findall(r"<acceptor name=\"[^\"]+\">([^<]*)</acceptor>", text)
        if n != 1 or any(not a.startswith("tcp://127.0.0.1:") for a in acceptors):
            raise RuntimeError(f"unexpected acceptors in {broker_xml}: {acceptors}")
        settings = "".join(s.xml(m) for m, s in self.overrides.items())
        settings += self.default.xml("#")
        text, n = re.subn(
            r"\s*<address-setting match=\"#\">.*?</address-setting>",
            lambda _: settings,
            text,
            flags=re.S,
        )
        if n != 1:
            raise RuntimeError(f"no address-setting for # in {broker_xml}")
        broker_xml.write_text(text)
        bootstrap = (etc / "bootstrap.xml").read_text()
        if f"http://127.0.0.1:{self.http_port}" not in bootstrap:
            raise RuntimeError(f"the console does not bind to 127.0.0.1 in {etc}/bootstrap.xml")
        # `create` writes -Xms512M beside -Xmx (--java-memory): a JVM refuses Xms above Xmx.
        profile = etc / "artemis.profile"
        profile.write_text(
            re.sub(r"-Xms\S+ -Xmx\S+", "-Xms64M -Xmx256M", profile.read_text(), count=1)
        )

    def start(self, timeout: float = 90) -> Artemis:
        if not (self.instance / "bin" / "artemis").exists():
            self.create()
        log_path = self.folder / "broker.log"
        offset = log_path.stat().st_size if log_path.exists() else 0
        log = log_path.open("ab")
        self.proc = subprocess.Popen(
            [str(self.instance / "bin" / "artemis"), "run"],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.instance,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with log_path.open("rb") as fh:
                fh.seek(offset)
                seen = fh.read()
                if ACTIVE.encode() in seen and JOLOKIA.encode() in seen:
                    return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"Artemis exited at start:\n{self.log_tail()}")
            time.sleep(0.3)
        self.stop(kill=True)
        raise RuntimeError(
            f"Artemis did not log {ACTIVE!r} and {JOLOKIA!r} in {timeout} s:\n{self.log_tail()}"
        )

    def stop(self, kill: bool = False, timeout: float = 30) -> None:
        """Stop by PID (its process group: the script and its JVM): SIGTERM, or SIGKILL when
        `kill`, SIGKILL after `timeout`."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        sig = signal.SIGKILL if kill else signal.SIGTERM
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

    def send(self, queue: str, bodies: list[str], **properties: str) -> None:
        """Send text messages as a JMS client would, each with a JMSMessageID (Artemis' user
        id), through the management API (the anycast queue is created when missing)."""
        import json

        from poisonwatch.broker.artemis import JolokiaClient
        from poisonwatch.broker.profiles import parse_artemis_url

        client = JolokiaClient(parse_artemis_url(self.url))
        config = {"name": queue, "address": queue, "routing-type": "ANYCAST", "durable": True}
        client.exec(
            client.broker_mbean(), "createQueue(java.lang.String,boolean)", json.dumps(config), True
        )
        mbean = next(q.mbean for q in client.queues() if q.name == queue)
        for body in bodies:
            client.exec(
                mbean,
                "sendMessage(java.util.Map,int,java.lang.String,boolean,java.lang.String,"
                "java.lang.String,boolean)",
                properties, 3, body, True, self.user, self.password, True,
            )  # fmt: skip

    def receive(self, queue: str, want: int, seconds: float) -> list[str]:
        """Consume (auto-acknowledge, over STOMP) until `want` messages came or `seconds`
        passed; their bodies."""
        import stomp

        got: list[str] = []

        class Collect(stomp.ConnectionListener):
            def on_message(self, frame: Any) -> None:
                got.append(frame.body)

        conn = stomp.Connection([("127.0.0.1", self.port)])
        conn.set_listener("collect", Collect())
        conn.connect(self.user, self.password, wait=True)
        try:
            conn.subscribe(f"/queue/{queue}", id="1", ack="auto")
            deadline = time.monotonic() + seconds
            while len(got) < want and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            conn.disconnect()
        return list(got)

    def log_tail(self, chars: int = 3000) -> str:
        path = self.folder / "broker.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""


@contextmanager
def started(folder: Path, **options: Any) -> Iterator[Artemis]:
    """A broker in `folder` (`Artemis`'s options) for the block, stopped by PID after it."""
    broker = Artemis(folder, **options)
    try:
        yield broker.start()
    finally:
        broker.stop()


def broker_fixture(**options: Any) -> Callable[..., Iterator[Artemis]]:
    """A module-scoped `broker` fixture: `broker = broker_fixture(name="b1")`."""

    @pytest.fixture(scope="module")
    def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Artemis]:
        with started(tmp_path_factory.mktemp("artemis"), **options) as b:
            yield b

    return broker
