"""OpenTelemetry tracing without a server (contract/tracing.md): the spans a worker opens for
what a fake server (tests/fake_server.py) dispatches, the trace context it sends on in
`CallStep` and `StartChild`, and the `traceparent` a client puts in its calls' metadata. Spans go
to an in-memory exporter (tests/tracing_helpers.py)."""

from __future__ import annotations

import sys
from typing import Any

import grpc
import pytest
from conftest import eventually
from fake_server import FakeServer, accept
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from server import free_port
from tracing_helpers import exporter, ids, named, of_workflow, traceparent, tracer, w3c_propagation

from waymark import Client, StepFailed, WorkflowContext, _tracing
from waymark._payload import from_payload, to_payload
from waymark._proto import types_pb2, worker_pb2, workflow_pb2, workflow_pb2_grpc

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
PARENT_ID = 0x00F067AA0BA902B7
DELIVERED = worker_pb2.RecvResult.OUTCOME_DELIVERED


@pytest.fixture(autouse=True)
def spans() -> None:
    exporter().clear()


async def answer(m: worker_pb2.WorkerMessage) -> worker_pb2.Reply:
    """A healthy server that also answers at once what a workflow waits for."""
    kind = m.WhichOneof("kind")
    if kind == "call_step":
        result = worker_pb2.CallResult(outcome=DELIVERED, output=to_payload("remote"))
        return worker_pb2.Reply(call_result=result)
    if kind == "start_child":
        started = worker_pb2.ChildStarted(child_workflow_id=m.start_child.child_workflow_id)
        return worker_pb2.Reply(child_started=started)
    if kind == "await_child":
        result = worker_pb2.ChildResult(
            outcome=DELIVERED, status=types_pb2.WORKFLOW_STATUS_SUCCESS, output=to_payload(1)
        )
        return worker_pb2.Reply(child_result=result)
    if kind == "recv":
        recv = worker_pb2.RecvResult(outcome=DELIVERED, message=to_payload("hi"))
        return worker_pb2.Reply(recv_result=recv)
    if kind == "get_event":
        event = worker_pb2.EventResult(outcome=DELIVERED, value=to_payload("on"))
        return worker_pb2.Reply(event_result=event)
    if kind == "select":
        return worker_pb2.Reply(selected=worker_pb2.Selected(outcome=DELIVERED, index=0))
    return await accept(m)


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def step_output(step_id: int, name: str, value: Any) -> types_pb2.Step:
    return types_pb2.Step(step_id=step_id, name=name, output=to_payload(value))


async def test_a_dispatch_opens_its_workflow_span_under_its_trace_context_and_steps_under_it() -> (
    None
):
    fake = FakeServer(answer)
    inner: list[trace.SpanContext] = []

    def charge(n: int) -> int:
        # What the step's function traces nests in the step's span.
        with tracer().start_as_current_span("inside charge") as s:
            inner.append(s.get_span_context())
        return n * 2

    @fake.workflow("checkout")
    async def checkout(ctx: WorkflowContext, n: int) -> int:
        return int(await ctx.step("charge", charge, n))

    try:
        run = fake.dispatch(
            "wf-trace", "checkout", 4, epoch=3, traceparent=traceparent(TRACE_ID, PARENT_ID)
        )
        await fake.ended(run)
        [done] = fake.of_kind("complete_workflow")
        assert from_payload(done.output) == 8
    finally:
        await fake.stop()

    spans = of_workflow("wf-trace")
    wf = named(spans, "workflow checkout")
    assert wf.kind == SpanKind.CONSUMER
    assert wf.context.trace_id == TRACE_ID
    assert parent_of(wf) == PARENT_ID and wf.parent is not None and wf.parent.is_remote
    assert dict(wf.attributes or {}) == {
        "waymark.workflow.id": "wf-trace",
        "waymark.workflow.name": "checkout",
        "waymark.epoch": 3,
        "waymark.replay": False,
        "waymark.recovery_attempts": 0,
    }
    assert wf.status.status_code == StatusCode.UNSET

    step = named(spans, "step charge")
    assert step.kind == SpanKind.INTERNAL
    assert step.context.trace_id == TRACE_ID
    assert parent_of(step) == wf.context.span_id
    assert (step.attributes or {})["waymark.step.id"] == 0
    assert (step.attributes or {})["waymark.step.name"] == "charge"
    assert step.status.status_code == StatusCode.UNSET
    [inside] = inner
    [inside_span] = [s for s in exporter().get_finished_spans() if s.name == "inside charge"]
    assert inside.trace_id == TRACE_ID and parent_of(inside_span) == step.context.span_id


