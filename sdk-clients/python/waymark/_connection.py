"""Where the server is and how to reach it — plaintext or TLS, the CA to trust, a client
certificate, the API key and namespace every call carries — resolved once from a client's or a
worker's arguments and the environment. `open_channel` makes the channel both use.

An argument left at None falls back to its environment variable: `WAYMARK_SERVER`,
`WAYMARK_TLS_CA`, `WAYMARK_TLS_CERT`, `WAYMARK_TLS_KEY` (paths), `WAYMARK_API_KEY`,
`WAYMARK_NAMESPACE`. An empty string is "none" (and not the variable). `insecure` is also on
when `WAYMARK_INSECURE` is `1` (or `true`, `yes`, `on`).

The address decides TLS: `https://` is TLS (the system's roots unless a CA is given), `http://`
plaintext, and an address without a scheme is TLS when any TLS option is set. `http://` with a
TLS option is a contradiction, refused with `ValueError` before anything connects.

An API key over plaintext to a host that is not loopback (`localhost`, `127.x.x.x`, `::1`) would
cross the network unencrypted: refused with `ValueError` unless `insecure` says it is meant.

The API key is a secret: it is sent, as `authorization: Bearer <key>` on every call, and
nowhere else — not in an error message, not in a repr, not in a log.
"""

from __future__ import annotations

import ipaddress
import os
import pathlib
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

import grpc

from . import _tracing

DEFAULT_SERVER = "127.0.0.1:7450"

ENV_SERVER = "WAYMARK_SERVER"
ENV_TLS_CA = "WAYMARK_TLS_CA"
ENV_TLS_CERT = "WAYMARK_TLS_CERT"
ENV_TLS_KEY = "WAYMARK_TLS_KEY"
ENV_API_KEY = "WAYMARK_API_KEY"
ENV_NAMESPACE = "WAYMARK_NAMESPACE"
ENV_INSECURE = "WAYMARK_INSECURE"

# A PEM file's path, or the PEM itself (bytes, or text beginning with "-----BEGIN").
Pem: TypeAlias = str | os.PathLike[str] | bytes

_MAX_MESSAGE = 256 * 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", _MAX_MESSAGE),
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 60_000),
    # gRPC's own reconnect backoff grows to two minutes by default; calls retried while the
    # server is unavailable (see `_rpc.attempts`) would then miss it coming back for that long.
    ("grpc.max_reconnect_backoff_ms", 2_000),
]


@dataclass(frozen=True, eq=False, repr=False)
class Connection:
    """How to reach the server, resolved (see `resolve`)."""

    # `host:port` as gRPC takes it (no scheme).
    target: str
    tls: bool = False
    # PEM: the roots to trust (None: the system's), and the client certificate and its key
    # for mutual TLS (both or neither).
    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    api_key: str | None = None
    namespace: str | None = None

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """What every call carries."""
        md: list[tuple[str, str]] = []
        if self.api_key:
            md.append(("authorization", f"Bearer {self.api_key}"))
        if self.namespace:
            md.append(("waymark-namespace", self.namespace))
        return tuple(md)

    def __repr__(self) -> str:
        # Never the key, nor the client certificate's private key.
        parts = [f"{'https' if self.tls else 'http'}://{self.target}"]
        if self.root_certificates is not None:
            parts.append("tls_ca=...")
        if self.certificate_chain is not None:
            parts.append("client_certificate=...")
        if self.api_key:
            parts.append("api_key=<hidden>")
        if self.namespace:
            parts.append(f"namespace={self.namespace!r}")
        return f"Connection({', '.join(parts)})"


