"""Replaying recorded histories offline, against this worker's workflow code: no server, no
side effects. Every call the code makes is answered from the history; the first call it does
not record ends the replay where a live run would go on.

Use it in a test suite before deploying changed workflow code ("replay before deploy"): replay
the histories of workflows already running (`Client.history`) and check that none now fails
with `NonDeterminism`. The project's golden histories (`contract/histories/`) are in the same
format, and every SDK replays them to the same outcomes.

    replayer = Replayer(worker)
    result = await replayer.replay(json.loads(path.read_text()))
    assert not isinstance(result, Failed), result
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._payload import from_payload, to_payload
from ._proto import types_pb2, worker_pb2
from .errors import (
    ContinueAsNew,
    HistoryEnded,
    WorkflowInterrupted,
    failure_kind,
    failure_message,
)
from .worker import Worker, WorkflowContext
from .worker._conn import Conn
from .worker._run import Run
from .worker._runner import WorkflowFn, as_workflow_fn

__all__ = ["ContinuedAsNew", "Failed", "Replayed", "Replayer", "Returned", "Suspended"]


@dataclass(frozen=True, slots=True)
class Returned:
    """The code returned `value` (as JSON, as a live run would record it), every call it made
    answered by the history."""

    value: Any


@dataclass(frozen=True, slots=True)
class Failed:
    """The code failed, with the `kind` and `message` a live run would record: its own error
    (`WorkflowFailed`'s kind, else the exception's class name), a recorded failure it did not
    handle (`StepFailed`), or `NonDeterminism` when it called another step than the history
    records. `error` is the exception itself."""

    kind: str
    message: str
    error: BaseException = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Suspended:
    """The code made a call at `step_id`, which the history does not record: a live run would
    go on from there (ask the server, run a step, read the clock, sleep on)."""

    step_id: int


@dataclass(frozen=True, slots=True)
class ContinuedAsNew:
    """The code continued as new (`ctx.continue_as_new`) with `input` (as JSON, as a live run
    would send it): a live run would end here and the workflow go on with a fresh history."""

    input: Any


# How a replay ended.
Replayed = Returned | Failed | Suspended | ContinuedAsNew


class Replayer:
    """Replays histories against registered workflow functions: a `Worker`'s, or a mapping of
    workflow name to function (`async def f(ctx, input)` or `f(ctx)`, as `Worker.workflow`
    takes). Nothing connects."""

    def __init__(self, workflows: Worker | Mapping[str, Callable[..., Awaitable[Any]]]) -> None:
        fns = workflows._config.workflows if isinstance(workflows, Worker) else workflows
        self._workflows: dict[str, WorkflowFn] = {
            name: as_workflow_fn(fn) for name, fn in fns.items()
        }

    async def replay(self, history: Mapping[str, Any]) -> Replayed:
        """Replays `history` — `{"workflow_id", "workflow_name", "input", "steps": [{"step_id",
        "name", "output" | "failure": {"kind", "message"}}]}`, the `history` of a golden file or
        what `Client.history` returns — with the workflow it names. Raises `LookupError` only
        when no such workflow is registered; how the code fared is the result."""
        name = str(history["workflow_name"])
        fn = self._workflows.get(name)
        if fn is None:
            raise LookupError(f"no workflow named {name!r} is registered")
        run = _offline_run(history)
        # What a live run is given: the input as it comes off the wire.
        input = from_payload(to_payload(history.get("input")))
        try:
            result = await fn(WorkflowContext(run), input)
            output = to_payload(result)
            # A live run fails for an output the server would not take; so does its replay.
            run.limits.check_payload("the workflow's output", output)
            return Returned(from_payload(output))
        except HistoryEnded as e:
            return Suspended(e.step_id)
        except ContinueAsNew as e:
            try:
                # As a live run: an input it could not send fails the workflow instead.
                payload = to_payload(e.input)
                run.limits.check_payload("the next run's input", payload)
            except Exception as err:
                return Failed(failure_kind(err), failure_message(err), err)
            return ContinuedAsNew(from_payload(payload))
        # The other interruptions (parked, fenced, dropped) need a server, so cannot come
        # offline; one that did would be a bug to see, not an outcome to hide. A cancelled
        # replay has no outcome: `asyncio.CancelledError` propagates.
        except (Exception, WorkflowInterrupted) as e:
            return Failed(failure_kind(e), failure_message(e), e)


def _offline_run(history: Mapping[str, Any]) -> Run:
    """A run that replays `history` and goes no further (see `Run.offline`)."""
    d = worker_pb2.DispatchWorkflow(
        workflow_id=str(history.get("workflow_id", "replay")),
        workflow_name=str(history["workflow_name"]),
        epoch=1,
        steps=[_step(s) for s in history.get("steps") or []],
    )
    # Closed: were a request to get past the offline check, it would fail at once rather than
    # wait for an answer that never comes.
    conn = Conn()
    conn.close()
    run = Run(d, conn, park_after=None, patience=0.0)
    run.offline = True
    return run


def _step(s: Mapping[str, Any]) -> types_pb2.Step:
    """A recorded step as a dispatch carries it: a failure, or an output (a missing one is
    `null`, as the server records a wait that timed out)."""
    step = types_pb2.Step(step_id=int(s["step_id"]), name=str(s["name"]))
    failure = s.get("failure")
    if failure is not None:
        step.failure.kind = str(failure.get("kind", ""))
        step.failure.message = str(failure.get("message", ""))
    else:
        step.output.CopyFrom(to_payload(s.get("output")))
    return step
