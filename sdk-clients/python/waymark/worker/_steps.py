"""Local steps: run a function once, with retries, and checkpoint its result."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from .._payload import to_payload
from .._proto import types_pb2
from ..errors import PayloadTooLarge, StepFailed
from ..retry import RetryPolicy
from ._core import ContextCore, log
from ._limits import bounded

T = TypeVar("T")


class StepsMixin(ContextCore):
    def step(
        self,
        name: str,
        fn: Callable[..., Awaitable[T] | T],
        *args: Any,
        retry: RetryPolicy | None = None,
        **kwargs: Any,
    ) -> Coroutine[Any, Any, T]:
        """Runs `fn(*args, **kwargs)` (sync or async) once as step `name` and checkpoints its
        result, retrying per `retry` before the step fails with `StepFailed`. On replay the
        recorded result is returned and `fn` is not called. The result must be JSON, within the
        server's payload limit: a larger one fails the step at once (`StepFailed`, recorded with
        kind PAYLOAD_TOO_LARGE).

        The checkpoint is durable before anything the workflow does next outside itself — its
        next step, request or completion (which carries the last steps' records, saving their
        round trips)."""
        step_id = self._take()
        return self._local_step(step_id, name, fn, args, kwargs, retry or RetryPolicy())

    async def _local_step(
        self,
        step_id: int,
        name: str,
        fn: Callable[..., Awaitable[Any] | Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        policy: RetryPolicy,
    ) -> Any:
        replayed = self._history().replay(step_id, name)
        if replayed is not None:
            return replayed.output
        self._live(step_id)
        self._check_cancelled()
        # This step may depend on the ones before: their records are durable first.
        await self._flush()
        # Its span is current while the function runs: what the function traces nests in it.
        with self._run.trace.op(
            f"step {name}", "internal", step_id, make_current=True, waymark_step_name=name
        ):
            attempt = 1
            # How long the step took, retries and their backoff included: its record carries it.
            began = time.monotonic()
            while True:
                try:
                    result = fn(*args, **kwargs)
                    if inspect.isawaitable(result):
                        result = await result
                    payload = to_payload(result)
                    took = time.monotonic() - began
                    break
                except Exception as e:
                    if attempt >= max(policy.max_attempts, 1):
                        message = bounded(str(e) or type(e).__name__)
                        failure = types_pb2.Failure(kind="StepFailed", message=message)
                        took = time.monotonic() - began
                        self._defer(step_id, name, attempt, took, failure=failure)
                        raise StepFailed(name, message) from e
                    log.debug(
                        "step %r of workflow %s failed (attempt %d); retrying: %s",
                        name,
                        self.workflow_id,
                        attempt,
                        e,
                    )
                    await asyncio.sleep(policy.delay(attempt))
                    self._check_cancelled()
                    attempt += 1
            try:
                self._run.limits.check_payload(f"the output of step {name!r}", payload)
            except PayloadTooLarge as e:
                # Not retried: the function would most likely return as much again, and run its
                # effects again to do so. Recorded as the step's failure, raised as a replay raises
                # it, so the workflow sees the same on every run.
                failure = types_pb2.Failure(kind=e.kind, message=e.message)
                self._defer(step_id, name, attempt, took, failure=failure)
                raise StepFailed(name, e.message, e.kind) from None
        self._defer(step_id, name, attempt, took, output=payload)
        return result
