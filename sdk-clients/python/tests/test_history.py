"""The history cursor (waymark/worker/_history.py) on its own: positions, replayed outputs and
failures, non-determinism, and the built-in steps' recorded shapes. No server, no connection."""

from __future__ import annotations

import pathlib
import re
from typing import Any
from uuid import UUID

import pytest

from waymark import NonDeterminismError, StepFailed
from waymark._payload import to_payload
from waymark._proto import types_pb2, worker_pb2
from waymark.worker import _history
from waymark.worker._history import (
    GET_EVENT,
    RECV,
    ChildOutcome,
    History,
    Patched,
    Replayed,
    ReplayedFailure,
    deadline_output,
    now_output,
    patch_output,
    sleep_output,
    uuid_output,
)

PROTO = pathlib.Path(__file__).parents[3] / "proto" / "waymark" / "v1" / "worker.proto"


def out(step_id: int, name: str, value: Any) -> types_pb2.Step:
    return types_pb2.Step(step_id=step_id, name=name, output=to_payload(value))


def failed(step_id: int, name: str, kind: str, message: str) -> types_pb2.Step:
    failure = types_pb2.Failure(kind=kind, message=message)
    return types_pb2.Step(step_id=step_id, name=name, failure=failure)


def test_positions_are_taken_in_call_order() -> None:
    h = History("wf", [])
    assert [h.take(), h.take(2), h.take(), h.take(2), h.take()] == [0, 1, 3, 4, 6]
    assert h.next_position == 7


def test_replaying_follows_the_next_position() -> None:
    h = History("wf", [out(0, "a", 1), out(1, "b", 2)])
    seen = []
    for _ in range(3):
        seen.append(h.replaying)
        h.take()
    assert seen == [True, True, False]


def test_a_recorded_output_is_replayed() -> None:
    h = History("wf", [out(0, "a", {"n": 3, "l": [1, None]}), out(1, "nothing", None)])
    assert h.at(0, "a") == Replayed({"n": 3, "l": [1, None]})
    assert h.replay(0, "a") == Replayed({"n": 3, "l": [1, None]})
    assert h.recorded(0, "a") is True
    # A step that returned None is recorded, not missing.
    assert h.replay(1, "nothing") == Replayed(None)


def test_a_recorded_failure_is_raised_again() -> None:
    h = History("wf", [failed(0, "charge", "PAYLOAD_TOO_LARGE", "too big")])
    assert h.at(0, "charge") == ReplayedFailure("PAYLOAD_TOO_LARGE", "too big")
    assert h.recorded(0, "charge") is True
    with pytest.raises(StepFailed) as e:
        h.replay(0, "charge")
    assert (e.value.name, e.value.message, e.value.step_kind) == (
        "charge",
        "too big",
        "PAYLOAD_TOO_LARGE",
    )
    assert str(e.value) == "step 'charge' failed: too big"


def test_a_position_not_recorded_goes_live() -> None:
    h = History("wf", [out(0, "a", 1)])
    assert h.at(1, "b") is None
    assert h.replay(1, "b") is None
    assert h.recorded(1, "b") is False
    assert h.sleep(1) is None
    assert h.deadline(1, RECV) is None
    assert h.wait_result(1, GET_EVENT) is None
    assert h.sent(1) is None
    assert h.event_set(1) is False
    assert h.stream_offset(1, close=False) is None
    assert h.child_started(1) is None
    assert h.child_outcome(1) is None
    assert h.selected(1, all=True) is None
    assert h.now_read(1) is None
    assert h.uuid_drawn(1) is None


def test_another_name_at_a_recorded_position_is_non_determinism() -> None:
    h = History("wf-7", [out(4, "charge", 1), failed(5, "ship", "StepFailed", "no")])
    expected = (
        "workflow 'wf-7' called step 'refund' at position 4, where its history records 'charge'"
    )
    for lookup in (h.at, h.replay, h.recorded):
        with pytest.raises(NonDeterminismError) as e:
            lookup(4, "refund")
        assert str(e.value) == expected
        assert e.value.kind == "NonDeterminism"
    # Checked before a recorded failure is raised: the name is what went wrong.
    with pytest.raises(NonDeterminismError):
        h.replay(5, "refund")
    # The built-in steps are checked the same way, under their own names.
    with pytest.raises(NonDeterminismError) as e:
        h.sleep(4)
    assert str(e.value) == (
        "workflow 'wf-7' called step 'waymark.sleep' at position 4, "
        "where its history records 'charge'"
    )


