"""Connection options without a Waymark server: how the address, TLS options, key and namespace
resolve (arguments, then environment variables), and — against small in-process gRPC services
— that every kind of call carries the key and namespace, and that a worker whose stream is
refused for its key stops instead of reconnecting for ever."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from server import free_port

from waymark import Client, RpcError, Worker, WorkflowContext
from waymark._connection import resolve
from waymark._proto import (
    queue_pb2,
    queue_pb2_grpc,
    types_pb2,
    worker_pb2,
    worker_pb2_grpc,
    workflow_pb2,
    workflow_pb2_grpc,
)
from waymark._rpc import _ErrorInfo, _Status

KEY = "wmk_k1d_s3cr3t-never-shown"
ENV = (
    "WAYMARK_SERVER",
    "WAYMARK_TLS_CA",
    "WAYMARK_TLS_CERT",
    "WAYMARK_TLS_KEY",
    "WAYMARK_API_KEY",
    "WAYMARK_NAMESPACE",
    "WAYMARK_INSECURE",
)
PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.fixture
def pem_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "ca.pem"
    path.write_bytes(PEM)
    return path


# -- resolving the options ---------------------------------------------------------------------


def test_the_scheme_decides_tls_and_an_address_without_one_follows_the_tls_options(
    pem_file: pathlib.Path,
) -> None:
    plain = resolve("http://10.0.0.1:7450/")
    assert (plain.tls, plain.target) == (False, "10.0.0.1:7450")
    assert not resolve("10.0.0.1:7450").tls
    system_roots = resolve("https://waymark.example:443")
    assert system_roots.tls and system_roots.root_certificates is None
    assert system_roots.target == "waymark.example:443"
    bare = resolve("localhost:7450", tls_ca=pem_file)
    assert bare.tls and bare.root_certificates == PEM
    with pytest.raises(ValueError, match="grpc://"):
        resolve("grpc://localhost:1")


def test_http_with_a_tls_option_is_refused_at_construction(pem_file: pathlib.Path) -> None:
    with pytest.raises(ValueError, match=r"tls_ca .*http://"):
        resolve("http://localhost:7450", tls_ca=pem_file)
    with pytest.raises(ValueError, match="http://"):
        Client("http://localhost:7450", tls_ca=PEM)
    with pytest.raises(ValueError, match="http://"):
        Worker(server="http://localhost:7450", tls_cert=PEM, tls_key=PEM)


def test_http_from_the_environment_with_a_tls_option_names_the_variables(
    monkeypatch: pytest.MonkeyPatch, pem_file: pathlib.Path
) -> None:
    monkeypatch.setenv("WAYMARK_SERVER", "http://localhost:7450")
    monkeypatch.setenv("WAYMARK_TLS_CA", str(pem_file))
    with pytest.raises(ValueError, match=r"WAYMARK_TLS_CA .*WAYMARK_SERVER"):
        resolve()


def test_a_client_certificate_needs_its_key_and_files_must_be_pem(
    tmp_path: pathlib.Path, pem_file: pathlib.Path
) -> None:
    with pytest.raises(ValueError, match="tls_cert is set without tls_key"):
        resolve("localhost:1", tls_cert=pem_file)
    with pytest.raises(ValueError, match="tls_key is set without tls_cert"):
        resolve("localhost:1", tls_key=pem_file)
    with pytest.raises(ValueError, match="tls_ca: cannot read"):
        resolve("localhost:1", tls_ca=tmp_path / "missing.pem")
    (tmp_path / "junk").write_text("not a certificate")
    with pytest.raises(ValueError, match="not PEM"):
        resolve("localhost:1", tls_ca=str(tmp_path / "junk"))
    # PEM text works as well as bytes and paths.
    assert resolve("localhost:1", tls_ca=PEM.decode()).root_certificates == PEM
    mtls = resolve("https://localhost:1", tls_cert=str(pem_file), tls_key=PEM)
    assert mtls.certificate_chain == PEM and mtls.private_key == PEM


def test_options_fall_back_to_the_environment_and_arguments_win(
    monkeypatch: pytest.MonkeyPatch, pem_file: pathlib.Path
) -> None:
    monkeypatch.setenv("WAYMARK_SERVER", "https://env-host:1")
    monkeypatch.setenv("WAYMARK_TLS_CA", str(pem_file))
    monkeypatch.setenv("WAYMARK_TLS_CERT", str(pem_file))
    monkeypatch.setenv("WAYMARK_TLS_KEY", str(pem_file))
    monkeypatch.setenv("WAYMARK_API_KEY", f"{KEY}\n")
    monkeypatch.setenv("WAYMARK_NAMESPACE", "default")
    c = resolve()
    assert (c.target, c.tls, c.root_certificates, c.private_key) == ("env-host:1", True, PEM, PEM)
    assert c.metadata() == (("authorization", f"Bearer {KEY}"), ("waymark-namespace", "default"))
    other = resolve("https://arg-host:2", api_key="wmk_other_key", namespace="")
    assert other.target == "arg-host:2"
    assert other.metadata() == (("authorization", "Bearer wmk_other_key"),)


def test_no_key_no_metadata_and_bad_keys_are_refused_without_showing_them() -> None:
    assert resolve("h:1").metadata() == ()
    assert resolve("localhost:1", api_key=f"Bearer {KEY}").api_key == KEY
    with pytest.raises(ValueError) as refused:
        resolve("h:1", api_key="wmk_a_b secret-part")
    assert "secret-part" not in str(refused.value)


def test_a_key_over_plaintext_to_a_remote_host_needs_insecure(
    monkeypatch: pytest.MonkeyPatch, pem_file: pathlib.Path
) -> None:
    for remote in ("http://waymark.example:7450", "10.0.0.1:7450", "http://[2001:db8::1]:7450"):
        with pytest.raises(ValueError) as refused:
            resolve(remote, api_key=KEY)
        message = str(refused.value)
        assert "unencrypted" in message and "https://" in message, message
        assert "insecure=True" in message and "WAYMARK_INSECURE=1" in message, message
        assert KEY not in message
    # From the environment too, and named so; the client and the worker refuse it as well.
    monkeypatch.setenv("WAYMARK_API_KEY", KEY)
    monkeypatch.setenv("WAYMARK_SERVER", "http://waymark.example:7450")
    with pytest.raises(ValueError, match=r"WAYMARK_API_KEY.*WAYMARK_SERVER") as refused:
        resolve()
    assert KEY not in str(refused.value)
    with pytest.raises(ValueError, match="insecure"):
        Client()
    with pytest.raises(ValueError, match="insecure"):
        Worker()
    monkeypatch.delenv("WAYMARK_API_KEY")
    monkeypatch.delenv("WAYMARK_SERVER")

    # Loopback is this machine: the key does not cross a network.
    for local in (
        "http://127.0.0.1:7450",
        "127.0.0.1:7450",
        "http://127.1.2.3:7450",
        "http://localhost:7450",
        "LOCALHOST:7450",
        "http://[::1]:7450",
    ):
        assert resolve(local, api_key=KEY).api_key == KEY, local
    # TLS to any host.
    assert resolve("https://waymark.example:7450", api_key=KEY).tls
    assert resolve("waymark.example:7450", api_key=KEY, tls_ca=pem_file).tls
    # Without a key, plaintext to any host as before.
    assert not resolve("http://waymark.example:7450").tls
    # Said explicitly: the argument, or WAYMARK_INSECURE.
    plain = resolve("http://waymark.example:7450", api_key=KEY, insecure=True)
    assert (plain.tls, plain.api_key) == (False, KEY)
    Client("http://waymark.example:7450", api_key=KEY, insecure=True)
    Worker(server="http://waymark.example:7450", api_key=KEY, insecure=True)
    monkeypatch.setenv("WAYMARK_INSECURE", "0")
    with pytest.raises(ValueError, match="insecure"):
        resolve("http://waymark.example:7450", api_key=KEY)
    monkeypatch.setenv("WAYMARK_INSECURE", "1")
    assert resolve("http://waymark.example:7450", api_key=KEY).api_key == KEY
    Client("http://waymark.example:7450", api_key=KEY)
    Worker(server="http://waymark.example:7450", api_key=KEY)


def test_the_key_is_in_no_repr(pem_file: pathlib.Path) -> None:
    c = resolve("localhost:1", tls_ca=pem_file, api_key=KEY, namespace="default")
    assert KEY not in repr(c) and "api_key=<hidden>" in repr(c)
    assert repr(c).startswith("Connection(https://localhost:1")
    assert KEY not in repr(Client("localhost:1", api_key=KEY))
    worker = Worker(server="localhost:1", api_key=KEY)
    assert KEY not in repr(worker) and KEY not in repr(worker._config)


# -- against in-process gRPC services ----------------------------------------------------------


def refusal(code: grpc.StatusCode, reason: str) -> tuple[tuple[str, bytes]]:
    """The trailer the server sends with a refusal: its ErrorInfo reason."""
    status = _Status(code=code.value[0], message=reason.lower())
    detail = status.details.add()
    detail.type_url = "type.googleapis.com/google.rpc.ErrorInfo"
    detail.value = _ErrorInfo(reason=reason, domain="waymark.dev").SerializeToString()
    return (("grpc-status-details-bin", status.SerializeToString()),)


def metadata_of(context: Any) -> dict[str, str]:
    return {m.key: m.value for m in context.invocation_metadata()}


class Recorder(workflow_pb2_grpc.WorkflowServiceServicer, queue_pb2_grpc.QueueServiceServicer):
    """Answers a unary call, a server-streaming call and a queue read, noting their metadata."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, str]] = {}

    async def GetWorkflow(self, request: Any, context: Any) -> Any:
        self.seen["GetWorkflow"] = metadata_of(context)
        return workflow_pb2.GetWorkflowResponse(
            workflow=types_pb2.Workflow(workflow_id=request.workflow_id)
        )

    async def ReadStream(self, request: Any, context: Any) -> AsyncIterator[Any]:
        self.seen["ReadStream"] = metadata_of(context)
        yield workflow_pb2.ReadStreamResponse(offset=0)

    async def GetQueue(self, request: Any, context: Any) -> Any:
        self.seen["GetQueue"] = metadata_of(context)
        return queue_pb2.GetQueueResponse(queue=queue_pb2.Queue(name=request.name))


