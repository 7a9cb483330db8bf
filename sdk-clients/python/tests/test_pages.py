"""Lists come a page at a time: the client reads every page, following `next_page_token` until
it is empty, and returns the whole list in order. A page shorter than the others (the server
stops a page before its payloads would pass the response size limit) is not the last. A page the
server answers UNAVAILABLE is asked for again with the same token. Against fake services (no
server process): five pages of 2, 1, 3, 0 and 1 items, the third refused once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
from server import free_port

from waymark import Client
from waymark._payload import to_payload
from waymark._proto import (
    queue_pb2,
    queue_pb2_grpc,
    schedule_pb2,
    schedule_pb2_grpc,
    types_pb2,
    workflow_pb2,
    workflow_pb2_grpc,
)

# Item numbers of each page; page i (past the first) is asked for with the token "page-<i>".
PAGES = [[0, 1], [2], [3, 4, 5], [], [6]]
ALL = [n for page in PAGES for n in page]


class Pager:
    """Answers one list a page at a time, and remembers the tokens it was asked for."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.refused = False

    async def page(self, request: Any, context: Any) -> tuple[list[int], str]:
        token = request.page_token
        self.tokens.append(token)
        i = 0 if token == "" else int(token.removeprefix("page-"))
        if i == 2 and not self.refused:
            self.refused = True
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the database is restarting")
        nxt = f"page-{i + 1}" if i + 1 < len(PAGES) else ""
        return PAGES[i], nxt


class Workflows(workflow_pb2_grpc.WorkflowServiceServicer):
    def __init__(self) -> None:
        self.pagers = {k: Pager() for k in ("steps", "messages", "events")}

    async def ListSteps(self, request: Any, context: Any) -> Any:
        assert request.workflow_id == "wf"
        items, nxt = await self.pagers["steps"].page(request, context)
        steps = [types_pb2.Step(step_id=n, name=f"s{n}", output=to_payload(n)) for n in items]
        return workflow_pb2.ListStepsResponse(steps=steps, next_page_token=nxt)

    async def ListMessages(self, request: Any, context: Any) -> Any:
        assert request.workflow_id == "wf"
        items, nxt = await self.pagers["messages"].page(request, context)
        messages = [types_pb2.Message(message_id=f"m{n}", payload=to_payload(n)) for n in items]
        return workflow_pb2.ListMessagesResponse(messages=messages, next_page_token=nxt)

    async def ListEvents(self, request: Any, context: Any) -> Any:
        assert request.workflow_id == "wf"
        items, nxt = await self.pagers["events"].page(request, context)
        events = [types_pb2.Event(key=f"e{n}", value=to_payload(n)) for n in items]
        return workflow_pb2.ListEventsResponse(events=events, next_page_token=nxt)


class Queues(queue_pb2_grpc.QueueServiceServicer):
    def __init__(self) -> None:
        self.pager = Pager()

    async def ListQueues(self, request: Any, context: Any) -> Any:
        items, nxt = await self.pager.page(request, context)
        queues = [queue_pb2.Queue(name=f"q{n}") for n in items]
        return queue_pb2.ListQueuesResponse(queues=queues, next_page_token=nxt)


class Schedules(schedule_pb2_grpc.ScheduleServiceServicer):
    def __init__(self) -> None:
        self.pager = Pager()

    async def ListSchedules(self, request: Any, context: Any) -> Any:
        items, nxt = await self.pager.page(request, context)
        schedules = [schedule_pb2.Schedule(name=f"s{n}") for n in items]
        return schedule_pb2.ListSchedulesResponse(schedules=schedules, next_page_token=nxt)


class Fake:
    def __init__(self) -> None:
        self.workflows, self.queues, self.schedules = Workflows(), Queues(), Schedules()


@pytest.fixture
async def fake() -> AsyncIterator[tuple[Fake, Client]]:
    f = Fake()
    # Not SO_REUSEPORT (gRPC's default): a port chosen free must not be shared with a server
    # in another process, which would take some of this test's connections.
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    workflow_pb2_grpc.add_WorkflowServiceServicer_to_server(f.workflows, server)
    queue_pb2_grpc.add_QueueServiceServicer_to_server(f.queues, server)
    schedule_pb2_grpc.add_ScheduleServiceServicer_to_server(f.schedules, server)
    address = f"127.0.0.1:{free_port()}"
    server.add_insecure_port(address)
    await server.start()
    try:
        async with Client(address) as client:
            yield f, client
    finally:
        await server.stop(None)


# Every page asked for once, the refused one (the third) twice, with its own token both times.
ASKED = ["", "page-1", "page-2", "page-2", "page-3", "page-4"]


def check(pager: Pager, got: list[Any], expected: Callable[[int], Any]) -> None:
    assert got == [expected(n) for n in ALL]
    assert pager.tokens == ASKED


async def test_steps_messages_and_events_are_read_to_the_last_page(
    fake: tuple[Fake, Client],
) -> None:
    f, client = fake
    steps = await client.steps("wf")
    check(
        f.workflows.pagers["steps"],
        [(s.step_id, s.name, s.output) for s in steps],
        lambda n: (n, f"s{n}", n),
    )
    messages = await client.messages("wf")
    check(
        f.workflows.pagers["messages"],
        [(m.message_id, m.payload) for m in messages],
        lambda n: (f"m{n}", n),
    )
    events = await client.events("wf")
    check(f.workflows.pagers["events"], [(e.key, e.value) for e in events], lambda n: (f"e{n}", n))


async def test_queues_and_schedules_are_read_to_the_last_page(fake: tuple[Fake, Client]) -> None:
    f, client = fake
    check(f.queues.pager, [q.name for q in await client.queues.list()], lambda n: f"q{n}")
    check(f.schedules.pager, [s.name for s in await client.schedules.list()], lambda n: f"s{n}")
