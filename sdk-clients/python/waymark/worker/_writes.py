"""What a workflow writes outside itself — messages, events, stream values. Each is recorded
as a step in the same transaction as the write, so a replay does not write twice."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from .._payload import to_payload
from .._proto import worker_pb2
from ._core import ContextCore
from ._replies import expect


class WritesMixin(ContextCore):
    def send(self, workflow_id: str, message: Any, *, topic: str = "") -> Coroutine[Any, Any, str]:
        """Sends `message` to workflow `workflow_id` on `topic`; returns the message id."""
        return self._send(self._take(), workflow_id, message, topic)

    async def _send(self, step_id: int, destination: str, message: Any, topic: str) -> str:
        message_id = self._history().sent(step_id)
        if message_id is not None:
            return message_id
        self._check_cancelled()
        r = self._run
        req = worker_pb2.SendMessageStep(
            workflow_id=r.workflow_id,
            epoch=r.epoch,
            step_id=step_id,
            destination_id=destination,
            topic=topic,
            message=self._payload(f"the message to workflow {destination!r}", message),
        )
        sent = expect(
            await self._request(worker_pb2.WorkerMessage(send_message=req)), "message_sent"
        )
        return str(sent.message_id)

    def set_event(self, key: str, value: Any) -> Coroutine[Any, Any, None]:
        """Sets this workflow's event `key`: its value, its history and the step are written
        in one transaction; clients and workflows waiting on it are woken."""
        return self._set_event(self._take(), key, value)

    async def _set_event(self, step_id: int, key: str, value: Any) -> None:
        if self._history().event_set(step_id):
            return
        self._check_cancelled()
        r = self._run
        req = worker_pb2.SetEvent(
            workflow_id=r.workflow_id,
            epoch=r.epoch,
            step_id=step_id,
            key=key,
            value=self._payload(f"the value of event {key!r}", value),
        )
        expect(await self._request(worker_pb2.WorkerMessage(set_event=req)), "step_recorded")

    def write_stream(self, key: str, value: Any) -> Coroutine[Any, Any, int]:
        """Appends `value` to this workflow's stream `key`; returns its offset. Readers
        following the stream get it at once."""
        return self._stream_step(self._take(), key, to_payload(value))

    def close_stream(self, key: str) -> Coroutine[Any, Any, None]:
        """Closes stream `key`: readers end after the values written before it."""
        return self._close_stream(self._take(), key)

    async def _close_stream(self, step_id: int, key: str) -> None:
        await self._stream_step(step_id, key, None)

    async def _stream_step(self, step_id: int, key: str, value: Any) -> int:
        """Writes `value` to stream `key`, or closes the stream when `value` is None."""
        offset = self._history().stream_offset(step_id, close=value is None)
        if offset is not None:
            return offset
        self._check_cancelled()
        if value is not None:
            self._run.limits.check_payload(f"the value written to stream {key!r}", value)
        r = self._run
        req = worker_pb2.WriteStream(
            workflow_id=r.workflow_id,
            epoch=r.epoch,
            step_id=step_id,
            key=key,
            close=value is None,
        )
        if value is not None:
            req.value.CopyFrom(value)
        written = expect(
            await self._request(worker_pb2.WorkerMessage(write_stream=req)), "stream_written"
        )
        return int(written.offset)
