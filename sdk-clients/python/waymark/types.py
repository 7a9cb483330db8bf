"""What the client returns: workflows, steps, messages and events as plain dataclasses with
JSON values and aware UTC datetimes."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._payload import from_payload
from ._proto import types_pb2
from ._time import from_timestamp


class WorkflowStatus(enum.Enum):
    UNSPECIFIED = 0
    ENQUEUED = 1
    DELAYED = 2
    PENDING = 3
    SUCCESS = 4
    ERROR = 5
    CANCELLED = 6
    MAX_RECOVERY_ATTEMPTS_EXCEEDED = 7
    # An ended run of a workflow that continued as new (`<id>/run-<n>`).
    CONTINUED_AS_NEW = 8

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = {
    WorkflowStatus.SUCCESS,
    WorkflowStatus.ERROR,
    WorkflowStatus.CANCELLED,
    WorkflowStatus.MAX_RECOVERY_ATTEMPTS_EXCEEDED,
    WorkflowStatus.CONTINUED_AS_NEW,
}


def status(n: int) -> WorkflowStatus:
    try:
        return WorkflowStatus(n)
    except ValueError:
        return WorkflowStatus.UNSPECIFIED


@dataclass(frozen=True, slots=True)
class Failure:
    kind: str
    message: str


def _failure(msg: Any, present: bool) -> Failure | None:
    return Failure(msg.kind, msg.message) if present else None


@dataclass(frozen=True, slots=True)
class Workflow:
    """A workflow as the server reports it."""

    workflow_id: str
    workflow_name: str
    status: WorkflowStatus
    queue_name: str
    app_version: str
    input: Any
    output: Any
    failure: Failure | None
    created_at: datetime | None
    updated_at: datetime | None
    recovery_attempts: int
    epoch: int
    worker_id: str
    parent_workflow_id: str
    deadline: datetime | None
    priority: int
    partition_key: str
    dedup_id: str
    started_at: datetime | None
    wake_at: datetime | None
    # Lineage (`client.fork`): the workflow this one was forked from, and the step position it
    # ran on from (the source's steps before it were copied). "" and 0 when not a fork.
    forked_from_workflow_id: str = ""
    forked_from_step: int = 0
    # Its tags: given at its start or inherited from its parent; empty when none.
    tags: dict[str, str] = field(default_factory=dict)
    # How many runs it continued as new from (0: its first run); on an ended run (status
    # CONTINUED_AS_NEW), that run's number.
    run: int = 0
    # On an ended run (CONTINUED_AS_NEW): the workflow that went on. "" otherwise.
    continued_as_workflow_id: str = ""

    @classmethod
    def from_proto(cls, w: types_pb2.Workflow) -> Workflow:
        return cls(
            workflow_id=w.workflow_id,
            workflow_name=w.workflow_name,
            status=status(w.status),
            queue_name=w.queue_name,
            app_version=w.app_version,
            input=from_payload(w.input),
            output=from_payload(w.output) if w.HasField("output") else None,
            failure=_failure(w.failure, w.HasField("failure")),
            created_at=from_timestamp(w.created_at, w.HasField("created_at")),
            updated_at=from_timestamp(w.updated_at, w.HasField("updated_at")),
            recovery_attempts=w.recovery_attempts,
            epoch=w.epoch,
            worker_id=w.worker_id,
            parent_workflow_id=w.parent_workflow_id,
            deadline=from_timestamp(w.deadline, w.HasField("deadline")),
            priority=w.priority,
            partition_key=w.partition_key,
            dedup_id=w.dedup_id,
            started_at=from_timestamp(w.started_at, w.HasField("started_at")),
            wake_at=from_timestamp(w.wake_at, w.HasField("wake_at")),
            forked_from_workflow_id=w.forked_from_workflow_id,
            forked_from_step=w.forked_from_step,
            tags=dict(w.tags),
            run=w.run,
            continued_as_workflow_id=w.continued_as_workflow_id,
        )


@dataclass(frozen=True, slots=True)
class Step:
    """A checkpointed step of a workflow."""

    step_id: int
    name: str
    output: Any
    failure: Failure | None
    attempts: int
    epoch: int
    recorded_at: datetime | None
    # When the step began, when the server knows: steps a worker ran and said how long they
    # took (retries included), and remote steps (their call).
    started_at: datetime | None = None

    @classmethod
    def from_proto(cls, s: types_pb2.Step) -> Step:
        return cls(
            step_id=s.step_id,
            name=s.name,
            output=from_payload(s.output) if s.HasField("output") else None,
            failure=_failure(s.failure, s.HasField("failure")),
            attempts=s.attempts,
            epoch=s.epoch,
            recorded_at=from_timestamp(s.recorded_at, s.HasField("recorded_at")),
            started_at=from_timestamp(s.started_at, s.HasField("started_at")),
        )


@dataclass(frozen=True, slots=True)
class Message:
    """A message sent to a workflow, consumed or not."""

    message_id: str
    workflow_id: str
    topic: str
    payload: Any
    idempotency_key: str
    sent_at: datetime | None
    consumed: bool
    consumed_at: datetime | None
    consumed_by_step: int

    @classmethod
    def from_proto(cls, m: types_pb2.Message) -> Message:
        return cls(
            message_id=m.message_id,
            workflow_id=m.workflow_id,
            topic=m.topic,
            payload=from_payload(m.payload),
            idempotency_key=m.idempotency_key,
            sent_at=from_timestamp(m.sent_at, m.HasField("sent_at")),
            consumed=m.consumed,
            consumed_at=from_timestamp(m.consumed_at, m.HasField("consumed_at")),
            consumed_by_step=m.consumed_by_step,
        )


@dataclass(frozen=True, slots=True)
class EventValue:
    value: Any
    step_id: int
    set_at: datetime | None


@dataclass(frozen=True, slots=True)
class Event:
    """A workflow's event: its current value and every value it was set to."""

    key: str
    value: Any
    updated_at: datetime | None
    history: list[EventValue] = field(default_factory=list)

    @classmethod
    def from_proto(cls, e: types_pb2.Event) -> Event:
        return cls(
            key=e.key,
            value=from_payload(e.value),
            updated_at=from_timestamp(e.updated_at, e.HasField("updated_at")),
            history=[
                EventValue(
                    from_payload(h.value), h.step_id, from_timestamp(h.set_at, h.HasField("set_at"))
                )
                for h in e.history
            ],
        )


@dataclass(frozen=True, slots=True)
class StreamEntry:
    """One value of a workflow's stream, at its offset."""

    offset: int
    value: Any
