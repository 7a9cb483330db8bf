"""A run's recorded history, read as a cursor: every durable operation takes its position here
and asks what is recorded there. Replay is deterministic only if all of them count positions
and compare names the same way, so this is the one place that does — and the one place that
knows the names and JSON shapes of the built-in steps (see proto/waymark/v1/worker.proto), which
every SDK records alike so that a workflow begun in one language replays in another."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from .._payload import from_payload
from .._proto import types_pb2, worker_pb2
from ..errors import NonDeterminismError, StepFailed
from ..types import status as wire_status

# Step names of the built-in operations. The server writes some of them itself, so they are
# part of the wire contract: never change one.
SLEEP_STEP = "waymark.sleep"
RECV_DEADLINE_STEP = "waymark.recv.deadline"
RECV_STEP = "waymark.recv"
SEND_STEP = "waymark.send"
SET_EVENT_STEP = "waymark.set_event"
GET_EVENT_DEADLINE_STEP = "waymark.get_event.deadline"
GET_EVENT_STEP = "waymark.get_event"
WRITE_STREAM_STEP = "waymark.write_stream"
CLOSE_STREAM_STEP = "waymark.close_stream"
START_CHILD_STEP = "waymark.start_child"
AWAIT_CHILD_STEP = "waymark.await_child"
SELECT_STEP = "waymark.select"
WAIT_ALL_STEP = "waymark.wait_all"
# Recorded by the worker alone: values a workflow must not compute itself, because a replay
# would compute different ones.
NOW_STEP = "waymark.now"
UUID_STEP = "waymark.uuid"
# The marker a run of new code leaves where it asked whether a code change applies (`patched`).
PATCH_STEP = "waymark.patch"


@dataclass(frozen=True, slots=True)
class Replayed:
    """A recorded output, decoded from its JSON (None for a recorded `null`)."""

    output: Any


@dataclass(frozen=True, slots=True)
class ReplayedFailure:
    """A recorded failure: a replay raises it again as the first run did."""

    kind: str
    message: str

    def error(self, name: str) -> StepFailed:
        return StepFailed(name, self.message, self.kind)


@dataclass(frozen=True, slots=True)
class Wait:
    """A durable wait over two positions: its deadline, recorded by the SDK first so a recovered
    workflow keeps its original timeout, then its outcome, which the server records as
    `{field: V}`, or `null` when it timed out."""

    deadline_step: str
    result_step: str
    field: str


RECV = Wait(RECV_DEADLINE_STEP, RECV_STEP, "message")
GET_EVENT = Wait(GET_EVENT_DEADLINE_STEP, GET_EVENT_STEP, "value")


def sleep_output(wake_at_ms: int) -> dict[str, Any]:
    """What a sleep records: its wake time, so a recovered workflow sleeps only what is left."""
    return {"wake_at_ms": wake_at_ms}


def deadline_output(deadline_ms: int) -> dict[str, Any]:
    """What the first position of a `Wait` records."""
    return {"deadline_ms": deadline_ms}


def now_output(now_ms: int) -> dict[str, Any]:
    """What a read of the clock records: the time read, in ms since the epoch."""
    return {"now_ms": now_ms}


def uuid_output(u: UUID) -> dict[str, Any]:
    """What a drawn UUID records: its text, lowercase and hyphenated (what `str` gives)."""
    return {"uuid": str(u)}


def patch_output(patch_id: str) -> dict[str, Any]:
    """What the marker of a code change records: the change's id."""
    return {"patch_id": patch_id}


@dataclass(frozen=True, slots=True)
class Patched:
    """What `History.patched` found. `applies`: the run takes the change's new branch. When it
    does, `step_id` is the position it took, and `record` says the run is live there (the
    caller records the marker at `step_id`) rather than replaying the marker recorded there.
    When it does not, no position was taken."""

    applies: bool
    step_id: int | None = None
    record: bool = False


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """How an awaited workflow ended, as an await_child step records it. The live answer is
    read into the same type, so a replay and the first run raise and return alike."""

    status: str
    output: Any = None
    failure_kind: str = ""
    failure_message: str = ""

    @staticmethod
    def from_json(v: Any) -> ChildOutcome:
        """Decodes `{"status": "SUCCESS", "output": V}` or `{"status": S, "failure": {...}}`."""
        v = v or {}
        f = v.get("failure") or {}
        return ChildOutcome(
            status=v.get("status", ""),
            output=v.get("output"),
            failure_kind=f.get("kind", ""),
            failure_message=f.get("message", ""),
        )

    @staticmethod
    def from_result(r: worker_pb2.ChildResult) -> ChildOutcome:
        return ChildOutcome(
            status=wire_status(r.status).name,
            output=from_payload(r.output) if r.HasField("output") else None,
            failure_kind=r.failure.kind if r.HasField("failure") else "",
            failure_message=r.failure.message if r.HasField("failure") else "",
        )


