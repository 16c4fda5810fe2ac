"""Which live brokers poisonwatch may talk to: `--broker URL` or `$POISONWATCH_HOME/brokers.yml`.

```yaml
brokers:
  orders-broker:                     # broker_name as it appears in the landing files
    url: stomp://mq1.example.com:61613
    user: poisonwatch                # optional
    password_env: ORDERS_MQ_PASSWORD # optional: the password is read from this variable
    dlq_prefix: "DLQ."               # individualDeadLetterStrategy queuePrefix ("" = shared DLQ)
    shared_dlq: ActiveMQ.DLQ         # the shared dead-letter queue
  secure-broker:
    url: stomp+ssl://mq2.example.com:61612
    ca_file: /etc/poisonwatch/mq-ca.pem  # optional: the CA that signed the broker's certificate
  artemis-broker:
    kind: artemis                    # ActiveMQ Artemis, through its management API (Jolokia)
    url: http://mq3.example.com:8161 # or https://, or artemis://HOST:PORT (the console's port)
    user: poisonwatch
    password_env: ARTEMIS_PASSWORD
```

A URL is `stomp://[user:password@]host:port[?name=BROKER_NAME&dlq_prefix=DLQ.]`; without
`name`, the broker name is `host:port`. `stomp+ssl://` is STOMP over TLS with the broker's
certificate and host name verified, against `ca_file` (brokers.yml, `?ca_file=` in the URL or
`collect --ca-file`) or else the system's trusted CAs; there is no way to skip verification.

An ActiveMQ Artemis broker is `artemis://[user:password@]host:port[?name=BROKER_NAME]`, where
port is the web console's (Jolokia is served under `/console/jolokia`), or in brokers.yml
`kind: artemis` with an `http://`, `https://` or `artemis://` URL. Without `name`, the broker
name is the one Artemis reports (`collect`); `apply` needs it named.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

from poisonwatch.config import PoisonwatchError, home

PROFILES_FILE = "brokers.yml"


@dataclass(frozen=True)
class BrokerTarget:
    name: str
    host: str
    port: int
    user: str | None = None
    password: str | None = None
    dlq_prefix: str = "DLQ."
    shared_dlq: str = "ActiveMQ.DLQ"
    tls: bool = False
    ca_file: str | None = None
    # "classic" (STOMP) or "artemis" (Jolokia over HTTP at `jolokia_path`).
    kind: str = "classic"
    jolokia_path: str = ""
    # Whether `name` was given (an Artemis broker otherwise reports its own).
    named: bool = True

    @property
    def jolokia_url(self) -> str:
        """The Jolokia endpoint, without credentials (safe to print)."""
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{_host_port(self.host, self.port)}{self.jolokia_path}"

    def dlq_for(self, queue_name: str) -> str:
        """The dead-letter queue the broker itself uses for `queue_name`."""
        return f"{self.dlq_prefix}{queue_name}" if self.dlq_prefix else self.shared_dlq

    def is_dlq(self, queue_name: str) -> bool:
        return queue_name == self.shared_dlq or bool(
            self.dlq_prefix and queue_name.startswith(self.dlq_prefix)
        )


SCHEMES = {"stomp": 61613, "stomp+ssl": 61612}
ARTEMIS_SCHEMES = {"artemis": 8161, "http": 8161, "https": 8443}
JOLOKIA_PATH = "/console/jolokia"


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _split_url(
    url: str, schemes: dict[str, int], shape: str
) -> tuple[SplitResult, int, dict[str, str]]:
    """`url`'s parts, port (the scheme's default when none) and query; an error that names
    the URL without its password when the scheme, host or port is wrong."""
    parts = urlsplit(url)
    if parts.scheme not in schemes or not parts.hostname:
        raise PoisonwatchError(f"{shape}, got {_without_password(url)!r}")
    try:
        port = parts.port or schemes[parts.scheme]
    except ValueError as exc:
        raise PoisonwatchError(f"broker URL {_without_password(url)!r}: bad port") from exc
    return parts, port, {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}


def parse_artemis_url(url: str, name: str | None = None) -> BrokerTarget:
    """`artemis://`, `http://` or `https://[user:password@]host:port[/path][?name=B]`; the
    path defaults to Artemis' own `/console/jolokia`."""
    parts, port, query = _split_url(
        url,
        ARTEMIS_SCHEMES,
        "an Artemis broker URL must look like artemis://HOST:PORT (the web console's port) "
        "or http(s)://HOST:PORT",
    )
    path = parts.path.rstrip("/")
    if parts.scheme == "artemis" and path:
        raise PoisonwatchError(
            f"broker URL {_without_password(url)!r}: artemis:// takes no path (use http://)"
        )
    given = name or query.get("name")
    return BrokerTarget(
        name=given or _host_port(parts.hostname, port),
        host=parts.hostname,
        port=port,
        user=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        dlq_prefix=query.get("dlq_prefix", "DLQ."),
        shared_dlq=query.get("shared_dlq", "DLQ"),
        tls=parts.scheme == "https",
        ca_file=_ca_file(query.get("ca_file"), _without_password(url)),
        kind="artemis",
        jolokia_path=path or JOLOKIA_PATH,
        named=bool(given),
    )


