"""A real ActiveMQ Classic broker for tests: config in a temp folder, STOMP on a free loopback
port, no openwire/JMX/web console, started and stopped by its PID.

The Debian package `activemq` (5.17) provides the broker (`activemq.jar`) and the STOMP
transport; `ensure_activemq()` installs it where it is missing and the tests run as root (CI).
xstream and jettison (dependencies of the package) go on the broker's class path so that STOMP
clients can read advisory messages as JSON (`transformation: jms-advisory-json`), which is how
`poisonwatch collect` lists queues; `stock=True` leaves them out, as Debian's own start script
does. `keystore=` adds a stomp+ssl connector (a keystore `make_keystore` builds with keytool).

The test modules share `broker_fixture(...)` (one broker per module, stopped by PID after it),
`client_fixture()` (a STOMP connection per test) and `started(...)` for fixtures that do more
around the broker.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import pytest

from support.ports import free_port

ACTIVEMQ_HOME = Path("/usr/share/activemq")
ACTIVEMQ_JAR = ACTIVEMQ_HOME / "bin" / "activemq.jar"
EXTRA_CLASSPATH = ("/usr/share/java/xstream.jar", "/usr/share/java/jettison.jar")
# The broker-side redelivery plugin refuses delays of 1000 ms or less.
MIN_REDELIVERY_DELAY_MS = 1100

_CONFIG = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans
    http://www.springframework.org/schema/beans/spring-beans.xsd
    http://activemq.apache.org/schema/core
    http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName={name}
          dataDirectory={data} useJmx="false" schedulerSupport="true" persistent="true"
          advisorySupport="true">
    <destinationPolicy>
      <policyMap>
        <policyEntries>
{shared_entries}
          <policyEntry queue="&gt;">
            <deadLetterStrategy>
              <individualDeadLetterStrategy queuePrefix="DLQ." useQueueForQueueMessages="true"
                                            processNonPersistent="true"/>
            </deadLetterStrategy>
          </policyEntry>
        </policyEntries>
      </policyMap>
    </destinationPolicy>
    <plugins>
      <redeliveryPlugin fallbackToDeadLetter="true" sendToDlqIfMaxRetriesExceeded="true">
        <redeliveryPolicyMap>
          <redeliveryPolicyMap>
            <redeliveryPolicyEntries>{entries}
            </redeliveryPolicyEntries>
            <defaultEntry>
              <redeliveryPolicy maximumRedeliveries={max_redeliveries}
                                initialRedeliveryDelay={delay} redeliveryDelay={delay}/>
            </defaultEntry>
          </redeliveryPolicyMap>
        </redeliveryPolicyMap>
      </redeliveryPlugin>
    </plugins>
    <persistenceAdapter><kahaDB directory={kahadb}/></persistenceAdapter>
    <systemUsage><systemUsage><storeUsage><storeUsage limit="1 gb"/></storeUsage>
      <tempUsage><tempUsage limit="512 mb"/></tempUsage></systemUsage></systemUsage>
    <transportConnectors>
      <transportConnector name="stomp" uri={stomp_uri}/>{ssl_connector}
    </transportConnectors>{ssl_context}
  </broker>
</beans>
"""


