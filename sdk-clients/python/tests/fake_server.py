"""A stand-in for the server at the far end of a worker's stream, for tests that need none: it
takes what a real `Session` sends and answers each request as the test says. The session is
driven from here (dispatches go in through its message handler), so what is tested is the
SDK's own code from a dispatch to its completion."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from waymark import Worker
from waymark._payload import to_payload
from waymark._proto import types_pb2, worker_pb2
from waymark.worker._run import Run
from waymark.worker._session import Session

Answer = Callable[[worker_pb2.WorkerMessage], Awaitable[worker_pb2.Reply]]


def unavailable() -> worker_pb2.Reply:
    """What the server answers while its database is down."""
    return worker_pb2.Reply(
        error=worker_pb2.ReplyError(
            code=14, reason="STORE_UNAVAILABLE", message="the database is unavailable"
        )
    )


async def accept(m: worker_pb2.WorkerMessage) -> worker_pb2.Reply:
    """The answer of a healthy server to the requests these tests make."""
    kind = m.WhichOneof("kind")
    if kind in ("record_step", "set_event", "step_result"):
        return worker_pb2.Reply(step_recorded=worker_pb2.StepRecorded())
    if kind == "complete_workflow":
        ok = m.complete_workflow.HasField("output")
        status = types_pb2.WORKFLOW_STATUS_SUCCESS if ok else types_pb2.WORKFLOW_STATUS_ERROR
        if m.complete_workflow.HasField("continue_as_new"):
            status = types_pb2.WORKFLOW_STATUS_CONTINUED_AS_NEW
        return worker_pb2.Reply(workflow_completed=worker_pb2.WorkflowCompleted(status=status))
    raise AssertionError(f"the fake server does not answer {kind}")


class FakeServer:
    def __init__(
        self,
        answer: Answer = accept,
        *,
        patience: float = 60.0,
        welcome: worker_pb2.Welcome | None = None,
    ) -> None:
        # A real worker's registrations and settings; the session is driven from here instead
        # of by `worker.run()`.
        self.worker = Worker(
            worker_id="fake-worker",
            app_version="1",
            park_after=None,
            retry_unavailable_for=patience,
        )
        self.workflow = self.worker.workflow
        self.config = self.worker._config
        self.session = Session(self.config)
        # As the real server's: the session keeps to the sizes it states.
        self.session.welcomed(welcome or worker_pb2.Welcome())
        self.answer = answer
        # Every message the session sent, in order, batches unpacked (copies: a resent request
        # is the same object with a new request id).
        self.sent: list[worker_pb2.WorkerMessage] = []
        # What went on the stream, as written: a message, or a batch of them.
        self.frames: list[worker_pb2.WorkerMessage] = []
        self._news = asyncio.Event()
        self._answering: set[asyncio.Task[None]] = set()
        self._pump = asyncio.create_task(self._take())

    def dispatch(
        self,
        workflow_id: str,
        name: str,
        input: Any = None,
        *,
        steps: Iterable[types_pb2.Step] = (),
        epoch: int = 1,
        recovery_attempts: int = 0,
        traceparent: str = "",
    ) -> Run:
        """Dispatches a workflow to the session; `steps` are its recorded history, `traceparent`
        the trace it goes on (`DispatchWorkflow.trace_context`)."""
        d = worker_pb2.DispatchWorkflow(
            workflow_id=workflow_id,
            workflow_name=name,
            epoch=epoch,
            input=to_payload(input),
            steps=steps,
            recovery_attempts=recovery_attempts,
            trace_context=types_pb2.TraceContext(traceparent=traceparent),
        )
        self.session._handle(worker_pb2.ServerMessage(dispatch_workflow=d))
        return self.session.running[workflow_id]

    def of_kind(self, kind: str) -> list[Any]:
        """The messages of one kind sent so far (their inner message)."""
        return [getattr(m, kind) for m in self.sent if m.WhichOneof("kind") == kind]

    async def seen(
        self, predicate: Callable[[list[worker_pb2.WorkerMessage]], bool], timeout: float = 10.0
    ) -> None:
        """Returns once `predicate(sent)` holds; fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not predicate(self.sent):
            self._news.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the session never sent what was expected: {self.sent}")
            try:
                await asyncio.wait_for(self._news.wait(), left)
            except TimeoutError:
                pass

    async def ended(self, run: Run, timeout: float = 10.0) -> None:
        """Returns once the run's task has ended (and the session has let go of it)."""
        assert run.task is not None
        done, _ = await asyncio.wait([run.task], timeout=timeout)
        assert done, f"workflow {run.workflow_id} did not end within {timeout} s"
        # The session's bookkeeping runs in the task's done callback, one loop turn later.
        for _ in range(10):
            if run.workflow_id not in self.session.running:
                break
            await asyncio.sleep(0)

    async def stop(self) -> None:
        await self.session.close()
        await self._pump
        for t in self._answering:
            t.cancel()

    async def _take(self) -> None:
        # Read as the gRPC call reads them, so batching and its size limit are the real ones.
        async for frame in self.session.conn.outgoing():
            copy = worker_pb2.WorkerMessage()
            copy.CopyFrom(frame)
            self.frames.append(copy)
            inner = list(copy.batch.messages) if copy.HasField("batch") else [copy]
            for m in inner:
                self.sent.append(m)
                if m.request_id:
                    t = asyncio.create_task(self._reply(m))
                    self._answering.add(t)
                    t.add_done_callback(self._answering.discard)
            self._news.set()

    async def _reply(self, m: worker_pb2.WorkerMessage) -> None:
        reply = await self.answer(m)
        reply.request_id = m.request_id
        self.session.conn.resolve(reply)
