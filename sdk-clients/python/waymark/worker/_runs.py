"""Continue-as-new: ending this run so the workflow goes on with a fresh history."""

from __future__ import annotations

from typing import Any, NoReturn

from .._payload import from_payload, to_payload
from ..errors import ContinueAsNew
from ._core import ContextCore


class RunsMixin(ContextCore):
    def continue_as_new(self, input: Any) -> NoReturn:
        """Ends this run and starts the workflow again under its id with `input` and an empty
        history — for a workflow that loops for ever (polling, its own schedule), so its
        history stays short:

            if n < until:
                ctx.continue_as_new({"n": n + 1, "until": until})  # raises ContinueAsNew

        It raises `ContinueAsNew`, which the worker turns into the run's end: let it escape the
        workflow function (it is a `BaseException`, so `except Exception` does not catch it).
        Steps already recorded in this run stay with the ended run (`<id>/run-<n>`); awaiters,
        the parent and senders of messages keep using the workflow's id. Not a failure;
        nothing is recorded, so a replay of this run reaches the same call and ends the same
        way. `input` must be JSON (a `TypeError` here, else); one over the server's payload
        limit fails the workflow with PAYLOAD_TOO_LARGE, as an output over it would."""
        raise ContinueAsNew(from_payload(to_payload(input)))