def test_a_wait_that_timed_out_replays_as_none() -> None:
    h = History(
        "wf",
        [
            out(0, "waymark.recv.deadline", {"deadline_ms": 1_700_000_000_000}),
            out(1, "waymark.recv", None),
            out(2, "waymark.get_event.deadline", {"deadline_ms": 5}),
            out(3, "waymark.get_event", None),
        ],
    )
    assert h.deadline(0, RECV) == 1_700_000_000_000
    assert h.wait_result(1, RECV) == Replayed(None)
    assert h.deadline(2, GET_EVENT) == 5
    assert h.wait_result(3, GET_EVENT) == Replayed(None)


def test_a_wait_that_got_something_replays_its_value() -> None:
    h = History(
        "wf",
        [
            out(1, "waymark.recv", {"message": {"order": 9}}),
            # A message that is itself null is still a delivery: Replayed(None), not missing.
            out(2, "waymark.recv", {"message": None}),
            out(3, "waymark.get_event", {"value": "shipped"}),
        ],
    )
    assert h.wait_result(1, RECV) == Replayed({"order": 9})
    assert h.wait_result(2, RECV) == Replayed(None)
    assert h.wait_result(3, GET_EVENT) == Replayed("shipped")
    # Each wait reads its own result step: a recv's record is not an event's.
    with pytest.raises(NonDeterminismError):
        h.wait_result(3, RECV)


def test_the_built_in_shapes_decode() -> None:
    h = History(
        "wf",
        [
            out(0, "waymark.sleep", {"wake_at_ms": 1234}),
            out(1, "waymark.send", {"message_id": "m-1"}),
            out(2, "waymark.set_event", {"key": "k"}),
            out(3, "waymark.write_stream", {"offset": 4}),
            out(4, "waymark.close_stream", {"offset": 5}),
            out(5, "waymark.start_child", {"workflow_id": "wf-child"}),
            out(6, "waymark.select", {"index": 2}),
            out(7, "waymark.wait_all", {"index": 1}),
            out(8, "waymark.now", {"now_ms": 1_700_000_000_123}),
            out(9, "waymark.uuid", {"uuid": "0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20"}),
        ],
    )
    assert h.sleep(0) == 1234
    assert h.sent(1) == "m-1"
    assert h.event_set(2) is True
    assert h.stream_offset(3, close=False) == 4
    assert h.stream_offset(4, close=True) == 5
    assert h.child_started(5) == "wf-child"
    assert h.selected(6, all=False) == 2
    assert h.selected(7, all=True) == 1
    assert h.now_read(8) == 1_700_000_000_123
    assert h.uuid_drawn(9) == UUID("0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20")
    # Write and close are different steps; so are select and wait_all.
    with pytest.raises(NonDeterminismError):
        h.stream_offset(3, close=True)
    with pytest.raises(NonDeterminismError):
        h.selected(6, all=True)
    # A time is not a UUID, nor the other way round.
    with pytest.raises(NonDeterminismError):
        h.uuid_drawn(8)
    with pytest.raises(NonDeterminismError):
        h.now_read(9)


def test_await_child_shapes_decode_alike_recorded_and_live() -> None:
    h = History(
        "wf",
        [
            out(0, "waymark.await_child", {"status": "SUCCESS", "output": [1, 2]}),
            out(
                1,
                "waymark.await_child",
                {"status": "ERROR", "failure": {"kind": "Boom", "message": "it broke"}},
            ),
        ],
    )
    assert h.child_outcome(0) == ChildOutcome("SUCCESS", [1, 2])
    assert h.child_outcome(1) == ChildOutcome("ERROR", None, "Boom", "it broke")
    ok = worker_pb2.ChildResult(status=types_pb2.WORKFLOW_STATUS_SUCCESS, output=to_payload([1, 2]))
    bad = worker_pb2.ChildResult(
        status=types_pb2.WORKFLOW_STATUS_ERROR,
        failure=types_pb2.Failure(kind="Boom", message="it broke"),
    )
    assert ChildOutcome.from_result(ok) == h.child_outcome(0)
    assert ChildOutcome.from_result(bad) == h.child_outcome(1)


def test_a_built_in_step_recorded_as_a_failure_raises_under_its_name() -> None:
    h = History("wf", [failed(0, "waymark.start_child", "StepFailed", "no such workflow")])
    with pytest.raises(StepFailed) as e:
        h.child_started(0)
    assert (e.value.name, e.value.message) == ("waymark.start_child", "no such workflow")