async def test_a_dispatch_without_a_trace_context_starts_a_new_trace() -> None:
    fake = FakeServer(answer)

    @fake.workflow("solo")
    async def solo(ctx: WorkflowContext) -> None:
        return None

    # An ambient span where the worker runs is not the workflow's parent.
    with tracer().start_as_current_span("ambient"):
        try:
            await fake.ended(fake.dispatch("wf-root", "solo"))
        finally:
            await fake.stop()
    wf = named(of_workflow("wf-root"), "workflow solo")
    assert wf.parent is None


async def test_a_call_step_carries_the_call_span_and_start_child_its_producer_span() -> None:
    fake = FakeServer(answer)

    @fake.workflow("parent")
    async def parent(ctx: WorkflowContext) -> list[Any]:
        remote = await ctx.call_step("print_label", {"id": 7})
        child = await ctx.child("kid", {"x": 1}, workflow_id="wf-kid")
        return [remote, child]

    try:
        run = fake.dispatch("wf-calls", "parent", traceparent=traceparent(TRACE_ID, PARENT_ID))
        await fake.ended(run)
        [done] = fake.of_kind("complete_workflow")
        assert from_payload(done.output) == ["remote", 1]
    finally:
        await fake.stop()

    spans = of_workflow("wf-calls")
    wf = named(spans, "workflow parent")
    call = named(spans, "call print_label")
    assert call.kind == SpanKind.CLIENT and parent_of(call) == wf.context.span_id
    assert (call.attributes or {})["waymark.step.id"] == 0
    assert (call.attributes or {})["waymark.step.name"] == "print_label"
    # Every CallStep of the position (the call, and each ask for its result) carries the span.
    calls = fake.of_kind("call_step")
    assert calls
    for c in calls:
        assert ids(c.trace_context.traceparent) == (TRACE_ID, call.context.span_id)

    start = named(spans, "start child kid")
    assert start.kind == SpanKind.PRODUCER and parent_of(start) == wf.context.span_id
    assert (start.attributes or {})["waymark.step.id"] == 1
    [sc] = fake.of_kind("start_child")
    assert ids(sc.trace_context.traceparent) == (TRACE_ID, start.context.span_id)

    wait = named(spans, "wait child")
    assert parent_of(wait) == wf.context.span_id
    assert (wait.attributes or {})["waymark.step.id"] == 2


async def test_waits_open_wait_spans_with_their_topic_and_key() -> None:
    fake = FakeServer(answer)

    @fake.workflow("waiter")
    async def waiter(ctx: WorkflowContext) -> list[Any]:
        await ctx.sleep(0)
        message = await ctx.recv("approval", timeout=60)
        value = await ctx.get_event("other", "status", timeout=60)
        h = await ctx.start_step("label")
        index = await ctx.wait_first(h)
        return [message, value, index]

    try:
        run = fake.dispatch("wf-waits", "waiter", traceparent=traceparent(TRACE_ID, PARENT_ID))
        await fake.ended(run)
        [done] = fake.of_kind("complete_workflow")
        assert from_payload(done.output) == ["hi", "on", 0]
    finally:
        await fake.stop()

    spans = of_workflow("wf-waits")
    wf = named(spans, "workflow waiter")
    sleep, recv, event, select = (
        named(spans, n) for n in ("wait sleep", "wait recv", "wait event", "wait select")
    )
    for s in (sleep, recv, event, select):
        assert s.kind == SpanKind.INTERNAL and parent_of(s) == wf.context.span_id
    assert [(s.attributes or {})["waymark.step.id"] for s in (sleep, recv, event, select)] == [
        0,
        1,
        3,
        6,
    ]
    assert (recv.attributes or {})["waymark.wait.topic"] == "approval"
    assert (event.attributes or {})["waymark.wait.key"] == "status"
    # The remote step was called and never awaited: its span ends with the run.
    assert named(spans, "call label").end_time is not None


async def test_a_replayed_step_opens_no_span_and_the_workflow_span_says_replay() -> None:
    fake = FakeServer(answer)
    ran: list[str] = []

    def effect(name: str) -> str:
        ran.append(name)
        return name

    @fake.workflow("two")
    async def two(ctx: WorkflowContext) -> list[str]:
        a = await ctx.step("a", effect, "a")
        await ctx.sleep(3600)
        label = await ctx.call_step("label")
        b = await ctx.step("b", effect, "b")
        return [a, label, b]

    history = [
        step_output(0, "a", "a"),
        step_output(1, "waymark.sleep", {"wake_at_ms": 1}),  # long over
        step_output(2, "label", "recorded"),
    ]
    try:
        run = fake.dispatch("wf-replay", "two", steps=history, epoch=2, traceparent="")
        await fake.ended(run)
        [done] = fake.of_kind("complete_workflow")
        assert from_payload(done.output) == ["a", "recorded", "b"]
    finally:
        await fake.stop()
    assert ran == ["b"]
    assert fake.of_kind("call_step") == []
    spans = of_workflow("wf-replay")
    assert sorted(s.name for s in spans) == ["step b", "workflow two"]
    assert (named(spans, "workflow two").attributes or {})["waymark.replay"] is True


