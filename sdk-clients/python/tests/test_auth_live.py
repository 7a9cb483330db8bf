"""TLS and API keys against real servers: TLS with certificates `waymark-test-certs` writes at
test time, mutual TLS, and `--auth` with keys made by `waymark key create` — each role allowed
what it may do and refused the rest, a revoked worker key stopping its worker, and the options
taken from environment variables."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from conftest import Workers
from server import Server, make_certs

from waymark import Client, RpcError, UnavailableError, Worker, WorkflowContext

# Generous: a condition waited on, never a pause.
DEADLINE = 60.0


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return make_certs(tmp_path_factory.mktemp("certs"))


def serve(**options: Any) -> Iterator[Server]:
    s = Server(**options).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def tls_server(certs: pathlib.Path) -> Iterator[Server]:
    yield from serve(tls=certs)


@pytest.fixture(scope="module")
def mtls_server(certs: pathlib.Path) -> Iterator[Server]:
    yield from serve(tls=certs, client_ca=True)


@pytest.fixture(scope="module")
def auth_server() -> Iterator[Server]:
    yield from serve(auth=True)


@pytest.fixture(scope="module")
def tls_auth_server(certs: pathlib.Path) -> Iterator[Server]:
    yield from serve(tls=certs, auth=True)


def greeter(workers: Workers, **options: Any) -> Worker:
    w = workers.new(**options)

    @w.workflow("greet")
    async def greet(ctx: WorkflowContext, name: str) -> str:
        greeting: str = await ctx.step("greet", lambda: f"hello {name}")
        return greeting

    return w


async def greets(client: Client, queue: str, name: str) -> None:
    """A workflow started on `queue` is run by its worker."""
    h = await client.start("greet", name, queue=queue)
    assert await h.result(timeout=DEADLINE) == f"hello {name}"


def key_id(key: str) -> str:
    """The key id of `wmk_<key_id>_<secret>`."""
    assert key.startswith("wmk_"), "a key starts with wmk_"
    return key[len("wmk_") :].split("_", 1)[0]


# -- TLS -------------------------------------------------------------------------------------


async def test_over_tls_a_client_and_a_worker_trusting_the_ca_run_a_workflow(
    tls_server: Server, certs: pathlib.Path, queue: str
) -> None:
    ca = certs / "ca.pem"
    # No scheme and a CA: TLS. The worker names the server https:// with the CA as bytes.
    async with Client(tls_server.address, tls_ca=ca) as client:
        workers = Workers(tls_server, client, queue)
        try:
            w = greeter(
                workers, server=f"https://localhost:{tls_server.port}", tls_ca=ca.read_bytes()
            )
            await workers.start(w)
            await greets(client, queue, "tls")
        finally:
            await workers.stop_all()


async def test_a_client_trusting_another_ca_cannot_connect(
    tls_server: Server, certs: pathlib.Path
) -> None:
    async with Client(tls_server.url, tls_ca=certs / "ca.pem") as trusting:
        await trusting.list()
    async with Client(
        tls_server.url, tls_ca=certs / "other-ca.pem", retry_unavailable_for=0
    ) as client:
        with pytest.raises(UnavailableError):
            await client.list(page_size=1)


async def test_a_plaintext_client_cannot_talk_to_a_tls_server(tls_server: Server) -> None:
    async with Client(f"http://{tls_server.address}", retry_unavailable_for=0) as client:
        with pytest.raises((UnavailableError, RpcError)):
            await client.list(page_size=1)


async def test_mtls_refuses_a_client_without_a_certificate_and_takes_one_with_it(
    mtls_server: Server, certs: pathlib.Path, queue: str
) -> None:
    ca = certs / "ca.pem"
    async with Client(mtls_server.url, tls_ca=ca, retry_unavailable_for=0) as anonymous:
        with pytest.raises(UnavailableError):
            await anonymous.list(page_size=1)
    mine = {"tls_ca": ca, "tls_cert": certs / "client.pem", "tls_key": certs / "client.key"}
    async with Client(mtls_server.url, **mine) as client:
        workers = Workers(mtls_server, client, queue)
        try:
            await workers.start(greeter(workers, server=mtls_server.url, **mine))
            await greets(client, queue, "mtls")
        finally:
            await workers.stop_all()


# -- API keys --------------------------------------------------------------------------------


async def test_without_a_key_or_with_an_unknown_one_calls_are_unauthenticated(
    auth_server: Server,
) -> None:
    async with Client(auth_server.address, retry_unavailable_for=0) as client:
        with pytest.raises(RpcError) as refused:
            await client.list(page_size=1)
    assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED
    assert refused.value.reason == "UNAUTHENTICATED"
    secret = "n0t-a-real-secret"
    async with Client(auth_server.address, api_key=f"wmk_nosuchkey_{secret}") as client:
        with pytest.raises(RpcError) as unknown:
            await client.get("anything")
    assert unknown.value.reason == "UNAUTHENTICATED"
    assert secret not in str(unknown.value) and secret not in repr(unknown.value)


async def test_a_reader_key_reads_but_cannot_cancel(auth_server: Server, queue: str) -> None:
    reader_key = await auth_server.create_key("reader", "--name", "py-reader")
    async with Client(auth_server.address, api_key=auth_server.admin_key) as admin:
        workers = Workers(auth_server, admin, queue)
        try:
            # A registered workflow, held back by its delay: there for the reader to see.
            await workers.start(greeter(workers, api_key=auth_server.admin_key))
            h = await admin.start("greet", "later", queue=queue, delay=3600)
            async with Client(auth_server.address, api_key=reader_key) as reader:
                assert (await reader.get(h.workflow_id)).workflow_id == h.workflow_id
                listed = await reader.list(queue=queue)
                assert [w.workflow_id for w in listed.workflows] == [h.workflow_id]
                with pytest.raises(RpcError) as denied:
                    await reader.cancel(h.workflow_id)
                assert denied.value.code == grpc.StatusCode.PERMISSION_DENIED
                assert denied.value.reason == "PERMISSION_DENIED"
                assert reader_key not in str(denied.value)
                with pytest.raises(RpcError) as no_start:
                    await reader.start("greet", "x", queue=queue)
                assert no_start.value.reason == "PERMISSION_DENIED"
            # The refused cancel did nothing; the admin's does.
            assert (await admin.get(h.workflow_id)).status.name != "CANCELLED"
            assert (await admin.cancel(h.workflow_id)).status.name == "CANCELLED"
        finally:
            await workers.stop_all()


async def test_a_worker_with_a_client_key_is_refused_and_stops(
    auth_server: Server, queue: str
) -> None:
    client_key = await auth_server.create_key("client")
    worker = Worker(server=auth_server.address, api_key=client_key, queues=[queue])

    @worker.workflow("greet")
    async def greet(ctx: WorkflowContext, name: str) -> str:
        return name

    with pytest.raises(RpcError) as denied:
        await asyncio.wait_for(worker.run(), DEADLINE)
    assert denied.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert denied.value.reason == "PERMISSION_DENIED"
    assert client_key not in str(denied.value)


async def test_a_worker_key_runs_workflows(auth_server: Server, queue: str) -> None:
    worker_key = await auth_server.create_key("worker")
    client_key = await auth_server.create_key("client")
    async with Client(auth_server.address, api_key=client_key, namespace="default") as client:
        workers = Workers(auth_server, client, queue)
        try:
            await workers.start(greeter(workers, api_key=worker_key, namespace="default"))
            await greets(client, queue, "worker key")
        finally:
            await workers.stop_all()


async def test_revoking_its_key_stops_a_running_worker(auth_server: Server, queue: str) -> None:
    worker_key = await auth_server.create_key("worker", "--name", "py-revoked")
    async with Client(auth_server.address, api_key=auth_server.admin_key) as client:
        workers = Workers(auth_server, client, queue)
        w = greeter(workers, api_key=worker_key)
        await workers.start(w)
        (_, running), *_ = workers.tasks
        workers.tasks.clear()
        try:
            await greets(client, queue, "before")
            await auth_server.cli("key", "revoke", key_id(worker_key))
            with pytest.raises(RpcError) as refused:
                await asyncio.wait_for(running, DEADLINE)
            assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED
            assert refused.value.reason == "UNAUTHENTICATED"
            assert worker_key not in str(refused.value)
        finally:
            w.stop()
            await asyncio.gather(running, return_exceptions=True)


async def test_options_from_the_environment(
    tls_auth_server: Server, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in tls_auth_server.client_env().items():
        monkeypatch.setenv(name, value)
    # WAYMARK_SERVER is https://..., WAYMARK_TLS_CA and WAYMARK_API_KEY set: nothing to pass.
    async with Client() as client:
        workers = Workers(tls_auth_server, client, queue)
        try:
            await workers.start(greeter(workers, server=None))
            await greets(client, queue, "env")
        finally:
            await workers.stop_all()
    # A bare address with WAYMARK_TLS_CA is TLS too; without the key, refused.
    monkeypatch.delenv("WAYMARK_API_KEY")
    async with Client(tls_auth_server.address, retry_unavailable_for=0) as keyless:
        with pytest.raises(RpcError) as refused:
            await keyless.list(page_size=1)
    assert refused.value.reason == "UNAUTHENTICATED"
