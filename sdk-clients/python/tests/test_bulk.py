"""Tags, `set_version` and bulk operations against a fake workflow service (no server): what
each request carries (tags, the filter's fields, the action), how each answer maps, that
`bulk` follows the page tokens to the end summing the batches, and that a batch and a re-pin
are resent while the server answers UNAVAILABLE."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from test_client_retries import Flaky, serving

from waymark import BulkAction, BulkOutcome, Client, Workflow, WorkflowFilter, WorkflowStatus
from waymark._proto import types_pb2, workflow_pb2


class Bulk(Flaky):
    """`Flaky`'s service answering starts, listings and re-pins with the tags and version asked
    for, and bulk calls in three batches (tokens "b2", "b3", then none), each matching 2."""

    def __init__(self, outage: int = 0) -> None:
        super().__init__(outage)
        self.lists: list[workflow_pb2.ListWorkflowsRequest] = []
        self.pins: list[workflow_pb2.SetWorkflowVersionRequest] = []
        self.bulks: list[workflow_pb2.BulkWorkflowsRequest] = []

    async def StartWorkflow(self, request: Any, context: Any) -> Any:
        self.starts.append(request)
        wf = types_pb2.Workflow(workflow_id=request.workflow_id, tags=request.tags)
        return workflow_pb2.StartWorkflowResponse(workflow=wf, created=True)

    async def ListWorkflows(self, request: Any, context: Any) -> Any:
        self.lists.append(request)
        wf = types_pb2.Workflow(workflow_id="tagged", tags={"team": "ops", "run": "r1"})
        return workflow_pb2.ListWorkflowsResponse(workflows=[wf])

    async def SetWorkflowVersion(self, request: Any, context: Any) -> Any:
        self.pins.append(request)
        await self._refuse_while_down(self.pins, context)
        wf = types_pb2.Workflow(workflow_id=request.workflow_id, app_version=request.app_version)
        return workflow_pb2.SetWorkflowVersionResponse(workflow=wf)

    async def BulkWorkflows(self, request: Any, context: Any) -> Any:
        self.bulks.append(request)
        await self._refuse_while_down(self.bulks, context)
        if request.dry_run:
            return workflow_pb2.BulkWorkflowsResponse(total=7)
        following = {"": "b2", "b2": "b3", "b3": ""}[request.page_token]
        skipped = {"WORKFLOW_FINISHED": 1} if request.page_token == "b2" else {}
        return workflow_pb2.BulkWorkflowsResponse(
            matched=2,
            applied=2 - sum(skipped.values()),
            skipped=skipped,
            next_page_token=following,
        )


async def test_tags_go_with_a_start_and_a_listing_and_come_back_on_workflows() -> None:
    service = Bulk()
    server, address = await serving(service)
    try:
        async with Client(address) as client:
            h = await client.start("job", workflow_id="t", tags={"team": "ops", "run": "r1"})
            await client.start("job", workflow_id="plain")
            page = await client.list(tags={"team": "ops"}, queue="q")
        assert [dict(r.tags) for r in service.starts] == [{"team": "ops", "run": "r1"}, {}]
        assert h.workflow is not None and h.workflow.tags == {"team": "ops", "run": "r1"}
        (listing,) = service.lists
        assert (dict(listing.tags), listing.queue_name) == ({"team": "ops"}, "q")
        assert page.workflows[0].tags == {"team": "ops", "run": "r1"}
        assert Workflow.from_proto(types_pb2.Workflow(workflow_id="plain")).tags == {}
    finally:
        await server.stop(None)


async def test_set_version_carries_its_options_and_is_resent_while_unavailable() -> None:
    service = Bulk(outage=2)
    server, address = await serving(service)
    try:
        async with Client(address, retry_unavailable_for=30) as client:
            wf = await client.set_version("old-1", "v2")
            service.outage = 0
            forced = await client.set_version("old-2", "v3", allow_unserved=True)
        assert len(service.pins) == 4, "refused twice, then re-pinned; then one call"
        assert {(r.workflow_id, r.app_version, r.allow_unserved) for r in service.pins[:3]} == {
            ("old-1", "v2", False)
        }
        last = service.pins[3]
        assert (last.workflow_id, last.app_version, last.allow_unserved) == ("old-2", "v3", True)
        assert (wf.workflow_id, wf.app_version) == ("old-1", "v2")
        assert (forced.workflow_id, forced.app_version) == ("old-2", "v3")
    finally:
        await server.stop(None)


async def test_a_filter_and_each_action_go_on_the_wire() -> None:
    service = Bulk()
    server, address = await serving(service)
    after = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    before = datetime(2026, 2, 1, tzinfo=UTC)
    full = WorkflowFilter(
        statuses=[WorkflowStatus.ENQUEUED, WorkflowStatus.CANCELLED],
        workflow_name="charge",
        queue="payments",
        created_after=after,
        created_before=before,
        worker_id="w-1",
        app_version="retired",
        parent_workflow_id="parent",
        tags={"team": "payments", "run": "r1"},
    )
    try:
        async with Client(address) as client:
            total = await client.count_matching(full)
            actions = [
                BulkAction.CANCEL,
                BulkAction.RESUME,
                BulkAction.DELETE,
                BulkAction.set_version("v2"),
                BulkAction.set_version("v3", allow_unserved=True),
            ]
            for action in actions:
                await client.bulk_batch(WorkflowFilter(), action, 10, "b3")
        assert total == 7
        dry = service.bulks[0]
        assert dry.dry_run and dry.HasField("filter")
        f = dry.filter
        assert list(f.statuses) == [
            types_pb2.WORKFLOW_STATUS_ENQUEUED,
            types_pb2.WORKFLOW_STATUS_CANCELLED,
        ]
        assert (f.workflow_name, f.queue_name, f.worker_id) == ("charge", "payments", "w-1")
        assert (f.app_version, f.parent_workflow_id) == ("retired", "parent")
        assert dict(f.tags) == {"team": "payments", "run": "r1"}
        assert f.created_after.ToDatetime(tzinfo=UTC) == after
        assert f.created_before.ToDatetime(tzinfo=UTC) == before
        batches = service.bulks[1:]
        assert [r.WhichOneof("action") for r in batches] == [
            "cancel",
            "resume",
            "delete",
            "set_version",
            "set_version",
        ]
        assert [(r.set_version.app_version, r.set_version.allow_unserved) for r in batches[3:]] == [
            ("v2", False),
            ("v3", True),
        ]
        for r in batches:
            assert (r.dry_run, r.batch_size, r.page_token) == (False, 10, "b3")
            # An empty filter is sent empty: every workflow of the namespace.
            assert r.filter == workflow_pb2.WorkflowFilter()
    finally:
        await server.stop(None)


async def test_bulk_follows_the_batches_to_the_end_and_sums_them() -> None:
    service = Bulk()
    server, address = await serving(service)
    nightly = WorkflowFilter(tags={"job": "nightly"})
    try:
        async with Client(address) as client:
            first = await client.bulk_batch(nightly, BulkAction.CANCEL, 2)
            second = await client.bulk_batch(nightly, BulkAction.CANCEL, 2, first.next_page_token)
            service.bulks.clear()
            total = await client.bulk(nightly, BulkAction.CANCEL, batch_size=2)
        assert first == BulkOutcome(2, 2, {}, "b2")
        assert second == BulkOutcome(2, 1, {"WORKFLOW_FINISHED": 1}, "b3")
        assert [r.page_token for r in service.bulks] == ["", "b2", "b3"]
        assert all(
            r.batch_size == 2 and dict(r.filter.tags) == {"job": "nightly"} for r in service.bulks
        )
        assert total == BulkOutcome(6, 5, {"WORKFLOW_FINISHED": 1}, None)
    finally:
        await server.stop(None)


async def test_a_bulk_batch_is_resent_while_the_server_is_unavailable() -> None:
    service = Bulk(outage=2)
    server, address = await serving(service)
    try:
        async with Client(address, retry_unavailable_for=30) as client:
            done = await client.bulk_batch(WorkflowFilter(queue="q"), BulkAction.DELETE)
        assert len(service.bulks) == 3, "refused twice, then done"
        assert all(r.WhichOneof("action") == "delete" for r in service.bulks)
        assert all(r.filter.queue_name == "q" and r.batch_size == 0 for r in service.bulks)
        assert done.matched == 2
    finally:
        await server.stop(None)
