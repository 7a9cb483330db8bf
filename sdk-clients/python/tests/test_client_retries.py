"""The client retries what is safe to repeat while the server is unavailable, and nothing
else: a start (with an id the client made), a keyed send, a keyed start-and-send and an update
(with an update id the client made) are made again while the server says STORE_UNAVAILABLE; a send or start-and-send without an idempotency
key is not; a read made while the server is down returns once it is back; a retried call gives
up after the client's patience."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import grpc
import pytest
from conftest import eventually
from server import Server, free_port

from waymark import Client, RpcError, UnavailableError
from waymark._payload import from_payload, to_payload
from waymark._proto import types_pb2, workflow_pb2, workflow_pb2_grpc
from waymark._rpc import _ErrorInfo, _Status


class Flaky(workflow_pb2_grpc.WorkflowServiceServicer):
    """A workflow service whose database is down for the first `outage` calls of each kind."""

    def __init__(self, outage: int) -> None:
        self.outage = outage
        self.starts: list[workflow_pb2.StartWorkflowRequest] = []
        self.sends: list[workflow_pb2.SendMessageRequest] = []
        self.start_and_sends: list[workflow_pb2.StartAndSendRequest] = []
        self.updates: list[workflow_pb2.UpdateWorkflowRequest] = []

    async def _refuse_while_down(self, calls: list[Any], context: Any) -> None:
        if len(calls) <= self.outage:
            info = _ErrorInfo(reason="STORE_UNAVAILABLE", domain="waymark.dev")
            status = _Status(code=14, message="the database is unavailable")
            detail = status.details.add()
            detail.type_url = "type.googleapis.com/google.rpc.ErrorInfo"
            detail.value = info.SerializeToString()
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                "the database is unavailable",
                trailing_metadata=(("grpc-status-details-bin", status.SerializeToString()),),
            )

    async def StartWorkflow(self, request: Any, context: Any) -> Any:
        self.starts.append(request)
        await self._refuse_while_down(self.starts, context)
        wf = types_pb2.Workflow(workflow_id=request.workflow_id)
        return workflow_pb2.StartWorkflowResponse(workflow=wf, created=True)

    async def SendMessage(self, request: Any, context: Any) -> Any:
        self.sends.append(request)
        await self._refuse_while_down(self.sends, context)
        return workflow_pb2.SendMessageResponse(message_id="m-1")

    async def StartAndSend(self, request: Any, context: Any) -> Any:
        self.start_and_sends.append(request)
        await self._refuse_while_down(self.start_and_sends, context)
        wf = types_pb2.Workflow(workflow_id=request.start.workflow_id)
        return workflow_pb2.StartAndSendResponse(workflow=wf, created=True, message_id="m-1")

    async def UpdateWorkflow(self, request: Any, context: Any) -> Any:
        # A copy: the client changes its request's timeout for each resend.
        copy = workflow_pb2.UpdateWorkflowRequest()
        copy.CopyFrom(request)
        self.updates.append(copy)
        await self._refuse_while_down(self.updates, context)
        return workflow_pb2.UpdateWorkflowResponse(
            update_id=request.update_id, result=to_payload({"total": 42})
        )


async def serving(servicer: Flaky) -> tuple[grpc.aio.Server, str]:
    # Not SO_REUSEPORT (gRPC's default): a port chosen free must not be shared with a server
    # in another process, which would take some of this test's connections.
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    workflow_pb2_grpc.add_WorkflowServiceServicer_to_server(servicer, server)
    address = f"127.0.0.1:{free_port()}"
    server.add_insecure_port(address)
    await server.start()
    return server, address


async def test_a_start_is_retried_with_one_workflow_id_the_client_made() -> None:
    flaky = Flaky(outage=2)
    server, address = await serving(flaky)
    try:
        async with Client(address) as client:
            h = await client.start("anything", {"n": 1})
        ids = [r.workflow_id for r in flaky.starts]
        assert len(ids) == 3, "refused twice, then started"
        assert len(set(ids)) == 1 and h.workflow_id == ids[0]
        uuid.UUID(h.workflow_id)  # made by the client, not left to the server
    finally:
        await server.stop(None)


async def test_a_send_is_retried_only_with_an_idempotency_key() -> None:
    flaky = Flaky(outage=1)
    server, address = await serving(flaky)
    try:
        async with Client(address) as client:
            with pytest.raises(RpcError) as e:
                await client.send("wf", "hello")
            assert (e.value.code, e.value.reason) == (
                grpc.StatusCode.UNAVAILABLE,
                "STORE_UNAVAILABLE",
            )
            assert len(flaky.sends) == 1
            flaky.sends.clear()
            assert await client.send("wf", "hello", idempotency_key="k") == ("m-1", False)
            assert [r.idempotency_key for r in flaky.sends] == ["k", "k"]
    finally:
        await server.stop(None)


async def test_a_start_and_send_is_retried_only_with_an_idempotency_key() -> None:
    flaky = Flaky(outage=1)
    server, address = await serving(flaky)
    try:
        async with Client(address) as client:
            with pytest.raises(RpcError) as e:
                await client.start_and_send("anything", message="hello")
            assert e.value.code == grpc.StatusCode.UNAVAILABLE
            assert len(flaky.start_and_sends) == 1
            flaky.start_and_sends.clear()
            r = await client.start_and_send("anything", message="hello", idempotency_key="k")
            assert (r.message_id, r.duplicate, r.handle.created) == ("m-1", False, True)
            sent = flaky.start_and_sends
            assert [s.idempotency_key for s in sent] == ["k", "k"]
            # Resent as the same start: one workflow id, made by the client.
            assert sent[0].start.workflow_id == sent[1].start.workflow_id == r.handle.workflow_id
            uuid.UUID(r.handle.workflow_id)
    finally:
        await server.stop(None)


async def test_an_update_is_resent_with_one_update_id_the_client_made() -> None:
    flaky = Flaky(outage=2)
    server, address = await serving(flaky)
    try:
        async with Client(address) as client:
            answer = await client.update_workflow("wf", "add", {"n": 41}, timeout=30)
            assert answer == {"total": 42}
            sent = flaky.updates
            assert len(sent) == 3, "refused twice, then answered"
            # The same update each time: one id, made by the client (a UUID v7, which sorts by
            # time), with the same arguments.
            assert len({r.update_id for r in sent}) == 1
            made = uuid.UUID(sent[0].update_id)
            assert (made.version, made.variant) == (7, uuid.RFC_4122)
            assert {(r.workflow_id, r.name) for r in sent} == {("wf", "add")}
            assert all(from_payload(r.args) == {"n": 41} for r in sent)
            # The first waits as long as asked; a resend only for what is left of it.
            waits = [r.timeout.ToTimedelta().total_seconds() for r in sent]
            assert waits[0] == 30 and 0 < waits[2] < waits[1] < 30, waits
            # An id given is the one sent.
            flaky.updates.clear()
            await client.update_workflow("wf", "add", update_id="mine")
            assert [r.update_id for r in flaky.updates] == ["mine"] * 3
            assert not flaky.updates[0].HasField("timeout"), "the server's default"
    finally:
        await server.stop(None)


async def test_a_read_waits_for_the_server_to_come_back(caplog: pytest.LogCaptureFixture) -> None:
    # The retries are logged at DEBUG: that is how the test knows one was refused.
    caplog.set_level(logging.DEBUG, logger="waymark.client")
    server = Server().start()
    listing: asyncio.Task[Any] | None = None
    try:
        async with Client(server.address) as client:
            await client.queues.list()
            server.kill()
            listing = asyncio.create_task(client.queues.list())
            await eventually(
                lambda: "retrying" in caplog.text, what="the read to be refused and retried"
            )
            assert not listing.done()
            server.start()
            queues = await asyncio.wait_for(listing, 30)
            assert "default" in [q.name for q in queues]
    finally:
        if listing is not None:
            listing.cancel()
        server.stop()


async def test_a_send_without_an_idempotency_key_is_not_retried() -> None:
    server = Server()  # never started: nothing listens there
    async with Client(server.address, retry_unavailable_for=30) as client:
        with pytest.raises(UnavailableError):
            # Well within the 30 s the client would retry a call that is safe to repeat.
            await asyncio.wait_for(client.send("anyone", "hello"), 10)
        with pytest.raises(UnavailableError):
            await asyncio.wait_for(client.delay("anyone", 5), 10)
    # A read is retried, but only as long as the client was told to.
    async with Client(server.address, retry_unavailable_for=0.5) as client:
        with pytest.raises(UnavailableError):
            await asyncio.wait_for(client.get("anyone"), 10)
    server.stop()
