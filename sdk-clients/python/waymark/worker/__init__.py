"""The worker: registers workflow functions and remote steps, holds one stream to the server,
and runs what the server dispatches. It reconnects with backoff when the stream breaks."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeGuard, TypeVar

import grpc

from .._backoff import DEFAULT_PATIENCE
from .._connection import Pem, resolve
from .._time import Seconds, seconds
from ..errors import RpcError
from ._context import WorkflowContext
from ._core import log
from ._remote import Awaitable as WaitTarget
from ._remote import StepHandle
from ._runner import as_workflow_fn
from ._session import Config, Session
from ._updates import Update

__all__ = ["StepHandle", "Update", "WaitTarget", "Worker", "WorkflowContext"]

W = TypeVar("W", bound=Callable[..., Awaitable[Any]])
S = TypeVar("S", bound=Callable[..., Any])


class Worker:
    """A worker process's connection to Waymark.

        worker = Worker(app_name="shop", app_version="1")

        @worker.workflow("checkout")
        async def checkout(ctx: WorkflowContext, order: dict) -> dict: ...

        await worker.run()

    `queues` are the queues it takes workflows from ("default" when none); at most
    `max_concurrent_workflows` run at once. A workflow that will wait longer than `park_after`
    (seconds; None never) is parked: released from memory and dispatched again when its wait
    resolves. `worker_id` is kept across reconnects (generated when not given).

    A request the server answers UNAVAILABLE (its database restarting, say) is sent again with
    backoff for up to `retry_unavailable_for` seconds; past that the run is dropped — left
    unfinished, for the server to dispatch again — never failed.

    The connection options are the client's (see `Client`): `server`, `tls_ca`, `tls_cert`,
    `tls_key`, `api_key`, `namespace`, each from its environment variable when not given, and
    `insecure` (or `WAYMARK_INSECURE=1`), without which an API key with a plaintext address to
    a host that is not loopback raises `ValueError`. The key and namespace go with the worker's
    stream. A stream the server refuses for the key —
    UNAUTHENTICATED (unknown, revoked or expired) or PERMISSION_DENIED (not a worker key, or
    one that may not register these names), when connecting or later — ends `run` with that
    `RpcError` instead of reconnecting: trying again could not help."""

    def __init__(
        self,
        *,
        server: str | None = None,
        tls_ca: Pem | None = None,
        tls_cert: Pem | None = None,
        tls_key: Pem | None = None,
        api_key: str | None = None,
        namespace: str | None = None,
        insecure: bool = False,
        app_name: str = "",
        app_version: str = "",
        worker_id: str | None = None,
        queues: Iterable[str] = (),
        max_concurrent_workflows: int = 100,
        max_concurrent_steps: int = 16,
        park_after: Seconds | None = 60.0,
        retry_unavailable_for: Seconds = DEFAULT_PATIENCE,
    ) -> None:
        self._config = Config(
            connection=resolve(
                server,
                tls_ca=tls_ca,
                tls_cert=tls_cert,
                tls_key=tls_key,
                api_key=api_key,
                namespace=namespace,
                insecure=insecure,
            ),
            worker_id=worker_id or str(uuid.uuid4()),
            app_name=app_name,
            app_version=app_version,
            queues=list(queues),
            max_concurrent_workflows=max(max_concurrent_workflows, 1),
            max_concurrent_steps=max(max_concurrent_steps, 1),
            park_after=None if park_after is None else seconds(park_after),
            patience=seconds(retry_unavailable_for),
        )
        self._stop = asyncio.Event()
        # The session serving now (None between connections).
        self._session: Session | None = None

    @property
    def worker_id(self) -> str:
        return self._config.worker_id

    def workflow(self, name: str | None = None) -> Callable[[W], W]:
        """Registers `async def fn(ctx, input)` (or `fn(ctx)`) as workflow `name` (the
        function's name when None). Input and output are JSON."""

        def register(fn: W) -> W:
            self._config.workflows[name or fn.__name__] = as_workflow_fn(fn)
            return fn

        return register

    def step(self, name: str | None = None) -> Callable[[S], S]:
        """Registers `fn(input)` (sync or async) as remote step `name`: any workflow, in any
        language, can call it with `call_step(name, input)`, and the server dispatches the call
        here (or to another worker that registered it). An exception fails the attempt; the
        caller's retry policy decides what next."""

        def register(fn: S) -> S:
            self._config.steps[name or fn.__name__] = fn
            return fn

        return register

    def stop(self) -> None:
        """Makes `run` return (and a later `run` serve again)."""
        self._stop.set()

    async def run(self) -> None:
        """Serves until `stop()` is called or the task is cancelled. Reconnects, with backoff,
        whenever the stream breaks; what was running when it broke is dropped here and the
        server gives it out again. Raises `RpcError` (code UNAUTHENTICATED or
        PERMISSION_DENIED) when the server refuses the stream for its API key."""
        failures = 0
        stopping = asyncio.create_task(self._stop.wait())
        try:
            while not self._stop.is_set():
                self._session = Session(self._config)
                session = asyncio.create_task(self._session.run())
                try:
                    await asyncio.wait({session, stopping}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    # Stopped, or this task cancelled: the session ends with it.
                    if not session.done():
                        session.cancel()
                        await asyncio.gather(session, return_exceptions=True)
                    self._session = None
                if self._stop.is_set():
                    return
                error = session.exception()
                if refused(error):
                    log.error("the server refused this worker's stream: %s; stopping", error)
                    raise RpcError(
                        error.code,
                        error.reason,
                        f"the server refused this worker's stream: {error.message}",
                        error.metadata,
                    ) from None
                failures = failures + 1 if error else 0
                log.warning("worker stream ended (%s); reconnecting", error)
                try:
                    await asyncio.wait_for(asyncio.shield(stopping), _backoff(failures))
                except TimeoutError:
                    pass
        finally:
            stopping.cancel()
            self._stop.clear()

    def _lose_run(self, workflow_id: str) -> bool:
        """For tests only: lets go of a running workflow without telling the server, as if its
        task had died (False when it is not running here). The server sees it missing from the
        next heartbeat and dispatches it again."""
        return self._session is not None and self._session.lose(workflow_id)


def refused(error: BaseException | None) -> TypeGuard[RpcError]:
    """The server refused the stream for its credentials: reconnecting would be refused too."""
    return isinstance(error, RpcError) and error.code in (
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
    )


def _backoff(failures: int) -> float:
    """50 ms doubling to 5 s, with jitter so a fleet does not reconnect in lockstep."""
    base = min(0.05 * float(2 ** min(failures, 7)), 5.0)
    return base / 2 + random.uniform(0, base / 2)