def resolve(
    server: str | None = None,
    *,
    tls_ca: Pem | None = None,
    tls_cert: Pem | None = None,
    tls_key: Pem | None = None,
    api_key: str | None = None,
    namespace: str | None = None,
    insecure: bool = False,
) -> Connection:
    """The connection the arguments (and, for those left at None, the environment) describe.
    Raises `ValueError` for options that contradict each other or cannot be used (a file that
    cannot be read, a client certificate without its key, an API key over plaintext to a host
    that is not loopback without `insecure` or `WAYMARK_INSECURE`); the message names the
    argument or variable at fault, never the key."""
    address, address_from = _pick(server, ENV_SERVER, "server")
    address = (address or DEFAULT_SERVER).strip()
    scheme, target = _split(address, address_from)

    ca, ca_from = _pick(tls_ca, ENV_TLS_CA, "tls_ca")
    cert, cert_from = _pick(tls_cert, ENV_TLS_CERT, "tls_cert")
    key, key_from = _pick(tls_key, ENV_TLS_KEY, "tls_key")
    tls_options = [f for v, f in ((ca, ca_from), (cert, cert_from), (key, key_from)) if v]
    if scheme == "http" and tls_options:
        raise ValueError(
            f"{tls_options[0]} is set, but the server address {address!r} ({address_from}) is "
            "http://, which is plaintext: use https:// (or no scheme) for TLS"
        )
    if (cert is None) != (key is None):
        given, missing = (cert_from, "tls_key") if key is None else (key_from, "tls_cert")
        raise ValueError(
            f"{given} is set without {missing}: a client certificate needs both "
            f"(tls_cert/{ENV_TLS_CERT} and tls_key/{ENV_TLS_KEY})"
        )

    key_text, api_key_from = _pick(api_key, ENV_API_KEY, "api_key")
    the_key = _api_key(key_text)
    tls = scheme == "https" or bool(tls_options)
    if the_key and not tls and not _is_loopback(target) and not _insecure(insecure):
        raise ValueError(
            f"an API key is set ({api_key_from}) and the server address {address!r} "
            f"({address_from}) is plaintext (http://, or no scheme and no TLS option) to a host "
            "that is not loopback: the key would be sent unencrypted. Use https:// (TLS), or "
            f"pass insecure=True (or set {ENV_INSECURE}=1) to send it anyway"
        )
    ns, ns_from = _pick(namespace, ENV_NAMESPACE, "namespace")
    return Connection(
        target=target,
        tls=tls,
        root_certificates=_pem(ca, ca_from),
        certificate_chain=_pem(cert, cert_from),
        private_key=_pem(key, key_from),
        api_key=the_key,
        namespace=_header_value(ns.strip(), ns_from) if ns and ns.strip() else None,
    )


def open_channel(c: Connection) -> grpc.aio.Channel:
    """A channel to the server whose every call — unary, streaming either way — carries the
    connection's metadata."""
    md = c.metadata()
    # With OpenTelemetry installed, each unary call also carries the caller's current span.
    traced = _tracing.otel() is not None
    interceptors: list[grpc.aio.ClientInterceptor] | None = None
    if md:
        interceptors = [
            _UnaryUnary(md, traced),
            _UnaryStream(md),
            _StreamUnary(md),
            _StreamStream(md),
        ]
    elif traced:
        interceptors = [_UnaryUnary(md, traced)]
    if not c.tls:
        return grpc.aio.insecure_channel(
            c.target, options=CHANNEL_OPTIONS, interceptors=interceptors
        )
    credentials = grpc.ssl_channel_credentials(
        root_certificates=c.root_certificates,
        private_key=c.private_key,
        certificate_chain=c.certificate_chain,
    )
    return grpc.aio.secure_channel(
        c.target, credentials, options=CHANNEL_OPTIONS, interceptors=interceptors
    )


def _pick(value: Any, env: str, name: str) -> tuple[Any, str]:
    """The argument, else the environment variable (empty: unset); and where it came from."""
    if value is not None:
        return (None if value in ("", b"") else value), name
    found = os.environ.get(env, "").strip()
    return (found or None), env


def _split(address: str, source: str) -> tuple[str | None, str]:
    """(scheme or None, `host:port`)."""
    scheme: str | None = None
    rest = address
    if "://" in address:
        scheme, rest = address.split("://", 1)
        scheme = scheme.lower()
        if scheme not in ("http", "https"):
            raise ValueError(
                f"the server address ({source}) has the scheme {scheme}://; "
                "use https:// for TLS, http:// for plaintext, or host:port"
            )
    rest = rest.rstrip("/")
    if not rest or "/" in rest:
        raise ValueError(f"the server address ({source}) {address!r} is not host:port or a URL")
    return scheme, rest


