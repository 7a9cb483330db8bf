"""Workflow updates, the workflow's side: take the next update a client sent
(`Client.update_workflow`) and answer it. An update arrives as a message on topic
`waymark.update/<name>`, and the answer is the workflow's event `waymark.update/<update id>`,
which the client's call waits for. Both are an ordinary receive and event, recorded as such, so
a replay takes the same update and does not answer it again — and the histories are the ones
every other SDK records."""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from .._time import Seconds
from ._waits import WaitsMixin
from ._writes import WritesMixin

# What every update topic and answer key begins with (the server's updates.rs says the same).
PREFIX = "waymark.update/"


@dataclass(frozen=True, slots=True)
class Update:
    """An update a client sent: its `id` (what the answer is for) and its `args` (JSON)."""

    id: str
    args: Any


class UpdatesMixin(WaitsMixin, WritesMixin):
    def recv_update(
        self, name: str, *, timeout: Seconds | None = None
    ) -> Coroutine[Any, Any, Update | None]:
        """Waits up to `timeout` (forever when None) for the next update named `name`; None
        when none came. Answer it with `answer_update` or `reject_update`: the client's call
        waits for that. Whatever runs between is ordinary workflow code (steps, waits, sends),
        recorded as always. It is a `recv` on topic `waymark.update/<name>`, recorded as one
        (and another for each message there that is not an update, passed over).
        `args` are the client's JSON as sent: check their shape before relying on it, and
        reject the update when they do not fit, so that a client cannot fail the workflow."""
        # Its positions are taken now, in call order, as every operation's are.
        return self._next_update(name, timeout, self.recv(PREFIX + name, timeout=timeout))

    def answer_update(self, update_id: str, result: Any) -> Coroutine[Any, Any, None]:
        """Answers update `update_id`: the client's call returns `result` (JSON). It is a
        `set_event` of `waymark.update/<update_id>` to `{"result": result}`, so a replay does
        not answer again."""
        return self.set_event(PREFIX + update_id, {"result": result})

    def reject_update(self, update_id: str, why: str) -> Coroutine[Any, Any, None]:
        """Refuses update `update_id`: the client's call raises `RpcError` with reason
        UPDATE_REJECTED and `why` in its message. A `set_event` like `answer_update`'s."""
        return self.set_event(PREFIX + update_id, {"rejected": why})

    async def _next_update(
        self, name: str, timeout: Seconds | None, received: Coroutine[Any, Any, Any]
    ) -> Update | None:
        while True:
            m = await received
            if m is None:
                return None
            if isinstance(m, dict) and isinstance(m.get("update_id"), str) and "args" in m:
                return Update(m["update_id"], m["args"])
            # The server sends nothing else on an update topic; from an older one, a message
            # sent there by hand has no update id to answer, and is passed over (as the Rust
            # SDK does, so the two record the same receives).
            received = self.recv(PREFIX + name, timeout=timeout)