class Gate(worker_pb2_grpc.WorkerServiceServicer):
    """A worker service that, connection by connection, refuses the stream at once
    (`("refuse", code, reason)`) or welcomes the worker and then ends the stream with that
    status (`("later", code, reason)`); it welcomes and holds any connection past the script."""

    def __init__(self, *script: tuple[str, grpc.StatusCode, str]) -> None:
        self.script = list(script)
        self.connections: list[dict[str, str]] = []
        self.hellos: list[worker_pb2.Hello] = []

    async def Connect(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        self.connections.append(metadata_of(context))
        step = self.script.pop(0) if self.script else None
        if step is not None and step[0] == "refuse":
            await context.abort(step[1], step[2].lower(), trailing_metadata=refusal(*step[1:]))
        first = await anext(aiter(request_iterator))
        self.hellos.append(first.hello)
        yield worker_pb2.ServerMessage(
            welcome=worker_pb2.Welcome(session_id="s", heartbeat_interval_ms=60_000)
        )
        if step is not None:
            await context.abort(step[1], step[2].lower(), trailing_metadata=refusal(*step[1:]))
        async for _ in request_iterator:
            pass


async def serving(*servicers: Any) -> tuple[grpc.aio.Server, str]:
    # Not SO_REUSEPORT (gRPC's default): a port chosen free must not be shared with a server
    # in another process, which would take some of this test's connections.
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    for s in servicers:
        if isinstance(s, Recorder):
            workflow_pb2_grpc.add_WorkflowServiceServicer_to_server(s, server)
            queue_pb2_grpc.add_QueueServiceServicer_to_server(s, server)
        else:
            worker_pb2_grpc.add_WorkerServiceServicer_to_server(s, server)
    address = f"127.0.0.1:{free_port()}"
    server.add_insecure_port(address)
    await server.start()
    return server, address


async def test_every_kind_of_client_call_carries_the_key_and_namespace() -> None:
    recorder = Recorder()
    server, address = await serving(recorder)
    try:
        async with Client(address, api_key=KEY, namespace="default") as client:
            await client.get("wf-1")
            assert [e.offset async for e in client.read_stream("wf-1", "k")] == [0]
            await client.queues.get("q")
        assert set(recorder.seen) == {"GetWorkflow", "ReadStream", "GetQueue"}
        for method, md in recorder.seen.items():
            assert md.get("authorization") == f"Bearer {KEY}", method
            assert md.get("waymark-namespace") == "default", method
        # Without a key, no authorization header at all.
        recorder.seen.clear()
        async with Client(address) as client:
            await client.get("wf-1")
        assert "authorization" not in recorder.seen["GetWorkflow"]
        assert "waymark-namespace" not in recorder.seen["GetWorkflow"]
    finally:
        await server.stop(None)


def a_worker(address: str, **options: Any) -> Worker:
    w = Worker(server=address, app_version="1", **options)

    @w.workflow("noop")
    async def noop(ctx: WorkflowContext) -> None:
        return None

    return w


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"),
        (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED"),
    ],
)
async def test_a_worker_refused_at_connect_stops_with_the_reason(
    code: grpc.StatusCode, reason: str
) -> None:
    gate = Gate(("refuse", code, reason))
    server, address = await serving(gate)
    try:
        worker = a_worker(address, api_key=KEY, namespace="default")
        with pytest.raises(RpcError) as refused:
            await asyncio.wait_for(worker.run(), 20)
        assert (refused.value.code, refused.value.reason) == (code, reason)
        assert "refused this worker's stream" in str(refused.value)
        assert KEY not in str(refused.value) and KEY not in repr(refused.value)
        assert len(gate.connections) == 1, "no reconnect after a refusal"
        assert gate.connections[0]["authorization"] == f"Bearer {KEY}"
        assert gate.connections[0]["waymark-namespace"] == "default"
    finally:
        await server.stop(None)


async def test_a_worker_refused_later_stops_and_other_ends_reconnect() -> None:
    gate = Gate(
        # Not a refusal for the key: reconnects (twice).
        ("refuse", grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE"),
        ("later", grpc.StatusCode.INTERNAL, "INTERNAL"),
        # The key revoked while the stream is open.
        ("later", grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"),
        ("refuse", grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED"),
    )
    server, address = await serving(gate)
    try:
        worker = a_worker(address, api_key=KEY)
        with pytest.raises(RpcError) as refused:
            await asyncio.wait_for(worker.run(), 20)
        assert refused.value.reason == "UNAUTHENTICATED"
        assert len(gate.connections) == 3
        assert all(c["authorization"] == f"Bearer {KEY}" for c in gate.connections)
        assert [h.workflow_names for h in gate.hellos] == [["noop"], ["noop"]]
        # `run` can be called again (and is refused again).
        with pytest.raises(RpcError) as again:
            await asyncio.wait_for(worker.run(), 20)
        assert again.value.reason == "PERMISSION_DENIED"
        assert len(gate.connections) == 4
    finally:
        await server.stop(None)
