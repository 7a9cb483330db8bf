"""The golden workflows in Python: the same code as `integration-tests/src/golden.rs` (each
function's comment there is the specification) — the same workflow names, the same calls in the
same order with the same step names, topics, keys and inputs, the same results — so that their
recorded histories (`contract/histories/`) replay here to the outcomes they record.

`ran` lists the step functions that ran (local and remote): a replay must leave it empty."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from waymark import RetryPolicy, StepFailed, Worker, WorkflowContext, WorkflowFailed

ran: list[str] = []

# The golden histories: one file per scenario, {"about", "history", "expect"}.
HISTORIES = Path(__file__).resolve().parents[3] / "contract" / "histories"


def read(path: Path) -> dict[str, Any]:
    golden_file: dict[str, Any] = json.loads(path.read_text())
    return golden_file


def register(worker: Worker) -> Worker:
    """Registers every golden workflow (and the remote step they call)."""
    for name, fn in [
        ("golden.steps", steps),
        ("golden.sleep", sleep),
        ("golden.messages", messages),
        ("golden.events", events),
        ("golden.stream", stream),
        ("golden.child", child),
        ("golden.child_body", child_body),
        ("golden.remote", remote),
        ("golden.drawn", drawn),
        ("golden.patched", patched),
        ("golden.select", select),
        ("golden.wait_all", wait_all),
        ("golden.gated", gated),
        ("golden.update", update),
    ]:
        worker.workflow(name)(fn)
    worker.step("golden.flaky")(flaky)
    return worker


def _n(input: Any) -> int:
    """`input["n"]` as an integer, 0 when there is none (Rust: `as_i64().unwrap_or(0)`)."""
    n = input.get("n") if isinstance(input, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else 0


def _add(n: int) -> int:
    ran.append("add")
    return n + 1


def _fail() -> int:
    ran.append("fail")
    raise RuntimeError("boom")


async def steps(ctx: WorkflowContext, input: Any) -> Any:
    """Input {"n": N}. Step "add" returns N + 1; step "fail" fails with "boom" (no retries),
    which the workflow catches. Returns {"sum": N + 1, "caught": "boom"}."""
    total = await ctx.step("add", _add, _n(input))
    try:
        got = await ctx.step("fail", _fail)
    except StepFailed as e:
        caught = e.message
    except Exception as e:
        # As the Rust copy does: anything but the step's failure is unexpected.
        raise WorkflowFailed("Unexpected", repr(e)) from e
    else:
        raise WorkflowFailed("Unexpected", f"step 'fail' returned {got!r}")
    return {"sum": total, "caught": caught}


def _apply(n: int) -> int:
    ran.append("apply")
    return n + 1


async def update(ctx: WorkflowContext, input: Any) -> Any:
    """Takes one update named "add" (60 s); step "apply" returns its args' N + 1, and the update
    is answered with {"total": N + 1}. Returns {"update": <its id>, "total": N + 1}
    ({"update": null} when none came)."""
    u = await ctx.recv_update("add", timeout=60)
    if u is None:
        return {"update": None}
    total = await ctx.step("apply", _apply, _n(u.args))
    await ctx.answer_update(u.id, {"total": total})
    return {"update": u.id, "total": total}


async def sleep(ctx: WorkflowContext, input: Any) -> Any:
    """Sleeps 10 ms; returns "slept"."""
    await ctx.sleep(0.010)
    return "slept"


async def messages(ctx: WorkflowContext, input: Any) -> Any:
    """Sends {"hi": 1} to itself on topic "t", receives on "t" (60 s), then receives on "none"
    (10 ms, times out). Returns {"got": {"hi": 1}, "none": null}."""
    await ctx.send(ctx.workflow_id, {"hi": 1}, topic="t")
    got = await ctx.recv("t", timeout=60)
    none = await ctx.recv("none", timeout=0.010)
    return {"got": got, "none": none}


async def events(ctx: WorkflowContext, input: Any) -> Any:
    """Sets its event "k" to 7, then reads it back (1 s). Returns 7."""
    await ctx.set_event("k", 7)
    return await ctx.get_event(ctx.workflow_id, "k", timeout=1)


async def stream(ctx: WorkflowContext, input: Any) -> Any:
    """Writes "a" then "b" to its stream "s" and closes it. Returns the offset "b" was written
    at."""
    await ctx.write_stream("s", "a")
    b = await ctx.write_stream("s", "b")
    await ctx.close_stream("s")
    return b


async def child(ctx: WorkflowContext, input: Any) -> Any:
    """Starts "golden.child_body" with {"n": 3} (its id derived by the server) and awaits it.
    Returns the child's output."""
    child_id = await ctx.start_child("golden.child_body", {"n": 3})
    return await ctx.await_child(child_id)