class History:
    """The steps recorded by earlier runs of one workflow, and the position the next durable
    operation takes. Lookups never change what is recorded: the live path records through the
    server, and a later dispatch brings it back here."""

    def __init__(self, workflow_id: str, steps: Iterable[types_pb2.Step]) -> None:
        self._workflow_id = workflow_id
        self._steps: dict[int, types_pb2.Step] = {s.step_id: s for s in steps}
        self._next = 0

    @property
    def next_position(self) -> int:
        return self._next

    @property
    def replaying(self) -> bool:
        """True while the next position is answered from the history."""
        return self._next in self._steps

    # Operations call this when they are called, not when they are awaited, so operations
    # started together (asyncio.gather) still number in call order.
    def take(self, n: int = 1) -> int:
        """Allocates `n` consecutive positions and returns the first."""
        step_id = self._next
        self._next += n
        return step_id

    def patched(self, patch_id: str) -> Patched:
        """Whether the run takes the branch of the code change `patch_id` (see worker.proto's
        `patched`). Looks at the next position without taking it: nothing recorded there — the
        run is live; takes it (`record`: the caller records the marker there); this patch's
        marker — takes it; anything else (a run begun by code without the change, or another
        patch's marker) — the old branch, and the position is left to the next call.

        Looking and taking are one step with no `await` in between, so no other operation of
        the workflow (all run on one event loop) can take the position meanwhile. A
        `waymark.patch` record that is not `{"patch_id": "…"}` raises `ValueError`: the history
        is not what any SDK writes."""
        at = self._next
        rec = self._steps.get(at)
        if rec is None:
            self._next += 1
            return Patched(True, at, record=True)
        if rec.name != PATCH_STEP:
            return Patched(False)
        failed = rec.HasField("failure")
        recorded = None if failed else from_payload(rec.output)
        marker = recorded.get("patch_id") if isinstance(recorded, dict) else None
        if not isinstance(marker, str):
            what = f"a failure ({rec.failure.kind})" if failed else repr(recorded)
            raise ValueError(
                f"workflow {self._workflow_id!r} records {PATCH_STEP!r} at position {at} "
                f'as {what}, not {{"patch_id": "…"}}'
            )
        if marker != patch_id:
            return Patched(False)
        self._next += 1
        return Patched(True, at)

    def recorded(self, step_id: int, name: str) -> bool:
        """Whether step `name` is recorded at `step_id` (as an output or a failure), without
        decoding what it recorded. `NonDeterminismError` as `at`."""
        return self._step(step_id, name) is not None

    def at(self, step_id: int, name: str) -> Replayed | ReplayedFailure | None:
        """What is recorded at `step_id` for step `name`; None when nothing is (the operation
        runs live). `NonDeterminismError` when another step is recorded there: the workflow
        no longer calls what it called when the history was written."""
        rec = self._step(step_id, name)
        if rec is None:
            return None
        if rec.HasField("failure"):
            return ReplayedFailure(rec.failure.kind, rec.failure.message)
        return Replayed(from_payload(rec.output))

    def replay(self, step_id: int, name: str) -> Replayed | None:
        """Like `at`, with a recorded failure raised (`StepFailed`) as the first run raised it."""
        rec = self.at(step_id, name)
        if isinstance(rec, ReplayedFailure):
            raise rec.error(name)
        return rec

    def _step(self, step_id: int, name: str) -> types_pb2.Step | None:
        rec = self._steps.get(step_id)
        if rec is not None and rec.name != name:
            raise NonDeterminismError(
                f"workflow {self._workflow_id!r} called step {name!r} at position {step_id}, "
                f"where its history records {rec.name!r}"
            )
        return rec

    # The built-in steps, decoded. Each returns None when the position is not recorded.

    def sleep(self, step_id: int) -> int | None:
        """The recorded wake time of a sleep, in ms since the epoch."""
        rec = self.replay(step_id, SLEEP_STEP)
        return None if rec is None else int(rec.output.get("wake_at_ms", 0))

    def deadline(self, step_id: int, wait: Wait) -> int | None:
        """The recorded deadline of `wait`, in ms since the epoch."""
        rec = self.replay(step_id, wait.deadline_step)
        return None if rec is None else int(rec.output.get("deadline_ms", 0))

    def wait_result(self, step_id: int, wait: Wait) -> Replayed | None:
        """The recorded outcome of `wait`: what came, or `Replayed(None)` when it timed out."""
        rec = self.replay(step_id, wait.result_step)
        if rec is None or rec.output is None:
            return rec
        return Replayed(rec.output.get(wait.field))

    def sent(self, step_id: int) -> str | None:
        """The id of the message a send step sent."""
        rec = self.replay(step_id, SEND_STEP)
        return None if rec is None else str(rec.output.get("message_id", ""))

    def event_set(self, step_id: int) -> bool:
        """Whether a set_event step is recorded (what it records, the key, is not needed)."""
        return self.replay(step_id, SET_EVENT_STEP) is not None

    def stream_offset(self, step_id: int, close: bool) -> int | None:
        """The offset a write_stream (or close_stream, when `close`) step recorded."""
        rec = self.replay(step_id, CLOSE_STREAM_STEP if close else WRITE_STREAM_STEP)
        return None if rec is None else int(rec.output.get("offset", 0))

    def child_started(self, step_id: int) -> str | None:
        """The id of the workflow a start_child step started."""
        rec = self.replay(step_id, START_CHILD_STEP)
        return None if rec is None else str(rec.output.get("workflow_id", ""))

    def child_outcome(self, step_id: int) -> ChildOutcome | None:
        """How the workflow an await_child step waited for ended."""
        rec = self.replay(step_id, AWAIT_CHILD_STEP)
        return None if rec is None else ChildOutcome.from_json(rec.output)

    def selected(self, step_id: int, all: bool) -> int | None:
        """The index a select (or wait_all, when `all`) step recorded."""
        rec = self.replay(step_id, WAIT_ALL_STEP if all else SELECT_STEP)
        return None if rec is None else int((rec.output or {}).get("index", 0))

    def now_read(self, step_id: int) -> int | None:
        """The time a read of the clock recorded, in ms since the epoch."""
        rec = self.replay(step_id, NOW_STEP)
        return None if rec is None else int(rec.output.get("now_ms", 0))

    def uuid_drawn(self, step_id: int) -> UUID | None:
        """The UUID a draw recorded. A recorded text that is not a UUID raises `ValueError`:
        the history is not what any SDK writes, and no value would replay it faithfully."""
        rec = self.replay(step_id, UUID_STEP)
        return None if rec is None else UUID(str(rec.output.get("uuid", "")))
