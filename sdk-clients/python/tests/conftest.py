"""Fixtures: one server for the session, a client, and a worker per test on its own queue
(so tests do not take each other's workflows)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from typing import Any

import pytest
from server import Server

from waymark import Client, RpcError, Worker

logging.getLogger("waymark").setLevel(logging.DEBUG)

# Under WAYMARK_NO_SKIP=1 (set by .ci/run) nothing may skip: a skip would hide a missing install
# step or a broken feature behind a green run, so a skipped test (or module) is reported failed
# instead, with the skip's reason. Expected failures (xfail) are left as they are.
NO_SKIP = os.environ.get("WAYMARK_NO_SKIP") == "1"


def _skip_reason(longrepr: object) -> str:
    # A skip's longrepr is (path, line, "Skipped: reason").
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _forbid_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if NO_SKIP and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = (
            f"{_skip_reason(report.longrepr)}; WAYMARK_NO_SKIP=1 forbids skipping this test"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    _forbid_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    _forbid_skip(report)
    return report


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server().start()
    yield s
    s.stop()


@pytest.fixture
async def client(server: Server) -> AsyncIterator[Client]:
    async with Client(server.address) as c:
        yield c


async def eventually(
    predicate: Callable[[], Awaitable[Any] | Any], timeout: float = 30.0, what: str = "condition"
) -> Any:
    """Polls `predicate` until it returns something truthy; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


class Workers:
    """Workers serving in this event loop on the test's own queue: `w = workers.new(...)`,
    register functions on it, then `await workers.start(w)`. Stopped after the test."""

    def __init__(self, server: Server, client: Client, queue: str) -> None:
        self.server, self.client, self.queue = server, client, queue
        self.tasks: list[tuple[Worker, asyncio.Task[None]]] = []

    def new(self, **options: Any) -> Worker:
        options.setdefault("server", self.server.address)
        options.setdefault("queues", [self.queue])
        options.setdefault("app_version", "test")
        return Worker(**options)

    async def start(self, worker: Worker) -> Worker:
        self.tasks.append((worker, asyncio.create_task(worker.run())))

        async def queue_exists() -> bool:
            try:
                await self.client.queues.get(self.queue)
                return True
            except RpcError:
                return False

        await eventually(queue_exists, what=f"queue {self.queue} (created by the worker's hello)")
        return worker

    async def stop_all(self) -> None:
        for worker, task in self.tasks:
            worker.stop()
            await asyncio.wait_for(task, 10)


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def workers(server: Server, client: Client, queue: str) -> AsyncIterator[Workers]:
    w = Workers(server, client, queue)
    yield w
    await w.stop_all()
