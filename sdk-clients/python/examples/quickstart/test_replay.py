"""Replays saved histories against the workflow code in worker.py, offline: run it with pytest
in CI before deploying a change to that code."""

import asyncio
import json
from pathlib import Path

from waymark import Replayer
from waymark.replay import Failed

from worker import worker  # the Worker the workflows are registered on; importing starts nothing

HISTORIES = Path(__file__).parent / "histories"  # waymark workflow export ID > histories/ID.json


def test_saved_histories_still_replay() -> None:
    paths = sorted(HISTORIES.glob("*.json"))
    assert paths, f"no histories in {HISTORIES}: save some with `waymark workflow export ID`"
    replayer = Replayer(worker)
    for path in paths:
        result = asyncio.run(replayer.replay(json.loads(path.read_text())))
        assert not isinstance(result, Failed), f"{path.name}: {result}"