def _double(n: int) -> int:
    ran.append("double")
    return 2 * n


async def child_body(ctx: WorkflowContext, input: Any) -> Any:
    """Input {"n": N}: step "double" returns 2N; returns it."""
    return await ctx.step("double", _double, _n(input))


async def remote(ctx: WorkflowContext, input: Any) -> Any:
    """Calls the remote step "golden.flaky" with {"fail_times": 1} and up to 3 attempts (50 ms
    backoff): its first attempt fails, its second succeeds. Returns the step's output."""
    retry = RetryPolicy(max_attempts=3, initial_interval=0.050, backoff=2.0, max_interval=1.0)
    return await ctx.call_step("golden.flaky", {"fail_times": 1}, retry=retry)


async def drawn(ctx: WorkflowContext, input: Any) -> Any:
    """Reads the time and draws a UUID. Returns {"now_ms": …, "uuid": "…"}."""
    # `now_ms()` records the same step as `now()` (waymark.now), without a float in between.
    now_ms = ctx.now_ms()
    drawn_id = ctx.uuid()
    return {"now_ms": now_ms, "uuid": str(drawn_id)}


def _new() -> str:
    ran.append("fixed")
    return "new"


def _old() -> str:
    ran.append("unfixed")
    return "old"


async def patched(ctx: WorkflowContext, input: Any) -> Any:
    """Asks `patched("golden-fix")`. The new branch runs step "fixed", which returns "new"; the
    old one runs step "unfixed", which returns "old". Returns {"branch": <what the step
    returned>}."""
    if ctx.patched("golden-fix"):
        branch = await ctx.step("fixed", _new)
    else:
        branch = await ctx.step("unfixed", _old)
    return {"branch": branch}


async def select(ctx: WorkflowContext, input: Any) -> Any:
    """Calls the remote step "golden.flaky" with {"fail_times": 0} (the server's retry policy),
    then starts "golden.gated" (its id derived by the server), and waits for the first of the two
    to finish, the step first: the step wins (index 0), as the child cannot finish before it gets
    the message this workflow sends it only after the wait. Then reads the step's result, sends
    the child "go" on topic "go", and awaits the child. Returns
    {"winner": 0, "step": "ok after 0 failures", "child": "go"}."""
    step = await ctx.start_step("golden.flaky", {"fail_times": 0})
    child_id = await ctx.start_child("golden.gated", {})
    winner = await ctx.wait_first(step, child_id)
    result = await ctx.step_result(step)
    await ctx.send(child_id, "go", topic="go")
    got = await ctx.await_child(child_id)
    return {"winner": winner, "step": result, "child": got}


async def wait_all(ctx: WorkflowContext, input: Any) -> Any:
    """Calls the remote step "golden.flaky" with {"fail_times": 0} (the server's retry policy)
    and starts "golden.gated" (its id derived by the server), as golden.select does; reads the
    step's result (so the step has finished before the child can), sends the child "go" on
    topic "go", then waits for both to finish, the child first. The wait records the last to
    finish, the child (index 0; a tie would go to the lower index, the child too). Then awaits
    the child and reads the step's result again. Returns
    {"results": ["go", "ok after 0 failures"]}."""
    step = await ctx.start_step("golden.flaky", {"fail_times": 0})
    child_id = await ctx.start_child("golden.gated", {})
    await ctx.step_result(step)
    await ctx.send(child_id, "go", topic="go")
    await ctx.wait_all(child_id, step)
    got = await ctx.await_child(child_id)
    result = await ctx.step_result(step)
    return {"results": [got, result]}


async def gated(ctx: WorkflowContext, input: Any) -> Any:
    """Receives on topic "go" (60 s). Returns what it got (null when nothing came)."""
    return await ctx.recv("go", timeout=60)


_calls = itertools.count()


def flaky(input: Any) -> Any:
    """The remote step: fails its first `fail_times` attempts in this process, then returns
    "ok after N failures". (Only a live run calls it; a replay reads its recorded result.)
    Every attempt counts, so golden.remote runs before the others that call it."""
    ran.append("golden.flaky")
    fail_times = int((input or {}).get("fail_times", 0))
    call = next(_calls)
    if call < fail_times:
        raise RuntimeError(f"planned failure {call + 1}")
    return f"ok after {fail_times} failures"
