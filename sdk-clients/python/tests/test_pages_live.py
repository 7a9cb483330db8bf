"""A list longer than a page, against a real server: 260 messages of 64 KiB sent to a running
workflow come to about 16 MiB, more than a page of the server's default limits carries (twice
the 4 MiB payload limit), so the server answers them in several pages; `client.messages` returns
all of them, in the server's order."""

from __future__ import annotations

from conftest import Workers, eventually

from waymark import Client, WorkflowContext, _rpc
from waymark._proto import workflow_pb2, workflow_pb2_grpc

COUNT = 260
BODY = "m" * (64 * 1024)


async def test_messages_are_listed_across_pages(client: Client, workers: Workers) -> None:
    w = workers.new()

    @w.workflow("inbox")
    async def inbox(ctx: WorkflowContext) -> object:
        # Waits, running, while the messages come in on another topic.
        return await ctx.recv("done", timeout=120)

    await workers.start(w)
    h = await client.start("inbox", queue=workers.queue)
    await eventually(
        lambda: _dispatched(client, h.workflow_id), what="the inbox workflow to be dispatched"
    )
    sent = []
    for i in range(COUNT):
        message_id, _ = await client.send(h.workflow_id, {"i": i, "body": BODY}, topic="t")
        sent.append(message_id)

    # The pages as the server answers them, read one by one.
    channel = _rpc.channel(workers.server.address)
    try:
        rpc = workflow_pb2_grpc.WorkflowServiceStub(channel)
        pages: list[list[str]] = []
        token = ""
        while True:
            r = await rpc.ListMessages(
                workflow_pb2.ListMessagesRequest(workflow_id=h.workflow_id, page_token=token)
            )
            pages.append([m.message_id for m in r.messages])
            token = r.next_page_token
            if not token:
                break
    finally:
        await channel.close()
    assert len(pages) >= 2, f"the server answered in one page of {len(pages[0])}"

    messages = await client.messages(h.workflow_id)
    assert len(messages) == COUNT
    assert [m.message_id for m in messages] == [i for page in pages for i in page]
    assert sorted(m.message_id for m in messages) == sorted(sent)
    assert sorted(m.payload["i"] for m in messages) == list(range(COUNT))
    assert all(m.topic == "t" and m.payload["body"] == BODY for m in messages)

    await h.send("over", topic="done")
    assert await h.result(timeout=60) == "over"


async def _dispatched(client: Client, workflow_id: str) -> bool:
    # Then it waits: PENDING, or DELAYED until its recv would time out.
    return (await client.get(workflow_id)).started_at is not None
