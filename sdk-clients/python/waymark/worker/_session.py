"""One stream to the server: hello, credits, heartbeats (with what the worker holds),
dispatches and request/reply correlation. When it ends, every workflow it was running is
dropped here; the server hands them out again (to this worker when it reconnects, or to
another)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from .. import _rpc, _tracing
from .._connection import Connection
from .._payload import from_payload, to_payload
from .._proto import types_pb2, worker_pb2, worker_pb2_grpc
from .._time import now_ms, timestamp_ms
from ..errors import Disconnected, PayloadTooLarge, failure_kind, failure_message
from . import _resend
from ._conn import Conn
from ._core import log
from ._limits import ENVELOPE, Limits, bounded
from ._run import Run
from ._runner import WorkflowFn, run_workflow

SDK = "python/0.1.0"

# Most workflow ids a heartbeat lists (the server reads no more).
MAX_HELD = 100_000

StepFn = Callable[[Any], Any]


@dataclass
class Config:
    connection: Connection
    worker_id: str
    app_name: str
    app_version: str
    queues: list[str]
    max_concurrent_workflows: int
    max_concurrent_steps: int
    park_after: float | None
    # Seconds a request is resent while the server answers UNAVAILABLE.
    patience: float
    workflows: dict[str, WorkflowFn] = field(default_factory=dict)
    steps: dict[str, StepFn] = field(default_factory=dict)


class Session:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.conn = Conn()
        # The workflows this stream dispatched that the worker still holds: from the moment
        # their dispatch is taken off the stream until their task has ended.
        self.running: dict[str, Run] = {}
        # `DispatchWorkflow` messages taken off this stream (a new stream starts at zero).
        self.dispatches = 0
        # Remote step attempts in flight; dropped with the stream, like workflows: the server
        # times them out and dispatches them again.
        self.step_tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Serves until the stream ends; raises what ended it."""
        c = self.config
        channel = _rpc.channel(c.connection)
        stub = worker_pb2_grpc.WorkerServiceStub(channel)
        hello = worker_pb2.Hello(
            worker_id=c.worker_id,
            app_name=c.app_name,
            app_version=c.app_version,
            workflow_names=sorted(c.workflows),
            step_names=sorted(c.steps),
            queues=c.queues,
            sdk=SDK,
        )
        self.conn.send(worker_pb2.WorkerMessage(hello=hello))
        call = stub.Connect(self.conn.outgoing())
        heartbeat: asyncio.Task[None] | None = None
        try:
            first = await call.read()
            if not isinstance(first, worker_pb2.ServerMessage) or not first.HasField("welcome"):
                raise ConnectionError("the server did not welcome this worker")
            log.info(
                "connected to Waymark as %s (session %s)", c.worker_id, first.welcome.session_id
            )
            self.welcomed(first.welcome)
            interval = max(first.welcome.heartbeat_interval_ms, 100) / 1000
            heartbeat = asyncio.create_task(self._heartbeat(interval))
            while True:
                m = await call.read()
                if not isinstance(m, worker_pb2.ServerMessage):
                    raise ConnectionError("the server closed the worker stream")
                self._handle(m)
        except grpc.aio.AioRpcError as e:
            raise _rpc.convert(e) from None
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
            await self.close()
            call.cancel()
            await channel.close()

    def welcomed(self, w: worker_pb2.Welcome) -> None:
        """The server accepted the worker: from now on keep within the sizes it states, and
        grant it the credits for work."""
        c = self.config
        self.conn.limits = Limits.from_welcome(w)
        steps = c.max_concurrent_steps if c.steps else 0
        credit = worker_pb2.Credit(workflows=c.max_concurrent_workflows, steps=steps)
        self.conn.send(worker_pb2.WorkerMessage(credit=credit))

    async def close(self) -> None:
        """The stream is gone: every run on it is dropped (nothing more is sent for it; the
        server takes back what the stream held when the worker reconnects), and so are remote
        step attempts (the server times them out and dispatches them again)."""
        self.conn.close()
        for run in self.running.values():
            run.drop()
        tasks = [r.task for r in self.running.values() if r.task] + list(self.step_tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _heartbeat(self, interval: float) -> None:
        while True:
            self.conn.send(worker_pb2.WorkerMessage(heartbeat=self.heartbeat()))
            await asyncio.sleep(interval)

    def _handle(self, m: worker_pb2.ServerMessage) -> None:
        kind = m.WhichOneof("kind")
        if kind == "reply":
            self.conn.resolve(m.reply)
        elif kind == "dispatch_workflow":
            self._start(m.dispatch_workflow)
        elif kind == "cancel":
            run = self.running.get(m.cancel.workflow_id)
            if run is not None and run.task is not None:
                # asyncio cancellation is workflow cancellation: the function sees
                # CancelledError at its current await.
                run.cancelled = True
                run.wakeup.set()
                run.task.cancel("workflow cancelled")
        elif kind == "wakeup":
            w = m.wakeup
            run = self.running.get(w.workflow_id)
            if run is not None:
                if w.HasField("recv") and w.recv.outcome == worker_pb2.RecvResult.OUTCOME_DELIVERED:
                    run.delivered[w.step_id] = w.recv.message
                run.wakeup.set()
        elif kind == "dispatch_step":
            t = asyncio.create_task(self._run_step(m.dispatch_step))
            self.step_tasks.add(t)
            t.add_done_callback(self._step_done)
        elif kind == "drain":
            log.info("server is draining; will reconnect when it closes the stream")

    def _start(self, d: worker_pb2.DispatchWorkflow) -> None:
        # Counted and listed in one synchronous step: a heartbeat never counts a dispatch it
        # does not list.
        self.dispatches += 1
        old = self.running.pop(d.workflow_id, None)
        run = Run(d, self.conn, self.config.park_after, self.config.patience)
        fn = self.config.workflows.get(d.workflow_name)
        run.task = asyncio.create_task(run_workflow(run, fn, d.input), name=d.workflow_id)
        run.task.add_done_callback(lambda _: self._ended(run))
        self.running[d.workflow_id] = run
        if old is not None:
            # Dispatched again while its run is still here: the server took the workflow back
            # meanwhile (its lease looked expired, say while the database restarted) and gave
            # it to this worker again under a higher epoch. The old run is stale: it is let go
            # (it sends nothing more) and its credit comes back now — each dispatch spent one,
            # and without it every re-dispatch would shrink this worker's room for good.
            old.drop()
            if old.task is not None:
                old.task.cancel("dispatched again")
            self._release(old)

    def _ended(self, run: Run) -> None:
        """A run's task ended (finished, parked, cancelled or dropped): it leaves the worker's
        memory — and the heartbeat's list — and its credit is granted back. A run a newer
        dispatch of its workflow replaced is no longer in the list (the new run is: it stays)
        and gave its credit back when it was replaced."""
        if self.running.get(run.workflow_id) is run:
            del self.running[run.workflow_id]
        self._release(run)

    def _release(self, run: Run) -> None:
        """Grants back the credit the run's dispatch spent: once per run, when it ends or when a
        newer dispatch replaces it, whichever comes first."""
        if not run.credit_returned:
            run.credit_returned = True
            self.conn.send(worker_pb2.WorkerMessage(credit=worker_pb2.Credit(workflows=1)))

    def heartbeat(self) -> worker_pb2.Heartbeat:
        """What the worker holds: every workflow dispatched on this stream whose run has not
        ended, and how many dispatches it took off the stream. The server sends back to its
        queue a workflow it dispatched here (before that count) that the list leaves out.

        A list longer than the server reads, or too large for a message, is left out: the
        heartbeat still renews the worker's lease, and the server reconciles nothing this
        time (a heartbeat dropped for its size would lose every workflow the worker holds)."""
        beat = worker_pb2.Heartbeat(
            reports_held=True,
            held_workflow_ids=list(self.running),
            dispatches_received=self.dispatches,
        )
        room = self.conn.limits.max_message - ENVELOPE
        if len(self.running) > MAX_HELD or beat.ByteSize() > room:
            return worker_pb2.Heartbeat(reports_held=False, dispatches_received=self.dispatches)
        return beat

    def lose(self, workflow_id: str) -> bool:
        """For tests only: lets go of a run as if its task had died, telling the server
        nothing. The server notices from the next heartbeat and dispatches it again."""
        run = self.running.get(workflow_id)
        if run is None or run.task is None:
            return False
        run.drop()
        run.task.cancel("lost on purpose")
        return True

    def _step_done(self, t: asyncio.Task[None]) -> None:
        self.step_tasks.discard(t)
        self.conn.send(worker_pb2.WorkerMessage(credit=worker_pb2.Credit(steps=1)))

    async def _run_step(self, d: worker_pb2.DispatchStep) -> None:
        """Runs one attempt of a remote step in its `step` span, a child of the caller's `call`
        span (`DispatchStep.trace_context`), ended once the result is sent (see `_attempt`)."""
        span = _tracing.start(
            f"step {d.step_name}",
            "consumer",
            _tracing.remote_parent(d.trace_context),
            {
                "waymark.workflow.id": d.workflow_id,
                "waymark.step.id": d.step_id,
                "waymark.step.name": d.step_name,
                "waymark.step.attempt": d.attempt,
            },
        )
        error: str | None = None
        try:
            error = await self._attempt(d, span)
        finally:
            _tracing.end(span, error)

    async def _attempt(self, d: worker_pb2.DispatchStep, span: Any) -> str | None:
        """Runs one attempt of a remote step and reports its result; returns the failure's
        message when it failed. An attempt still running at its deadline is abandoned: the
        server has failed it already and refuses a late result."""
        result = worker_pb2.StepResult(
            workflow_id=d.workflow_id, step_id=d.step_id, attempt=d.attempt
        )
        fn = self.config.steps.get(d.step_name)
        left = (timestamp_ms(d.deadline) - now_ms()) / 1000 if d.HasField("deadline") else None
        try:
            if fn is None:
                raise LookupError(f"this worker has no step named {d.step_name!r}")
            async with asyncio.timeout(left) as limit:
                # The span is current in the function: what it traces nests in the step.
                with _tracing.current(span):
                    output = fn(from_payload(d.input))
                    if inspect.isawaitable(output):
                        output = await output
            payload = to_payload(output)
            # Over the limit, the result is sent as the attempt's failure: the server would
            # refuse the output, and leave the attempt to time out.
            self.conn.limits.check_payload(f"the output of step {d.step_name!r}", payload)
            result.output.CopyFrom(payload)
        except TimeoutError:
            if limit.expired():
                return "timed out"
            result.failure.CopyFrom(types_pb2.Failure(kind="TimeoutError", message="timed out"))
        except Exception as e:
            result.failure.CopyFrom(
                types_pb2.Failure(kind=failure_kind(e), message=bounded(failure_message(e)))
            )
        # Resent while the server is unavailable; past patience, if the stream breaks, or if
        # the result is too large to send (a failure's message can be), the attempt is
        # abandoned: the server fails it at its deadline and tries again.
        with contextlib.suppress(Disconnected, _resend.OutOfPatience, PayloadTooLarge):
            msg = worker_pb2.WorkerMessage(step_result=result)
            reply = await _resend.request(self.conn, msg, self.config.patience)
            if reply.HasField("error"):
                log.info(
                    "result of step %r for %s refused: %s (%s)",
                    d.step_name,
                    d.workflow_id,
                    reply.error.message,
                    reply.error.reason,
                )
        return result.failure.message if result.HasField("failure") else None
