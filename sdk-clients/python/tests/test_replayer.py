"""The offline `Replayer`: recorded calls are answered from the history, the first unrecorded one
ends the replay (`Suspended`), and nothing connects, sends, waits or runs a step function. No
server: every test fails if anything tries to reach one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from waymark import HistoryEnded, StepFailed, Worker, WorkflowContext, WorkflowFailed
from waymark._time import now_ms
from waymark.replay import Failed, Replayer, Returned, Suspended
from waymark.worker._conn import Conn


@pytest.fixture(autouse=True)
def no_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("a replay tried to reach the server")

    monkeypatch.setattr("waymark._rpc.channel", refuse)
    monkeypatch.setattr(Conn, "request", refuse)
    monkeypatch.setattr(Conn, "send", refuse)
    yield


ran: list[str] = []


def never(*_: Any) -> Any:
    ran.append("a step function")
    raise AssertionError("a replayed step's function ran")


def history(name: str, *steps: dict[str, Any], input: Any = None) -> dict[str, Any]:
    return {"workflow_id": "wf", "workflow_name": name, "input": input, "steps": list(steps)}


def out(step_id: int, name: str, output: Any) -> dict[str, Any]:
    return {"step_id": step_id, "name": name, "output": output}


def failed(step_id: int, name: str, message: str) -> dict[str, Any]:
    return {"step_id": step_id, "name": name, "failure": {"kind": "StepFailed", "message": message}}


async def checkout(ctx: WorkflowContext, order: dict[str, Any]) -> dict[str, Any]:
    charged = await ctx.step("charge", never, order)
    await ctx.send("shipping", {"order": order["id"]}, topic="ship")
    label = await ctx.call_step("print_label", order)
    return {"charged": charged, "label": label}


def replayer() -> Replayer:
    worker = Worker()
    worker.workflow("checkout")(checkout)
    worker.step("print_label")(never)
    return Replayer(worker)


CHECKOUT = [
    out(0, "charge", "ch_1"),
    out(1, "waymark.send", {"message_id": "m-1"}),
    out(2, "print_label", "label-7"),
]


@pytest.fixture(autouse=True)
def nothing_ran() -> Iterator[None]:
    ran.clear()
    yield
    assert ran == []


async def test_a_complete_history_returns_what_the_code_returns() -> None:
    got = await replayer().replay(history("checkout", *CHECKOUT, input={"id": 7}))
    assert got == Returned({"charged": "ch_1", "label": "label-7"})


async def test_another_step_at_a_recorded_position_is_non_determinism() -> None:
    steps = [out(0, "charge", "ch_1"), out(1, "waymark.set_event", {"key": "k"})]
    got = await replayer().replay(history("checkout", *steps, input={"id": 7}))
    assert isinstance(got, Failed) and got.kind == "NonDeterminism"
    assert got.message == (
        "workflow 'wf' called step 'waymark.send' at position 1, "
        "where its history records 'waymark.set_event'"
    )


@pytest.mark.parametrize("recorded", [0, 1, 2])
async def test_the_first_unrecorded_call_suspends_the_replay_there(recorded: int) -> None:
    # A live step, a request to the server, a remote step: each ends the replay at its position.
    got = await replayer().replay(history("checkout", *CHECKOUT[:recorded], input={"id": 7}))
    assert got == Suspended(recorded)


async def test_a_recorded_failure_left_uncaught_fails_as_the_live_run_did() -> None:
    got = await replayer().replay(history("checkout", failed(0, "charge", "declined")))
    assert isinstance(got, Failed) and isinstance(got.error, StepFailed)
    assert (got.kind, got.message) == ("StepFailed", "step 'charge' failed: declined")


async def test_the_workflows_own_failure_keeps_its_kind() -> None:
    async def picky(ctx: WorkflowContext) -> None:
        raise WorkflowFailed("PaymentDeclined", "card expired")

    got = await Replayer({"picky": picky}).replay(history("picky"))
    assert isinstance(got, Failed) and isinstance(got.error, WorkflowFailed)
    assert (got.kind, got.message) == ("PaymentDeclined", "card expired")


async def test_the_end_of_the_history_is_not_an_exception_the_code_can_catch() -> None:
    async def careless(ctx: WorkflowContext, _: Any) -> str:
        try:
            await ctx.step("a", never)
        except Exception:
            return "swallowed"
        return "done"

    assert await Replayer({"careless": careless}).replay(history("careless")) == Suspended(0)
    # The interruption it is, where a workflow might look for it.
    assert issubclass(HistoryEnded, BaseException) and not issubclass(HistoryEnded, Exception)


async def test_the_time_and_a_uuid_are_read_from_the_history_else_suspend() -> None:
    async def drawn(ctx: WorkflowContext) -> list[Any]:
        return [ctx.now_ms(), str(ctx.uuid())]

    uuid = "d277cd57-b29b-49a3-bb39-3013ded2ea53"
    steps = [out(0, "waymark.now", {"now_ms": 5}), out(1, "waymark.uuid", {"uuid": uuid})]
    r = Replayer({"drawn": drawn})
    assert await r.replay(history("drawn", *steps)) == Returned([5, uuid])
    assert await r.replay(history("drawn", steps[0])) == Suspended(1)
    assert await r.replay(history("drawn")) == Suspended(0)


async def test_a_patch_replays_either_branch_and_suspends_at_the_end_of_the_history() -> None:
    async def fixed(ctx: WorkflowContext) -> str:
        branch: str = await ctx.step("new" if ctx.patched("fix") else "old", never)
        return branch

    r = Replayer({"fixed": fixed})
    new = [out(0, "waymark.patch", {"patch_id": "fix"}), out(1, "new", "N")]
    assert await r.replay(history("fixed", *new)) == Returned("N")
    assert await r.replay(history("fixed", out(0, "old", "O"))) == Returned("O")
    # Live at the end of the history: the marker would be recorded there.
    assert await r.replay(history("fixed")) == Suspended(0)
    assert await r.replay(history("fixed", new[0])) == Suspended(1)
    malformed = await r.replay(history("fixed", out(0, "waymark.patch", None)))
    assert isinstance(malformed, Failed) and malformed.kind == "ValueError"


async def test_recorded_waits_return_at_once_and_a_sleep_not_over_suspends() -> None:
    async def waits(ctx: WorkflowContext) -> Any:
        await ctx.sleep(3600)
        return await ctx.recv("t", timeout=3600)

    later, past = now_ms() + 3_600_000, now_ms() - 1
    r = Replayer({"waits": waits})
    done = [
        out(0, "waymark.sleep", {"wake_at_ms": past}),
        out(1, "waymark.recv.deadline", {"deadline_ms": later}),
        out(2, "waymark.recv", {"message": "hi"}),
    ]
    started = time.monotonic()
    assert await r.replay(history("waits", *done)) == Returned("hi")
    # A recv's deadline recorded, its outcome not: the recovery would ask the server.
    assert await r.replay(history("waits", *done[:2])) == Suspended(2)
    assert await r.replay(history("waits", *done[:1])) == Suspended(1)
    # A sleep whose wake time is still ahead: the live run would be sleeping there.
    asleep = out(0, "waymark.sleep", {"wake_at_ms": later})
    assert await r.replay(history("waits", asleep)) == Suspended(0)
    assert await r.replay(history("waits")) == Suspended(0)
    assert time.monotonic() - started < 1, "a replay waited"


async def test_children_and_several_waits_replay_without_the_server() -> None:
    async def parent(ctx: WorkflowContext) -> Any:
        child = await ctx.start_child("kid", {"n": 1})
        h = await ctx.start_step("slow")
        first = await ctx.wait_first(h, child)
        return [await ctx.await_child(child), first, await ctx.step_result(h)]

    steps = [
        out(0, "waymark.start_child", {"workflow_id": "wf/child-0"}),
        out(1, "slow", "s"),
        out(2, "waymark.select", {"index": 1}),
        out(3, "waymark.await_child", {"status": "SUCCESS", "output": 2}),
    ]
    r = Replayer({"parent": parent})
    assert await r.replay(history("parent", *steps)) == Returned([2, 1, "s"])
    for n in range(4):
        assert await r.replay(history("parent", *steps[:n])) == Suspended(n)


async def test_the_output_is_what_a_live_run_records() -> None:
    async def shaped(ctx: WorkflowContext) -> Any:
        return (1, 2.0)

    async def opaque(ctx: WorkflowContext) -> Any:
        return object()

    r = Replayer({"shaped": shaped, "opaque": opaque})
    assert await r.replay(history("shaped")) == Returned([1, 2])
    got = await r.replay(history("opaque"))
    assert isinstance(got, Failed) and got.kind == "TypeError"


async def test_an_unknown_workflow_is_an_error_not_an_outcome() -> None:
    with pytest.raises(LookupError, match="nope"):
        await replayer().replay(history("nope"))


async def test_a_history_from_elsewhere_needs_only_name_and_steps() -> None:
    async def echo(ctx: WorkflowContext, input: Any) -> Any:
        await ctx.step("a", never)
        return [ctx.workflow_id, input]

    # The defaults: id "replay", input null, and a step recorded without an output is `null`.
    minimal = {"workflow_name": "echo", "steps": [{"step_id": 0, "name": "a"}]}
    assert await Replayer({"echo": echo}).replay(minimal) == Returned(["replay", None])


async def test_replays_run_side_by_side() -> None:
    r = replayer()
    full = history("checkout", *CHECKOUT, input={"id": 7})
    cut = history("checkout", *CHECKOUT[:1], input={"id": 7})
    got = await asyncio.gather(r.replay(full), r.replay(cut), r.replay(full))
    assert got[1] == Suspended(1) and got[0] == got[2] == Returned(
        {"charged": "ch_1", "label": "label-7"}
    )