def test_what_the_sdk_records_for_waits() -> None:
    assert sleep_output(42) == {"wake_at_ms": 42}
    assert deadline_output(7) == {"deadline_ms": 7}
    assert (RECV.deadline_step, RECV.result_step, RECV.field) == (
        "waymark.recv.deadline",
        "waymark.recv",
        "message",
    )
    assert (GET_EVENT.deadline_step, GET_EVENT.result_step, GET_EVENT.field) == (
        "waymark.get_event.deadline",
        "waymark.get_event",
        "value",
    )


def test_what_the_sdk_records_for_the_time_and_uuids() -> None:
    assert now_output(1_700_000_000_123) == {"now_ms": 1_700_000_000_123}
    u = UUID("0B8E4C1E-3F55-4C1A-9D3E-2A7F6D1C9B20")
    # Lowercase and hyphenated, as every SDK writes it, however it was spelled.
    assert uuid_output(u) == {"uuid": "0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20"}
    # What is recorded reads back as what was drawn.
    h = History("wf", [out(0, "waymark.uuid", uuid_output(u))])
    assert h.uuid_drawn(0) == u


def test_a_recorded_uuid_that_is_not_one_is_an_error_not_a_new_value() -> None:
    h = History("wf", [out(0, "waymark.uuid", {"uuid": "not-a-uuid"})])
    with pytest.raises(ValueError):
        h.uuid_drawn(0)


def marker(step_id: int, patch_id: str) -> types_pb2.Step:
    return out(step_id, "waymark.patch", patch_output(patch_id))


def test_what_the_sdk_records_for_a_patch() -> None:
    assert patch_output("fix") == {"patch_id": "fix"}


def test_a_live_patch_takes_the_position_for_its_marker() -> None:
    h = History("wf", [out(0, "charge", 1)])
    assert h.take() == 0
    assert h.patched("fix") == Patched(True, 1, record=True)
    assert h.next_position == 2, "the marker's position is taken"
    assert h.take() == 2


def test_a_patch_replays_its_own_marker() -> None:
    h = History("wf", [marker(0, "fix"), out(1, "ship", 2)])
    assert h.patched("fix") == Patched(True, 0)
    assert h.next_position == 1
    # The new branch's step replays after the marker.
    assert h.replay(h.take(), "ship") == Replayed(2)


def test_under_old_history_a_patch_takes_no_position() -> None:
    h = History("wf", [out(0, "ship", 2)])
    assert h.patched("fix") == Patched(False)
    assert h.patched("fix") == Patched(False)
    assert h.next_position == 0, "nothing taken"
    # The old branch's step replays at the position patched left.
    assert h.replay(h.take(), "ship") == Replayed(2)


def test_another_patchs_marker_is_not_this_ones() -> None:
    h = History("wf", [marker(0, "older"), out(1, "ship", 2)])
    assert h.patched("newer") == Patched(False)
    assert h.next_position == 0
    assert h.patched("older") == Patched(True, 0)
    assert h.replay(h.take(), "ship") == Replayed(2)


@pytest.mark.parametrize(
    "step",
    [
        out(0, "waymark.patch", {}),
        out(0, "waymark.patch", {"patch_id": 7}),
        out(0, "waymark.patch", "fix"),
        out(0, "waymark.patch", None),
        failed(0, "waymark.patch", "StepFailed", "no"),
    ],
    ids=["no-patch-id", "not-a-string", "not-an-object", "null", "a-failure"],
)
def test_a_malformed_patch_marker_is_an_error_not_an_answer(step: types_pb2.Step) -> None:
    h = History("wf", [step])
    with pytest.raises(ValueError, match=r"'waymark\.patch' at position 0"):
        h.patched("fix")
    assert h.next_position == 0


def test_the_built_in_names_are_the_ones_worker_proto_documents() -> None:
    # The names are a contract between SDKs and the server: the list at the top of
    # worker.proto is the source, and this module must name every one of them, no more.
    text = PROTO.read_text()
    block = text[text.index("Recorded steps of the built-in operations") : text.index("service ")]
    documented = set(re.findall(r"waymark\.[a-z_]+(?:\.[a-z_]+)?", block))
    defined = {v for k, v in vars(_history).items() if k.endswith("_STEP")}
    assert len(documented) == 16
    assert defined == documented
