"""The client's delete, fork and `allow_unregistered` against a fake workflow service (no
server): what each request carries, how each answer maps, that a delete is sent once even when
the server answers UNAVAILABLE (a repeat after a lost reply would find the workflow gone), and
that a fork is resent then with the id the client made."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest
from test_client_retries import Flaky, serving

from waymark import Client, RpcError
from waymark._proto import types_pb2, workflow_pb2


class Lifecycle(Flaky):
    """`Flaky`'s service (down for the first `outage` calls of each kind), answering starts with
    `name_registered` as told and deletes with the ids asked for."""

    def __init__(self, outage: int = 0, *, name_registered: bool = True) -> None:
        super().__init__(outage)
        self.name_registered = name_registered
        self.deletes: list[workflow_pb2.DeleteWorkflowRequest] = []
        self.forks: list[workflow_pb2.ForkWorkflowRequest] = []

    async def StartWorkflow(self, request: Any, context: Any) -> Any:
        self.starts.append(request)
        await self._refuse_while_down(self.starts, context)
        wf = types_pb2.Workflow(
            workflow_id=request.workflow_id,
            workflow_name=request.workflow_name,
            status=types_pb2.WORKFLOW_STATUS_ENQUEUED,
        )
        return workflow_pb2.StartWorkflowResponse(
            workflow=wf, created=True, name_registered=self.name_registered
        )

    async def DeleteWorkflow(self, request: Any, context: Any) -> Any:
        self.deletes.append(request)
        await self._refuse_while_down(self.deletes, context)
        ids = [request.workflow_id]
        if request.cascade:
            ids += [f"{request.workflow_id}-child-1", f"{request.workflow_id}-child-2"]
        return workflow_pb2.DeleteWorkflowResponse(deleted_workflow_ids=ids)

    async def ForkWorkflow(self, request: Any, context: Any) -> Any:
        self.forks.append(request)
        await self._refuse_while_down(self.forks, context)
        wf = types_pb2.Workflow(
            workflow_id=request.new_workflow_id,
            workflow_name="counted",
            status=types_pb2.WORKFLOW_STATUS_ENQUEUED,
            app_version=request.app_version or "v1",
            queue_name=request.queue_name or "default",
            forked_from_workflow_id=request.workflow_id,
            forked_from_step=request.from_step,
        )
        return workflow_pb2.ForkWorkflowResponse(workflow=wf)


async def test_a_start_carries_allow_unregistered_and_maps_name_registered() -> None:
    service = Lifecycle(name_registered=False)
    server, address = await serving(service)
    try:
        async with Client(address) as client:
            early = await client.start("not-yet", workflow_id="early", allow_unregistered=True)
            service.name_registered = True
            plain = await client.start("known", workflow_id="plain")
        assert [r.allow_unregistered for r in service.starts] == [True, False]
        assert (early.created, early.name_registered) == (True, False)
        assert early.workflow is not None and early.workflow.workflow_name == "not-yet"
        assert plain.name_registered
    finally:
        await server.stop(None)


async def test_delete_sends_cascade_and_returns_the_deleted_ids() -> None:
    service = Lifecycle()
    server, address = await serving(service)
    try:
        async with Client(address) as client:
            alone = await client.delete("wf")
            tree = await client.delete("parent", cascade=True)
        assert [(r.workflow_id, r.cascade) for r in service.deletes] == [
            ("wf", False),
            ("parent", True),
        ]
        assert alone == ["wf"]
        assert tree == ["parent", "parent-child-1", "parent-child-2"]
    finally:
        await server.stop(None)


async def test_a_delete_is_sent_once_while_the_server_is_unavailable() -> None:
    service = Lifecycle(outage=1)
    server, address = await serving(service)
    try:
        async with Client(address, retry_unavailable_for=30) as client:
            with pytest.raises(RpcError) as e:
                await client.delete("wf")
        assert (e.value.code, e.value.reason) == (grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE")
        assert len(service.deletes) == 1, "not made again"
    finally:
        await server.stop(None)


async def test_a_fork_carries_its_options_and_maps_the_lineage() -> None:
    service = Lifecycle()
    server, address = await serving(service)
    try:
        async with Client(address) as client:
            h = await client.fork(
                "src", from_step=2, new_id="src-again", app_version="v2", queue="fixes"
            )
            whole = await client.fork("src")
        first, second = service.forks
        assert (first.workflow_id, first.new_workflow_id) == ("src", "src-again")
        assert (first.HasField("from_step"), first.from_step) == (True, 2)
        assert (first.app_version, first.queue_name) == ("v2", "fixes")
        assert h.workflow_id == "src-again" and h.workflow is not None
        wf = h.workflow
        assert (wf.forked_from_workflow_id, wf.forked_from_step) == ("src", 2)
        assert (wf.app_version, wf.queue_name) == ("v2", "fixes")
        # Nothing asked: every step copied (no from_step sent), the source's version and queue.
        assert not second.HasField("from_step")
        assert (second.app_version, second.queue_name) == ("", "")
        uuid.UUID(second.new_workflow_id)  # made by the client, not left to the server
        assert whole.workflow_id == second.new_workflow_id
    finally:
        await server.stop(None)


async def test_a_fork_is_resent_with_the_same_generated_id_while_unavailable() -> None:
    service = Lifecycle(outage=2)
    server, address = await serving(service)
    try:
        async with Client(address, retry_unavailable_for=30) as client:
            h = await client.fork("src", from_step=1)
        ids = [r.new_workflow_id for r in service.forks]
        assert len(ids) == 3, "refused twice, then forked"
        assert len(set(ids)) == 1 and h.workflow_id == ids[0]
        uuid.UUID(h.workflow_id)
        assert all(r.from_step == 1 and r.workflow_id == "src" for r in service.forks)
    finally:
        await server.stop(None)
