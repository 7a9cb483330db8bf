"""`WorkflowContext`: what a workflow function gets. Every method is recorded, so a replay
after a crash returns what the first run got instead of doing it again."""

from __future__ import annotations

from ._children import ChildrenMixin
from ._patch import PatchMixin
from ._remote import RemoteMixin
from ._runs import RunsMixin
from ._steps import StepsMixin
from ._updates import UpdatesMixin
from ._values import ValuesMixin
from ._waits import WaitsMixin
from ._writes import WritesMixin


class WorkflowContext(
    StepsMixin,
    ValuesMixin,
    PatchMixin,
    UpdatesMixin,
    WaitsMixin,
    WritesMixin,
    ChildrenMixin,
    RemoteMixin,
    RunsMixin,
):
    """Handle a workflow function uses to run steps, wait, and talk to other workflows.

    Its methods number their steps when called (not when awaited), so several started together
    with `asyncio.gather` keep their positions on replay. A workflow must call them in the same
    order on every run; a different step at a recorded position is `NonDeterminismError`. For
    the same reason, the time and the random ids it acts on come from `now()` and `uuid()`,
    and new code that must still replay the histories of older code branches on `patched()`."""
