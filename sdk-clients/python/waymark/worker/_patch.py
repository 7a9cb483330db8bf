"""Changing workflow code safely while runs begun under the old code are still going.

A replay runs the current code against a history the old code made, so a change that makes
other calls would no longer replay (`NonDeterminismError`). `patched(patch_id)` tells new code
which history it is in: a run that gets to the call under the new code records a marker there
(`waymark.patch {"patch_id": …}`, one step position) and takes the new branch, as every replay
of it does; a run whose history was made by code without the call finds something else at that
position, takes the old branch, and leaves the position to the old branch's next call.

Like `now()` and `uuid()`, it returns at once: the marker's record is held back with a local
step's (see _records) and goes with the workflow's next step, request or completion."""

from __future__ import annotations

from .._payload import to_payload
from ._core import ContextCore
from ._history import PATCH_STEP, patch_output


class PatchMixin(ContextCore):
    def patched(self, patch_id: str) -> bool:
        """Whether this run takes the branch of the code change `patch_id`:

            if ctx.patched("charge-in-cents"):
                await ctx.step("charge", charge_cents, order)  # the new code
            else:
                await ctx.step("charge", charge_dollars, order)  # the old code

        True for a run that gets here under this code (it records the marker `waymark.patch`,
        one step position) and for every replay of such a run; false for a run whose history
        was made here by code without the call — it replays the old branch, and the position
        stays for the old branch's next call. Once no run begun before the change is left, the
        old branch can go; keep the call while histories with its marker may still be replayed.
        Not awaited. A cancelled run still replays a recorded marker, but records none
        (`asyncio.CancelledError`)."""
        found = self._history().patched(patch_id)
        if not found.record:
            return found.applies
        assert found.step_id is not None
        self._live(found.step_id)
        self._check_cancelled()
        self._defer(found.step_id, PATCH_STEP, 1, output=to_payload(patch_output(patch_id)))
        return True
