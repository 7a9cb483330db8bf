"""One dispatch of a workflow on this worker: the state its session and its context share, and
the one way its requests reach the server."""

from __future__ import annotations

import asyncio

from .._proto import types_pb2, worker_pb2
from .._tracing import RunTrace
from ..errors import Disconnected, Dropped, HistoryEnded
from . import _resend
from ._conn import Conn
from ._history import History
from ._limits import Limits
from ._records import Records
from ._replies import check_recorded


class Run:
    def __init__(
        self,
        d: worker_pb2.DispatchWorkflow,
        conn: Conn,
        park_after: float | None,
        patience: float,
    ) -> None:
        self.workflow_id = d.workflow_id
        self.workflow_name = d.workflow_name
        self.epoch = d.epoch
        self.recovery_attempts = d.recovery_attempts
        # Where the workflow's trace goes on (an empty one: a new trace), and whether this run
        # replays an earlier one's history (see contract/tracing.md).
        self.trace_context = d.trace_context
        self.replays = len(d.steps) > 0 or d.recovery_attempts > 0
        # The run's spans (none without OpenTelemetry, or offline).
        self.trace = RunTrace(d.workflow_id)
        # Steps recorded by earlier runs, and the next position: a replay returns these
        # instead of running.
        self.history = History(d.workflow_id, d.steps)
        self.conn = conn
        self.park_after = park_after
        # How long a request is resent while the server answers UNAVAILABLE.
        self.patience = patience
        self.cancelled = False
        # Set once this worker let go of the run (see `drop`); for good.
        self.dropped = False
        # Replaying offline (a `Replayer`): a call the history does not record ends the run
        # with `HistoryEnded` instead of going live, and nothing waits.
        self.offline = False
        # Set when the server says a wait may be over (like a permit: a wakeup that arrives
        # before the wait starts is not lost), on cancel and on drop.
        self.wakeup = asyncio.Event()
        # Receives the server completed itself (a send found them waiting) and pushed with the
        # wakeup, by step position.
        self.delivered: dict[int, types_pb2.Payload] = {}
        self.records = Records(self.ask, check_recorded)
        self.task: asyncio.Task[None] | None = None
        # Set once the session granted back the credit this run's dispatch spent (see
        # `Session._release`): when the run ended, or when a newer dispatch replaced it.
        self.credit_returned = False

    @property
    def limits(self) -> Limits:
        """What the server takes on this run's stream."""
        return self.conn.limits

    def drop(self) -> None:
        """Lets go of the run without finishing it: from now on nothing is sent for it, and the
        server dispatches it again (after a reconnect it takes back what the old stream held;
        on the same stream the next heartbeat no longer lists it)."""
        self.dropped = True
        self.wakeup.set()

    def check_dropped(self) -> None:
        if self.dropped:
            raise Dropped(f"workflow {self.workflow_id} was let go by this worker")

    def live(self, step_id: int) -> None:
        """A call at `step_id` is about to go live (ask the server, run a step's function, read
        the clock, wait): refused when replaying offline, where the history ends here."""
        if self.offline:
            raise HistoryEnded(step_id)

    async def ask(self, msg: worker_pb2.WorkerMessage) -> worker_pb2.Reply:
        """Sends a request for this run and returns the answer, resending it while the server
        answers UNAVAILABLE. Past the worker's patience, or if the stream breaks before the
        answer, the run is dropped: `Dropped` (or `Disconnected`) is raised, now and on every
        later request. Offline, nothing is sent: every request and step record goes through
        here, so this one check keeps a replay off the wire."""
        self.check_dropped()
        self.live(step_of(msg))
        try:
            # Checked before every resend too: a run let go while the server answered
            # UNAVAILABLE (dropped, or replaced by a newer dispatch) sends nothing more.
            reply = await _resend.request(self.conn, msg, self.patience, self.check_dropped)
        except Disconnected:
            self.drop()
            raise
        except _resend.OutOfPatience as e:
            self.drop()
            raise Dropped(f"the server stayed unavailable: {e}") from None
        # Another branch of the workflow may have dropped it meanwhile: this answer is not used.
        self.check_dropped()
        return reply


def step_of(msg: worker_pb2.WorkerMessage) -> int:
    """The step position a request is for (every request a run sends names one; 0 for any
    other message)."""
    kind = msg.WhichOneof("kind")
    return int(getattr(getattr(msg, kind), "step_id", 0)) if kind else 0
