"""Schedules from a client (`waymark.v1.ScheduleService`): cron expressions in a time zone
that start a workflow at each time they name."""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import grpc
from google.protobuf import field_mask_pb2

from ._pages import read_all
from ._payload import from_payload, to_payload
from ._proto import schedule_pb2, schedule_pb2_grpc
from ._rpc import call
from ._time import from_timestamp, to_timestamp
from .types import Workflow


@dataclass(frozen=True, slots=True)
class Schedule:
    name: str
    cron: str
    timezone: str
    workflow_name: str
    input: Any
    queue_name: str
    paused: bool
    last_fire_time: datetime | None
    # When it fires next; None while paused.
    next_fire_time: datetime | None
    created_at: datetime | None
    updated_at: datetime | None

    @classmethod
    def from_proto(cls, s: schedule_pb2.Schedule) -> Schedule:
        return cls(
            name=s.name,
            cron=s.cron,
            timezone=s.timezone,
            workflow_name=s.workflow_name,
            input=from_payload(s.input),
            queue_name=s.queue_name,
            paused=s.paused,
            last_fire_time=from_timestamp(s.last_fire_time, s.HasField("last_fire_time")),
            next_fire_time=from_timestamp(s.next_fire_time, s.HasField("next_fire_time")),
            created_at=from_timestamp(s.created_at, s.HasField("created_at")),
            updated_at=from_timestamp(s.updated_at, s.HasField("updated_at")),
        )


@dataclass(frozen=True, slots=True)
class ScheduleRun:
    """One workflow a backfill started (or found started) for one fire time."""

    fire_time: datetime | None
    workflow_id: str
    created: bool


class Schedules:
    def __init__(self, channel: grpc.aio.Channel, retry_for: float = 0.0) -> None:
        # Reads are retried this long while the server is unavailable; writes are not.
        self._retry_for = retry_for
        self._rpc = schedule_pb2_grpc.ScheduleServiceStub(channel)

    async def create(
        self,
        name: str,
        *,
        cron: str,
        workflow_name: str,
        input: Any = None,
        timezone: str = "",
        queue: str = "",
        paused: bool = False,
    ) -> Schedule:
        """Creates a schedule: `cron` has 5 fields, or 6 with seconds first; `timezone` is an
        IANA name (UTC when empty)."""
        s = schedule_pb2.Schedule(
            name=name,
            cron=cron,
            timezone=timezone,
            workflow_name=workflow_name,
            input=to_payload(input),
            queue_name=queue,
            paused=paused,
        )
        r = await call(self._rpc.CreateSchedule, schedule_pb2.CreateScheduleRequest(schedule=s))
        return Schedule.from_proto(r.schedule)

    async def update(
        self,
        name: str,
        *,
        cron: str | None = None,
        timezone: str | None = None,
        workflow_name: str | None = None,
        input: Any = ...,
        queue: str | None = None,
    ) -> Schedule:
        """Replaces the fields given; the others stay as they are."""
        s = schedule_pb2.Schedule(name=name)
        paths = []
        for path, value in (
            ("cron", cron),
            ("timezone", timezone),
            ("workflow_name", workflow_name),
            ("queue_name", queue),
        ):
            if value is not None:
                setattr(s, path, value)
                paths.append(path)
        if input is not ...:
            s.input.CopyFrom(to_payload(input))
            paths.append("input")
        req = schedule_pb2.UpdateScheduleRequest(
            schedule=s, update_mask=field_mask_pb2.FieldMask(paths=paths)
        )
        r = await call(self._rpc.UpdateSchedule, req)
        return Schedule.from_proto(r.schedule)

    async def get(self, name: str) -> Schedule:
        req = schedule_pb2.GetScheduleRequest(name=name)
        r = await call(self._rpc.GetSchedule, req, retry_for=self._retry_for)
        return Schedule.from_proto(r.schedule)

    async def list(self) -> builtins.list[Schedule]:
        """Every schedule, by name (read a page at a time)."""
        req = schedule_pb2.ListSchedulesRequest()
        return await read_all(
            self._rpc.ListSchedules,
            req,
            lambda r: map(Schedule.from_proto, r.schedules),
            retry_for=self._retry_for,
        )

    async def delete(self, name: str) -> None:
        await call(self._rpc.DeleteSchedule, schedule_pb2.DeleteScheduleRequest(name=name))

    async def pause(self, name: str) -> Schedule:
        r = await call(self._rpc.PauseSchedule, schedule_pb2.PauseScheduleRequest(name=name))
        return Schedule.from_proto(r.schedule)

    async def resume(self, name: str) -> Schedule:
        r = await call(self._rpc.ResumeSchedule, schedule_pb2.ResumeScheduleRequest(name=name))
        return Schedule.from_proto(r.schedule)

    async def trigger(self, name: str, *, request_id: str = "") -> tuple[Workflow, bool]:
        """Starts the schedule's workflow now; the same `request_id` starts it once. Returns
        the workflow and whether this call created it. Retried while the server is unavailable
        only with a `request_id` (without one, a retry could start a second workflow)."""
        req = schedule_pb2.TriggerScheduleRequest(name=name, request_id=request_id)
        retry_for = self._retry_for if request_id else 0.0
        r = await call(self._rpc.TriggerSchedule, req, retry_for=retry_for)
        return Workflow.from_proto(r.workflow), r.created

    async def backfill(
        self, name: str, start: datetime, end: datetime
    ) -> builtins.list[ScheduleRun]:
        """Starts the workflows of every fire time from `start` through `end` (both included;
        `end` not in the future; at most 1000 fire times)."""
        req = schedule_pb2.BackfillScheduleRequest(
            name=name, start_time=to_timestamp(start), end_time=to_timestamp(end)
        )
        r = await call(self._rpc.BackfillSchedule, req)
        return [
            ScheduleRun(
                from_timestamp(x.fire_time, x.HasField("fire_time")), x.workflow_id, x.created
            )
            for x in r.runs
        ]
