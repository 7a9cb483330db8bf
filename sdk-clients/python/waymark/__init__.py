"""Waymark for Python: a worker SDK and a client for the Waymark durable-execution server.

from waymark import Client, Worker, WorkflowContext
"""

from .bulk import BulkAction, BulkOutcome, WorkflowFilter
from .client import Client, Page, StartedAndSent, WorkflowHandle
from .errors import (
    ChildWorkflowFailed,
    ContinueAsNew,
    Disconnected,
    Dropped,
    Fenced,
    HistoryEnded,
    NonDeterminismError,
    Parked,
    PayloadTooLarge,
    RpcError,
    StepFailed,
    UnavailableError,
    WaymarkError,
    WorkflowFailed,
    WorkflowInterrupted,
)
from .queues import KEEP, Queue, Queues, RateLimit
from .replay import Replayed, Replayer
from .retry import RetryPolicy
from .schedules import Schedule, ScheduleRun, Schedules
from .types import Event, EventValue, Failure, Message, Step, StreamEntry, Workflow, WorkflowStatus
from .worker import StepHandle, Update, WaitTarget, Worker, WorkflowContext

__version__ = "0.1.0"

__all__ = [
    "KEEP",
    "BulkAction",
    "BulkOutcome",
    "ChildWorkflowFailed",
    "Client",
    "ContinueAsNew",
    "Disconnected",
    "Dropped",
    "Event",
    "EventValue",
    "Failure",
    "Fenced",
    "HistoryEnded",
    "Message",
    "NonDeterminismError",
    "Page",
    "Parked",
    "PayloadTooLarge",
    "Queue",
    "Queues",
    "RateLimit",
    "Replayed",
    "Replayer",
    "RetryPolicy",
    "RpcError",
    "Schedule",
    "ScheduleRun",
    "Schedules",
    "StartedAndSent",
    "Step",
    "StepFailed",
    "StepHandle",
    "StreamEntry",
    "UnavailableError",
    "Update",
    "WaitTarget",
    "WaymarkError",
    "Worker",
    "Workflow",
    "WorkflowContext",
    "WorkflowFailed",
    "WorkflowFilter",
    "WorkflowHandle",
    "WorkflowInterrupted",
    "WorkflowStatus",
]
