"""Held-back step records, made durable in call order.

A step's record is held back until the workflow's next step, request or completion: nothing
outside can depend on the step before then, so several records travel together and the last
ones ride on the completion. The rule that makes this safe: a step's function, or a request,
starts only once every record taken before it in call order is acknowledged — including the
records another branch of the workflow (asyncio.gather) is sending at that moment. Otherwise,
in `a = await step(A); await gather(step(C), step(D))`, D could act on A's result while A's
record is still in flight, and a crash then would forget A while D's effect stays.

Each flush therefore waits for the one before it, and every operation waits for the latest
flush, whether it started that flush or found it under way."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from .._proto import worker_pb2

Ask = Callable[[worker_pb2.WorkerMessage], Awaitable[worker_pb2.Reply]]
Check = Callable[[worker_pb2.Reply], None]


class Records:
    def __init__(self, ask: Ask, check: Check) -> None:
        # Sends one request for the run (resending UNAVAILABLE, dropping the run past patience).
        self._ask = ask
        # Raises the refusal of a record, if it was refused.
        self._check = check
        self._held: list[worker_pb2.RecordStep] = []
        # The latest flush; it finishes only after every flush started before it. Kept once it
        # failed, so every later operation fails too: what it sent may not be durable.
        self._latest: asyncio.Task[None] | None = None

    def hold(self, record: worker_pb2.RecordStep) -> None:
        self._held.append(record)

    async def durable(self) -> None:
        """Returns once every record taken so far is acknowledged: those held here (sent now,
        all at once) and those earlier flushes are still sending."""
        latest = self._latest
        if latest is not None and latest.done():
            if not _succeeded(latest):
                await latest  # raises what it failed with; nothing more is sent
            latest = self._latest = None
        if self._held:
            held, self._held = self._held, []
            latest = self._latest = asyncio.ensure_future(self._flush(latest, held))
            latest.add_done_callback(_observe)
        if latest is not None:
            # Shielded: a branch cancelled while it waits must not cancel a flush that other
            # branches wait for too.
            await asyncio.shield(latest)

    async def settle(self) -> list[worker_pb2.RecordStep]:
        """For the end of a run: waits for the flushes under way, then hands over the records
        still held (the completion carries them, or they are sent on their own). How a flush
        ended does not matter here: the workflow's function saw a refusal, the server refuses
        the completion after it as well, and a flush that dropped the run marked it dropped."""
        if self._latest is not None and not self._latest.done():
            await asyncio.wait([self._latest])
        held, self._held = self._held, []
        return held

    async def _flush(
        self, before: asyncio.Task[None] | None, held: list[worker_pb2.RecordStep]
    ) -> None:
        # Sent at once, without waiting for the flush before: records depend on nothing, only
        # the functions and requests that come after them do.
        msgs = [worker_pb2.WorkerMessage(record_step=r) for r in held]
        if len(msgs) == 1:
            replies = [await self._ask(msgs[0])]
        else:
            replies = list(await asyncio.gather(*(self._ask(m) for m in msgs)))
        if before is not None:
            await before
        for reply in replies:
            self._check(reply)


def _succeeded(t: asyncio.Task[None]) -> bool:
    return not t.cancelled() and t.exception() is None


def _observe(t: asyncio.Task[None]) -> None:
    # A flush whose waiters were all cancelled would otherwise log "exception never retrieved";
    # what it failed with reaches whoever awaits it next.
    if not t.cancelled():
        t.exception()
