"""The golden histories (`contract/histories/`, see contract/README.md), the cross-SDK contract
for replay: each file holds a workflow's recorded history and what replaying it must come to.
Every file in the directory is replayed here, offline, against the Python copy of the golden
workflows (tests/golden_workflows.py), and must reach its `expect`. No server is needed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import golden_workflows as golden
import pytest

from waymark import Worker
from waymark.replay import ContinuedAsNew, Failed, Replayed, Replayer, Returned

# The specification the Python copy follows.
GOLDEN_RS = Path(__file__).resolve().parents[3] / "integration-tests" / "src" / "golden.rs"

# Listed when the tests are collected: a file added to the directory is a new case.
FILES = sorted(golden.HISTORIES.glob("*.json"))


def expected(outcome: Replayed) -> dict[str, Any]:
    """An outcome in the shape of a golden file's `expect`."""
    if isinstance(outcome, Returned):
        return {"returned": outcome.value}
    if isinstance(outcome, Failed):
        return {"failed": outcome.kind}
    # No golden history continues as new.
    assert not isinstance(outcome, ContinuedAsNew), f"it continued as new: {outcome}"
    return {"suspended_at": outcome.step_id}


def test_the_golden_histories_are_there() -> None:
    # An empty directory (a wrong path) would otherwise pass by replaying nothing.
    assert len(FILES) >= 10, f"golden histories in {golden.HISTORIES}: {FILES}"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
async def test_every_golden_history_replays_to_its_expected_outcome(path: Path) -> None:
    golden_file = golden.read(path)
    replayer = Replayer(golden.register(Worker()))
    golden.ran.clear()
    outcome = await replayer.replay(golden_file["history"])
    assert expected(outcome) == golden_file["expect"], f"{path.name}: {golden_file['about']}"
    # Every call was answered from the history: no step function ran, local or remote.
    assert golden.ran == []


def test_the_python_copy_registers_what_golden_rs_registers() -> None:
    # The names a live run records and every SDK replays; the calls inside each workflow are
    # what the histories above check.
    registered = re.findall(r'^\s*\.(workflow|step)\("([^"]+)"', GOLDEN_RS.read_text(), re.M)
    worker = golden.register(Worker())
    assert sorted(name for kind, name in registered if kind == "workflow") == sorted(
        worker._config.workflows
    )
    assert [name for kind, name in registered if kind == "step"] == list(worker._config.steps)
