"""Replay before deploy, end to end: a workflow runs on the real server, an operator exports its
history with the CLI (`waymark workflow export ID --server …`), and CI replays that file offline
against changed workflow code: the same code returns what the live run returned, a step inserted
where the history records another is non-determinism naming both, the same insertion behind
`patched` replays the old branch, and a renamed workflow is not found. The replays reach no
server and run no step function."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import server as live
from conftest import Workers

from waymark import Client, Worker, WorkflowContext, WorkflowStatus
from waymark.replay import Failed, Replayer, Returned
from waymark.worker._conn import Conn

ORDER = {"order": "o-17", "qty": 3}

# Every step function that ran, by step name: the live run's, then (none, we check) a replay's.
calls: list[str] = []


def reserve(order: dict[str, Any]) -> dict[str, Any]:
    calls.append("reserve")
    return {"held": order["qty"]}


def charge(order: dict[str, Any]) -> str:
    calls.append("charge")
    return f"ch-{order['order']}"


def audit(order: dict[str, Any]) -> str:
    calls.append("audit")
    return f"audited {order['order']}"


async def v1(ctx: WorkflowContext, order: dict[str, Any]) -> dict[str, Any]:
    """The code that ran live."""
    reserved = await ctx.step("reserve", reserve, order)
    charged = await ctx.step("charge", charge, order)
    return {"reserved": reserved, "charged": charged}


async def v2_unsafe(ctx: WorkflowContext, order: dict[str, Any]) -> dict[str, Any]:
    """A new step between the two: histories recorded by v1 no longer line up."""
    reserved = await ctx.step("reserve", reserve, order)
    await ctx.step("audit", audit, order)
    charged = await ctx.step("charge", charge, order)
    return {"reserved": reserved, "charged": charged}


async def v2_safe(ctx: WorkflowContext, order: dict[str, Any]) -> dict[str, Any]:
    """The same new step behind a patch: v1's histories take the old branch."""
    reserved = await ctx.step("reserve", reserve, order)
    if ctx.patched("add-audit"):
        await ctx.step("audit", audit, order)
    charged = await ctx.step("charge", charge, order)
    return {"reserved": reserved, "charged": charged}


def deployed(fn: Any, name: str = "deploy-demo") -> Replayer:
    """A replayer of the Worker the new code would deploy, with `fn` registered as `name`."""
    worker = Worker()
    worker.workflow(name)(fn)
    return Replayer(worker)


@dataclass(frozen=True)
class Exported:
    workflow_id: str
    output: Any  # what the live run returned
    printed: dict[str, Any]  # the CLI's stdout, parsed
    loaded: dict[str, Any]  # the same, read back from the file CI would keep


async def export_with_cli(server: live.Server, workflow_id: str) -> str:
    """`waymark workflow export ID --server ADDRESS`, as an operator runs it: the address by
    flag alone (no `WAYMARK_*` variable of the test's environment reaches it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAYMARK_")}
    proc = await asyncio.create_subprocess_exec(
        live.binary(),
        "workflow",
        "export",
        workflow_id,
        "--server",
        server.url,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, f"waymark workflow export failed: {err.decode(errors='replace')}"
    return out.decode()


@pytest.fixture(scope="module")
async def exported(server: live.Server, tmp_path_factory: pytest.TempPathFactory) -> Exported:
    """One live run of `deploy-demo` (v1) on its own queue, awaited, then exported by the CLI
    and saved to a file. The worker is stopped before any replay."""
    queue = f"q-{uuid.uuid4().hex[:12]}"
    wid = f"deploy-demo-{uuid.uuid4().hex[:10]}"
    calls.clear()
    async with Client(server.address) as client:
        workers = Workers(server, client, queue)
        try:
            w = workers.new()
            w.workflow("deploy-demo")(v1)
            await workers.start(w)
            h = await client.start("deploy-demo", ORDER, workflow_id=wid, queue=queue)
            done = await h.wait(timeout=30)
        finally:
            await workers.stop_all()
    assert done.status is WorkflowStatus.SUCCESS, done
    assert done.output == {"reserved": {"held": 3}, "charged": "ch-o-17"}
    assert calls == ["reserve", "charge"], "the live run ran each step once"
    calls.clear()

    stdout = await export_with_cli(server, wid)
    path = tmp_path_factory.mktemp("histories") / f"{wid}.json"
    path.write_text(stdout)
    # What CI does with the file (the Replayer takes the parsed JSON; there is no file helper).
    loaded = json.loads(path.read_text())
    return Exported(wid, done.output, json.loads(stdout), loaded)


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As in test_replayer.py: anything reaching for a server fails the test. Step functions
    are counted in `calls`, which must stay empty."""

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("a replay tried to reach the server")

    monkeypatch.setattr("waymark._rpc.channel", refuse)
    monkeypatch.setattr(Conn, "request", refuse)
    monkeypatch.setattr(Conn, "send", refuse)
    calls.clear()
    yield
    assert calls == [], "a replayed step's function ran"


async def test_the_cli_exports_the_live_runs_history(exported: Exported) -> None:
    h = exported.printed
    assert exported.loaded == h
    assert (h["workflow_id"], h["workflow_name"], h["input"]) == (
        exported.workflow_id,
        "deploy-demo",
        ORDER,
    )
    assert h["steps"] == [
        {"step_id": 0, "name": "reserve", "output": {"held": 3}},
        {"step_id": 1, "name": "charge", "output": "ch-o-17"},
    ]


async def test_the_deployed_code_replays_the_exported_history_to_the_live_result(
    exported: Exported, no_server: None
) -> None:
    got = await deployed(v1).replay(exported.loaded)
    assert got == Returned(exported.output)
    assert got == Returned({"reserved": {"held": 3}, "charged": "ch-o-17"})


async def test_a_step_inserted_before_a_recorded_one_is_reported_as_non_determinism(
    exported: Exported, no_server: None
) -> None:
    got = await deployed(v2_unsafe).replay(exported.loaded)
    assert isinstance(got, Failed), got
    assert got.kind == "NonDeterminism"
    assert "'audit'" in got.message and "'charge'" in got.message, got.message
    assert got.message == (
        f"workflow '{exported.workflow_id}' called step 'audit' at position 1, "
        "where its history records 'charge'"
    )


async def test_the_insertion_behind_patched_replays_the_old_branch(
    exported: Exported, no_server: None
) -> None:
    got = await deployed(v2_safe).replay(exported.loaded)
    assert got == Returned(exported.output)
    assert got == Returned({"reserved": {"held": 3}, "charged": "ch-o-17"})
    assert calls == [], "neither a recorded step's function nor the new branch's ran"


async def test_a_renamed_workflow_is_not_found_for_the_exported_history(
    exported: Exported, no_server: None
) -> None:
    with pytest.raises(LookupError) as e:
        await deployed(v1, name="deploy-demo-v2").replay(exported.loaded)
    assert str(e.value) == "no workflow named 'deploy-demo' is registered"