def _without_password(url: str) -> str:
    """`url` with the password of its user part replaced, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[-1]
    return parts._replace(netloc=f"{user}:***@{host}").geturl()


def parse_broker_url(url: str, name: str | None = None) -> BrokerTarget:
    if url.startswith("artemis://"):
        return parse_artemis_url(url, name)
    parts, port, query = _split_url(
        url, SCHEMES, "broker URL must look like stomp://HOST:PORT or stomp+ssl://HOST:PORT"
    )
    return BrokerTarget(
        name=name or query.get("name") or f"{parts.hostname}:{port}",
        host=parts.hostname,
        port=port,
        user=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        dlq_prefix=query.get("dlq_prefix", "DLQ."),
        shared_dlq=query.get("shared_dlq", "ActiveMQ.DLQ"),
        tls=parts.scheme == "stomp+ssl",
        ca_file=_ca_file(query.get("ca_file"), _without_password(url)),
    )


def _ca_file(value: str | None, where: str) -> str | None:
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise PoisonwatchError(f"{where}: CA file {value!r} does not exist")
    return str(path)


def with_ca_file(target: BrokerTarget, ca_file: str | None) -> BrokerTarget:
    """`target` verified against `ca_file` (a CA file only makes sense with stomp+ssl)."""
    if not ca_file:
        return target
    if not target.tls:
        raise PoisonwatchError(f"broker {target.name}: a CA file needs a stomp+ssl:// URL")
    return replace(target, ca_file=_ca_file(ca_file, f"broker {target.name}"))


def profiles_path() -> Path:
    return home() / PROFILES_FILE


def load_profiles(path: Path | None = None) -> dict[str, BrokerTarget]:
    """Every broker of brokers.yml (empty when the file does not exist)."""
    import yaml

    path = path or profiles_path()
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise PoisonwatchError(f"{path}: not valid YAML: {exc}") from exc
    brokers = data.get("brokers") if isinstance(data, dict) else None
    if not isinstance(brokers, dict):
        raise PoisonwatchError(f"{path}: expected a mapping `brokers:` of broker names")
    out: dict[str, BrokerTarget] = {}
    for name, entry in brokers.items():
        out[str(name)] = _target_from_entry(path, str(name), entry)
    return out


def _target_from_entry(path: Path, name: str, entry: Any) -> BrokerTarget:
    if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
        raise PoisonwatchError(f"{path}: broker {name!r} needs a `url: stomp://HOST:PORT`")
    kind = str(entry.get("kind", "classic"))
    if kind not in ("classic", "artemis"):
        raise PoisonwatchError(
            f"{path}: broker {name!r}: kind {kind!r} is not `classic` or `artemis`"
        )
    if kind == "artemis":
        target = parse_artemis_url(entry["url"], name=name)
    elif entry["url"].startswith("artemis://"):
        raise PoisonwatchError(f"{path}: broker {name!r}: an artemis:// URL needs kind: artemis")
    else:
        target = parse_broker_url(entry["url"], name=name)
    password = target.password
    if entry.get("password_env"):
        var = str(entry["password_env"])
        if var not in os.environ:
            raise PoisonwatchError(f"{path}: broker {name!r}: ${var} is not set")
        password = os.environ[var]
    return replace(
        target,
        user=str(entry["user"]) if entry.get("user") is not None else target.user,
        password=password,
        dlq_prefix=str(entry.get("dlq_prefix", target.dlq_prefix)),
        shared_dlq=str(entry.get("shared_dlq", target.shared_dlq)),
        ca_file=(
            _ca_file(str(entry["ca_file"]), f"{path}: broker {name!r}")
            if entry.get("ca_file")
            else target.ca_file
        ),
    )


def resolve_broker(spec: str) -> BrokerTarget:
    """`spec` is a stomp://, stomp+ssl:// or artemis:// URL or a broker name from brokers.yml."""
    if spec.startswith(("stomp://", "stomp+ssl://", "artemis://")):
        return parse_broker_url(spec)
    profiles = load_profiles()
    if spec not in profiles:
        known = ", ".join(sorted(profiles)) or f"none ({profiles_path()} does not exist)"
        raise PoisonwatchError(f"unknown broker {spec!r}; known brokers: {known}")
    return profiles[spec]


def live_brokers(explicit: list[str] | None = None) -> dict[str, BrokerTarget]:
    """Brokers with a connection: brokers.yml plus any `--broker` given (by broker name). An
    Artemis URL must name its broker (`?name=`): that is how apply knows which actions are its."""
    out = dict(load_profiles())
    for spec in explicit or []:
        target = resolve_broker(spec)
        if not target.named:
            raise PoisonwatchError(
                f"broker {_without_password(spec)!r}: say which broker it is with ?name=BROKER "
                "(the broker_name of its actions in remediation_actions)"
            )
        out[target.name] = target
    return out
