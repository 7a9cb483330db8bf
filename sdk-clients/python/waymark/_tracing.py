"""OpenTelemetry tracing, when the OpenTelemetry API is installed (the `otel` extra): the client
carries the caller's span in each unary call's metadata, and the worker opens the spans
contract/tracing.md names. The API is imported on first use; without it every function here
returns at once and nothing is sent or opened.

Spans are handled as `Any` here: the SDK does not depend on OpenTelemetry's types."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ._proto import types_pb2
from .errors import StepFailed

# The tracer's name, the same in every SDK.
TRACER = "waymark"


class _Otel:
    """The parts of the OpenTelemetry API this module uses, imported once."""

    def __init__(self) -> None:
        from opentelemetry import context, propagate, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.context = context
        self.propagate = propagate
        self.trace = trace
        # The wire's `TraceContext` is W3C Trace Context whatever the global propagator is.
        self.w3c = TraceContextTextMapPropagator()
        # A proxy until the application sets a tracer provider, then that provider's tracer.
        self.tracer = trace.get_tracer(TRACER)
        self.kinds = {
            "internal": trace.SpanKind.INTERNAL,
            "client": trace.SpanKind.CLIENT,
            "consumer": trace.SpanKind.CONSUMER,
            "producer": trace.SpanKind.PRODUCER,
        }
        self.error = trace.StatusCode.ERROR


_tried = False
_otel: _Otel | None = None


def otel() -> _Otel | None:
    """The OpenTelemetry API, or None when it is not installed (looked for once)."""
    global _tried, _otel
    if not _tried:
        _tried = True
        try:
            _otel = _Otel()
        except ImportError:
            _otel = None
    return _otel


def forget() -> None:
    """For tests: look for the API again on next use."""
    global _tried, _otel
    _tried, _otel = False, None


def outgoing_metadata() -> list[tuple[str, str]]:
    """The current span's context as gRPC metadata (`traceparent`, `tracestate`, and whatever
    else the global propagator writes); nothing when no span is active."""
    o = otel()
    if o is None or not o.trace.get_current_span().get_span_context().is_valid:
        return []
    carrier: dict[str, str] = {}
    o.propagate.inject(carrier)
    return [(k.lower(), v) for k, v in carrier.items() if v]


def remote_parent(tc: types_pb2.TraceContext) -> Any:
    """The context a span received over the wire starts in: the span `tc` names, or none (a
    new trace) when it is empty or malformed. Never the current context."""
    o = otel()
    if o is None:
        return None
    empty = o.context.Context()
    if not tc.traceparent:
        return empty
    carrier = {"traceparent": tc.traceparent}
    if tc.tracestate:
        carrier["tracestate"] = tc.tracestate
    return o.w3c.extract(carrier, context=empty)


def start(name: str, kind: str, parent: Any, attributes: dict[str, Any]) -> Any:
    """Starts a span in context `parent` (a context from `remote_parent`, or a span); None
    without OpenTelemetry."""
    o = otel()
    if o is None:
        return None
    if parent is not None and not isinstance(parent, o.context.Context):
        parent = o.trace.set_span_in_context(parent, o.context.Context())
    return o.tracer.start_span(name, context=parent, kind=o.kinds[kind], attributes=attributes)


def end(span: Any, error: str | None = None) -> None:
    """Ends `span` (None: nothing), with status ERROR and `error` as its message when given."""
    if span is None:
        return
    o = otel()
    if error is not None and o is not None:
        span.set_status(o.error, error)
    span.end()


def wire(span: Any) -> types_pb2.TraceContext | None:
    """`span`'s context as the wire's `TraceContext`; None without a span."""
    o = otel()
    if span is None or o is None:
        return None
    carrier: dict[str, str] = {}
    o.w3c.inject(carrier, context=o.trace.set_span_in_context(span, o.context.Context()))
    tc = carrier.get("traceparent", "")
    if not tc:
        return None
    return types_pb2.TraceContext(traceparent=tc, tracestate=carrier.get("tracestate", ""))


@contextlib.contextmanager
def current(span: Any) -> Iterator[None]:
    """Makes `span` the current span within the block (so what code there opens nests under
    it); nothing for None."""
    o = otel()
    if span is None or o is None:
        yield
        return
    token = o.context.attach(o.trace.set_span_in_context(span))
    try:
        yield
    finally:
        o.context.detach(token)


def error_message(e: BaseException) -> str:
    """A failure's message for a span's status: a step's as recorded, else the exception's."""
    if isinstance(e, StepFailed):
        return e.message
    return str(e) or type(e).__name__


def failed(e: BaseException) -> str | None:
    """The status message for a span an exception ends: an `Exception` failed it (ERROR); any
    other `BaseException` (cancelled, parked, dropped) interrupted it (UNSET: None)."""
    return error_message(e) if isinstance(e, Exception) else None


# What `RunTrace.op` gives a run without spans: no generator made per operation.
_NOTHING = contextlib.nullcontext(None)


class RunTrace:
    """The spans of one run of a workflow: the workflow's own, and the spans its operations
    opened that are still open. Whatever is open when the run ends ends with it. Without
    OpenTelemetry (or offline, in a `Replayer`) nothing is opened and every method returns at
    once."""

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        # The workflow span; None when none is open.
        self.span: Any = None
        self._open: dict[int, Any] = {}
        # `call` spans by step position: opened by the call, ended by its result.
        self.calls: dict[int, Any] = {}

    def begin(
        self,
        workflow_name: str,
        tc: types_pb2.TraceContext,
        epoch: int,
        replay: bool,
        recovery_attempts: int,
    ) -> None:
        if otel() is None:
            return
        self.span = start(
            f"workflow {workflow_name}",
            "consumer",
            remote_parent(tc),
            {
                "waymark.workflow.id": self.workflow_id,
                "waymark.workflow.name": workflow_name,
                "waymark.epoch": epoch,
                "waymark.replay": replay,
                "waymark.recovery_attempts": recovery_attempts,
            },
        )

    def finish(self, error: str | None) -> None:
        """The run ended: every span still open ends (status UNSET), then the workflow's
        (ERROR with `error`, the failure's message, when the workflow failed)."""
        for span in list(self._open.values()):
            end(span)
        self._open.clear()
        self.calls.clear()
        end(self.span, error)
        self.span = None

    def open(self, name: str, kind: str, step_id: int, **attributes: Any) -> Any:
        """Opens a span under the workflow span; None when the run has none."""
        if self.span is None:
            return None
        attributes = {"waymark.workflow.id": self.workflow_id, "waymark.step.id": step_id} | {
            k.replace("_", "."): v for k, v in attributes.items()
        }
        span = start(name, kind, self.span, attributes)
        self._open[id(span)] = span
        return span

    def close(self, span: Any, error: str | None = None) -> None:
        """Ends a span `open` opened, unless the run's end has ended it already."""
        if span is not None and self._open.pop(id(span), None) is not None:
            end(span, error)

    def op(
        self, name: str, kind: str, step_id: int, *, make_current: bool = False, **attributes: Any
    ) -> contextlib.AbstractContextManager[Any]:
        """A span over the block: ERROR when it raises an `Exception`, UNSET when the run is
        interrupted (a `BaseException`: cancelled, parked, dropped). Yields the span (None
        without one). Attribute names are given with `_` for `.`: `waymark_step_name`."""
        if self.span is None:
            return _NOTHING
        return self._op(self.open(name, kind, step_id, **attributes), make_current)

    @contextlib.contextmanager
    def _op(self, span: Any, make_current: bool) -> Iterator[Any]:
        try:
            if make_current:
                with current(span):
                    yield span
            else:
                yield span
        except BaseException as e:
            self.close(span, failed(e))
            raise
        finally:
            self.close(span)

    def open_call(self, step_id: int, name: str) -> Any:
        """Opens the `call` span of the remote step at `step_id` (ended by `end_call`)."""
        span = self.open(f"call {name}", "client", step_id, waymark_step_name=name)
        if span is not None:
            self.calls[step_id] = span
        return span

    def end_call(self, step_id: int, error: str | None = None) -> None:
        span = self.calls.pop(step_id, None)
        if span is not None:
            self.close(span, error)