async def test_a_recovered_dispatch_without_steps_is_a_replay() -> None:
    fake = FakeServer(answer)

    @fake.workflow("again")
    async def again(ctx: WorkflowContext) -> None:
        return None

    try:
        await fake.ended(fake.dispatch("wf-recovered", "again", recovery_attempts=2))
    finally:
        await fake.stop()
    attributes = named(of_workflow("wf-recovered"), "workflow again").attributes or {}
    assert attributes["waymark.replay"] is True
    assert attributes["waymark.recovery_attempts"] == 2


async def test_a_failed_step_and_workflow_end_their_spans_with_status_error() -> None:
    fake = FakeServer(answer)

    def broken() -> None:
        raise ValueError("card declined")

    @fake.workflow("fails")
    async def fails(ctx: WorkflowContext) -> None:
        await ctx.step("charge", broken)

    try:
        await fake.ended(fake.dispatch("wf-fails", "fails"))
        [done] = fake.of_kind("complete_workflow")
        assert done.failure.kind == "StepFailed"
    finally:
        await fake.stop()
    spans = of_workflow("wf-fails")
    step = named(spans, "step charge")
    assert step.status.status_code == StatusCode.ERROR
    assert step.status.description == "card declined"
    wf = named(spans, "workflow fails")
    assert wf.status.status_code == StatusCode.ERROR
    assert wf.status.description == done.failure.message


async def test_a_dispatched_step_runs_in_a_consumer_span_under_its_callers_span() -> None:
    fake = FakeServer(answer)
    seen: list[trace.SpanContext] = []

    @fake.worker.step("double")
    def double(n: int) -> int:
        seen.append(trace.get_current_span().get_span_context())
        return n * 2

    @fake.worker.step("refuse")
    def refuse(n: int) -> int:
        raise RuntimeError("no")

    def dispatch(step_id: int, name: str) -> None:
        d = worker_pb2.DispatchStep(
            workflow_id="wf-caller",
            step_id=step_id,
            step_name=name,
            input=to_payload(21),
            attempt=2,
            trace_context=types_pb2.TraceContext(traceparent=traceparent(TRACE_ID, PARENT_ID)),
        )
        fake.session._handle(worker_pb2.ServerMessage(dispatch_step=d))

    try:
        dispatch(4, "double")
        dispatch(5, "refuse")
        # Each span ends once its result is sent (and answered).
        await eventually(lambda: len(of_workflow("wf-caller")) == 2, 10, "two step spans")
    finally:
        await fake.stop()
    results = {r.step_id: r for r in fake.of_kind("step_result")}
    assert from_payload(results[4].output) == 42 and results[5].HasField("failure")
    spans = of_workflow("wf-caller")
    ok = named(spans, "step double")
    assert ok.kind == SpanKind.CONSUMER
    assert ok.context.trace_id == TRACE_ID and parent_of(ok) == PARENT_ID
    assert dict(ok.attributes or {}) == {
        "waymark.workflow.id": "wf-caller",
        "waymark.step.id": 4,
        "waymark.step.name": "double",
        "waymark.step.attempt": 2,
    }
    assert ok.status.status_code == StatusCode.UNSET
    assert seen == [ok.context]
    bad = named(spans, "step refuse")
    assert bad.status.status_code == StatusCode.ERROR and bad.status.description == "no"


async def test_a_replayer_opens_no_span() -> None:
    from waymark import Replayer
    from waymark.replay import Returned

    async def one(ctx: WorkflowContext) -> Any:
        return await ctx.step("a", lambda: 1)

    history = {
        "workflow_id": "wf-offline",
        "workflow_name": "one",
        "steps": [{"step_id": 0, "name": "a", "output": 1}],
    }
    assert await Replayer({"one": one}).replay(history) == Returned(1)
    assert of_workflow("wf-offline") == []