def keytool(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["keytool", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"keytool {args[0]} failed: {proc.stdout}{proc.stderr}")


def make_ca(folder: Path, name: str, password: str = "changeit") -> Path:
    """A CA key pair (PKCS12 `name`-ca.p12) and its certificate as PEM; returns the PEM."""
    folder.mkdir(parents=True, exist_ok=True)
    store = f"{name}-ca.p12"
    keytool(
        "-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-validity", "3",
        "-dname", f"CN={name} test CA", "-ext", "bc:c", "-ext", "ku:c=keyCertSign,cRLSign",
        "-keystore", store, "-storetype", "PKCS12", "-storepass", password, cwd=folder,
    )  # fmt: skip
    pem = folder / f"{name}-ca.pem"
    keytool(
        "-exportcert", "-rfc", "-alias", "ca", "-keystore", store, "-storepass", password,
        "-file", pem.name, cwd=folder,
    )  # fmt: skip
    return pem


def make_keystore(folder: Path, ca_name: str, password: str = "changeit") -> Path:
    """The broker's keystore: a key pair for 127.0.0.1 signed by the CA `make_ca` made."""
    store = folder / "broker.p12"
    ca_store = f"{ca_name}-ca.p12"
    common = ("-storetype", "PKCS12", "-storepass", password)
    keytool(
        "-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048", "-validity",
        "3", "-dname", "CN=127.0.0.1", "-keystore", store.name, *common, cwd=folder,
    )  # fmt: skip
    keytool(
        "-certreq", "-alias", "broker", "-keystore", store.name, *common, "-file",
        "broker.csr", cwd=folder,
    )  # fmt: skip
    keytool(
        "-gencert", "-alias", "ca", "-keystore", ca_store, *common, "-infile", "broker.csr",
        "-outfile", "broker.pem", "-rfc", "-validity", "3",
        "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-ext", "eku=serverAuth",
        "-ext", "ku:c=digitalSignature,keyEncipherment", cwd=folder,
    )  # fmt: skip
    keytool(
        "-importcert", "-noprompt", "-alias", "ca", "-file", f"{ca_name}-ca.pem",
        "-keystore", store.name, *common, cwd=folder,
    )  # fmt: skip
    keytool(
        "-importcert", "-alias", "broker", "-file", "broker.pem", "-keystore", store.name,
        *common, cwd=folder,
    )  # fmt: skip
    return store


def ensure_activemq() -> str | None:
    """Install the Debian package when missing (as root); None when ready, else why not."""
    if ACTIVEMQ_JAR.exists():
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "ActiveMQ Classic is not installed (apt-get install activemq) and this is not root"
    cmd = "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq activemq"
    if shutil.which("flock"):
        cmd = f"flock /tmp/apt.lock sh -c '{cmd}'"
    proc = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not ACTIVEMQ_JAR.exists():
        return f"apt-get install activemq failed: {proc.stderr[-500:]}"
    return None


@dataclass
class ActiveMQ:
    """One broker instance in `folder`; `queue_redeliveries` overrides the broker's
    maximumRedeliveries per queue (the default applies to every other queue)."""

    folder: Path
    name: str = "pwtest"
    max_redeliveries: int = 3
    delay_ms: int = MIN_REDELIVERY_DELAY_MS
    queue_redeliveries: dict[str, int] = field(default_factory=dict)
    # Queue patterns whose dead letters go to the shared ActiveMQ.DLQ (the default: DLQ.<q>).
    shared_dlq_queues: tuple[str, ...] = ()
    stock: bool = False
    keystore: Path | None = None
    keystore_password: str = "changeit"
    port: int = 0
    ssl_port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"stomp://127.0.0.1:{self.port}?name={self.name}"

    @property
    def ssl_url(self) -> str:
        return f"stomp+ssl://127.0.0.1:{self.ssl_port}?name={self.name}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def write_config(self) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
        if self.keystore and not self.ssl_port:
            self.ssl_port = free_port()
        ssl_connector = ssl_context = ""
        if self.keystore:
            ssl_connector = (
                '\n      <transportConnector name="stomp+ssl" uri='
                f"{quoteattr(f'stomp+ssl://127.0.0.1:{self.ssl_port}')}/>"
            )
            ssl_context = (
                f"\n    <sslContext><sslContext keyStore={quoteattr(str(self.keystore))} "
                f'keyStorePassword={quoteattr(self.keystore_password)} keyStoreType="PKCS12"/>'
                "</sslContext>"
            )
        shared_entries = "".join(
            f"\n          <policyEntry queue={quoteattr(q)}><deadLetterStrategy>"
            '<sharedDeadLetterStrategy processNonPersistent="true"/>'
            "</deadLetterStrategy></policyEntry>"
            for q in self.shared_dlq_queues
        )
        entries = "".join(
            f"\n              <redeliveryPolicy queue={quoteattr(q)} maximumRedeliveries="
            f'"{n}" initialRedeliveryDelay="{self.delay_ms}" redeliveryDelay="{self.delay_ms}"/>'
            for q, n in self.queue_redeliveries.items()
        )
        data = self.folder / "data"
        conf = self.folder / "conf" / "activemq.xml"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(
            _CONFIG.format(
                name=quoteattr(self.name),
                data=quoteattr(str(data)),
                kahadb=quoteattr(str(data / "kahadb")),
                entries=entries,
                max_redeliveries=quoteattr(str(self.max_redeliveries)),
                delay=quoteattr(str(self.delay_ms)),
                stomp_uri=quoteattr(f"stomp://127.0.0.1:{self.port}"),
                ssl_connector=ssl_connector,
                ssl_context=ssl_context,
                shared_entries=shared_entries,
            )
        )
        return conf

    def start(self, timeout: float = 120) -> ActiveMQ:
        conf = self.write_config()
        base = self.folder
        cmd = [
            "java",
            "-Xms64m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            *([] if self.stock else [f"-Dactivemq.classpath={':'.join(EXTRA_CLASSPATH)}"]),
            f"-Dactivemq.base={base}",
            f"-Dactivemq.conf={base / 'conf'}",
            f"-Dactivemq.data={base / 'data'}",
            f"-Dactivemq.home={ACTIVEMQ_HOME}",
            f"-Djava.io.tmpdir={base / 'data'}",
            "-jar",
            str(ACTIVEMQ_JAR),
            "start",
            f"xbean:file:{conf}",
        ]
        (base / "data").mkdir(parents=True, exist_ok=True)
        log = (base / "broker.log").open("ab")
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, cwd=base, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ActiveMQ exited at start: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"ActiveMQ did not open its STOMP port in {timeout} s")

    def stop(self, kill: bool = False, timeout: float = 60) -> None:
        """Stop by PID: SIGTERM (or SIGKILL when `kill`), SIGKILL after `timeout`."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)

    def restart(self, kill: bool = True) -> ActiveMQ:
        """Stop (SIGKILL by default: a crash) and start again on the same port and store."""
        self.stop(kill=kill)
        return self.start()

    def log_tail(self, chars: int = 3000) -> str:
        path = self.folder / "broker.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""


@contextmanager
def started(folder: Path, **options: Any) -> Iterator[ActiveMQ]:
    """A broker in `folder` (`ActiveMQ`'s options) for the block, stopped by PID after it."""
    broker = ActiveMQ(folder, **options).start()
    try:
        yield broker
    finally:
        broker.stop()


def broker_fixture(**options: Any) -> Callable[..., Iterator[ActiveMQ]]:
    """A module-scoped `broker` fixture: `broker = broker_fixture(max_redeliveries=2)`."""

    @pytest.fixture(scope="module")
    def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ActiveMQ]:
        with started(tmp_path_factory.mktemp("activemq"), **options) as b:
            yield b

    return broker


def client_fixture() -> Callable[..., Iterator[Any]]:
    """A `client` fixture: a STOMP connection to the module's `broker` for each test."""
    from poisonwatch.broker.client import StompClient
    from poisonwatch.broker.profiles import parse_broker_url

    @pytest.fixture
    def client(broker: ActiveMQ) -> Iterator[StompClient]:
        with StompClient(parse_broker_url(broker.url)) as c:
            yield c

    return client