def _insecure(argument: bool) -> bool:
    """The opt-in to an API key over plaintext: the argument, else `WAYMARK_INSECURE`."""
    if argument:
        return True
    return os.environ.get(ENV_INSECURE, "").strip().lower() in ("1", "true", "yes", "on")


def _is_loopback(target: str) -> bool:
    """Whether `host:port` names this machine: `localhost`, `127.x.x.x`, `::1` (`[::1]:port`)."""
    host = target
    if host.startswith("["):
        host = host[1:].split("]", 1)[0]
    elif host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    host = host.rstrip(".").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _pem(value: Pem | None, source: str) -> bytes | None:
    """PEM bytes from a path, bytes, or PEM text."""
    if value is None:
        return None
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str) and value.lstrip().startswith("-----BEGIN"):
        data = value.encode()
    else:
        path = pathlib.Path(value)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ValueError(f"{source}: cannot read {path}: {e.strerror or e}") from None
    if b"-----BEGIN" not in data:
        raise ValueError(f"{source}: not PEM (no -----BEGIN line)")
    return data


def _api_key(text: str | None) -> str | None:
    if text is None:
        return None
    key = text.strip()
    # A key read from a file often ends with a newline; one with `Bearer ` already in front
    # would be sent as `Bearer Bearer ...`.
    if key.lower().startswith("bearer "):
        key = key[len("bearer ") :].strip()
    if not key:
        return None
    # gRPC sends header values of visible ASCII only; the key itself is never shown.
    if any(not ("!" <= ch <= "~") for ch in key):
        raise ValueError("the API key holds characters an authorization header cannot carry")
    return key


def _header_value(value: str, source: str) -> str:
    if any(not (" " <= ch <= "~") for ch in value):
        raise ValueError(f"{source}: {value!r} holds characters a gRPC header cannot carry")
    return value


Md = tuple[tuple[str, str], ...]


class _WithMetadata:
    """Adds the connection's metadata in front of a call's own, and with `traced` the context
    of the caller's current span (see `_tracing.outgoing_metadata`): interceptors run in the
    calling task's context, so the current span there is the caller's."""

    def __init__(self, metadata: Md, traced: bool = False) -> None:
        self._metadata = metadata
        self._traced = traced

    def details(self, d: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        md = grpc.aio.Metadata(*self._metadata)
        if self._traced:
            for key, value in _tracing.outgoing_metadata():
                md.add(key, value)
        for k, v in d.metadata or ():
            md.add(k, v)
        return grpc.aio.ClientCallDetails(d.method, d.timeout, md, d.credentials, d.wait_for_ready)


# The channel sorts its interceptors by kind, one kind each: hence four.
class _UnaryUnary(_WithMetadata, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Awaitable[Any]],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        return await continuation(self.details(client_call_details), request)


class _UnaryStream(_WithMetadata, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Awaitable[Any]],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        return await continuation(self.details(client_call_details), request)


class _StreamUnary(_WithMetadata, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(
        self,
        continuation: Callable[
            [grpc.aio.ClientCallDetails, AsyncIterable[Any] | Iterable[Any]], Awaitable[Any]
        ],
        client_call_details: grpc.aio.ClientCallDetails,
        request_iterator: AsyncIterable[Any] | Iterable[Any],
    ) -> Any:
        return await continuation(self.details(client_call_details), request_iterator)


class _StreamStream(_WithMetadata, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(
        self,
        continuation: Callable[
            [grpc.aio.ClientCallDetails, AsyncIterable[Any] | Iterable[Any]], Awaitable[Any]
        ],
        client_call_details: grpc.aio.ClientCallDetails,
        request_iterator: AsyncIterable[Any] | Iterable[Any],
    ) -> AsyncIterator[Any] | Any:
        return await continuation(self.details(client_call_details), request_iterator)