class Recorder(workflow_pb2_grpc.WorkflowServiceServicer):
    """A workflow service that keeps the metadata of each call."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, str]] = []

    def _keep(self, context: Any) -> None:
        self.metadata.append({k: v for k, v in context.invocation_metadata()})

    async def StartWorkflow(self, request: Any, context: Any) -> Any:
        self._keep(context)
        wf = types_pb2.Workflow(workflow_id=request.workflow_id)
        return workflow_pb2.StartWorkflowResponse(workflow=wf, created=True)

    async def GetWorkflow(self, request: Any, context: Any) -> Any:
        self._keep(context)
        wf = types_pb2.Workflow(workflow_id=request.workflow_id)
        return workflow_pb2.GetWorkflowResponse(workflow=wf)


@pytest.fixture
async def recorder() -> Any:
    servicer = Recorder()
    # Not SO_REUSEPORT (gRPC's default): a port chosen free must not be shared with a server
    # in another process, which would take some of this test's connections.
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    workflow_pb2_grpc.add_WorkflowServiceServicer_to_server(servicer, server)
    address = f"127.0.0.1:{free_port()}"
    server.add_insecure_port(address)
    await server.start()
    yield servicer, address
    await server.stop(None)


@pytest.mark.parametrize("namespace", [None, "shop"])
async def test_client_calls_carry_the_current_span_in_their_metadata(
    recorder: Any, namespace: str | None
) -> None:
    servicer, address = recorder
    async with Client(address, namespace=namespace) as client:
        with w3c_propagation(), tracer().start_as_current_span("caller") as caller:
            await client.start("checkout", {"id": 7}, workflow_id="wf-1")
            await client.get("wf-1")
        await client.get("wf-1")  # no span now: nothing added
    ctx = caller.get_span_context()
    first, second, third = servicer.metadata
    for md in (first, second):
        assert ids(md["traceparent"]) == (ctx.trace_id, ctx.span_id)
        assert md.get("waymark-namespace") == namespace
    assert "traceparent" not in third and "tracestate" not in third


async def test_without_opentelemetry_nothing_is_sent_or_opened(
    recorder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    servicer, address = recorder
    caller = tracer().start_span("caller")  # made while the API is still there
    # As if OpenTelemetry were not installed: importing it fails.
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type]
    _tracing.forget()
    try:
        assert _tracing.otel() is None
        fake = FakeServer(answer)

        @fake.workflow("plain")
        async def plain(ctx: WorkflowContext) -> Any:
            await ctx.step("a", lambda: 1)
            await ctx.sleep(0)
            remote = await ctx.call_step("label")
            child = await ctx.child("kid", workflow_id="wf-plain-kid")
            try:
                await ctx.step("b", lambda: 1 / 0)
            except StepFailed:
                pass
            return [remote, child]

        try:
            run = fake.dispatch("wf-plain", "plain", traceparent=traceparent(TRACE_ID, PARENT_ID))
            await fake.ended(run)
            [done] = fake.of_kind("complete_workflow")
            assert from_payload(done.output) == ["remote", 1]
        finally:
            await fake.stop()
        assert all(not c.HasField("trace_context") for c in fake.of_kind("call_step"))
        assert all(not c.HasField("trace_context") for c in fake.of_kind("start_child"))

        with trace.use_span(caller, end_on_exit=True):
            async with Client(address) as client:
                await client.start("checkout", workflow_id="wf-2")
        [md] = servicer.metadata
        assert "traceparent" not in md
    finally:
        monkeypatch.undo()
        _tracing.forget()
    assert of_workflow("wf-plain") == []


async def test_a_cancelled_run_ends_its_open_spans_unset_and_a_failed_call_is_an_error() -> None:
    async def waiting(m: worker_pb2.WorkerMessage) -> worker_pb2.Reply:
        kind = m.WhichOneof("kind")
        if kind == "recv":
            recv = worker_pb2.RecvResult(outcome=worker_pb2.RecvResult.OUTCOME_WAITING)
            return worker_pb2.Reply(recv_result=recv)
        if kind == "call_step":
            failure = types_pb2.Failure(kind="RuntimeError", message="printer on fire")
            result = worker_pb2.CallResult(outcome=DELIVERED, failure=failure)
            return worker_pb2.Reply(call_result=result)
        return await answer(m)

    fake = FakeServer(waiting)

    @fake.workflow("stuck")
    async def stuck(ctx: WorkflowContext) -> Any:
        try:
            await ctx.call_step("print")
        except StepFailed:
            pass
        return await ctx.recv("never")

    try:
        run = fake.dispatch("wf-stuck", "stuck")
        await fake.seen(lambda sent: any(m.HasField("recv") for m in sent))
        fake.session._handle(
            worker_pb2.ServerMessage(cancel=worker_pb2.Cancel(workflow_id="wf-stuck"))
        )
        await fake.ended(run)
        assert fake.of_kind("complete_workflow") == []
    finally:
        await fake.stop()
    spans = of_workflow("wf-stuck")
    call = named(spans, "call print")
    assert call.status.status_code == StatusCode.ERROR
    assert call.status.description == "printer on fire"
    for name in ("wait recv", "workflow stuck"):
        assert named(spans, name).status.status_code == StatusCode.UNSET
