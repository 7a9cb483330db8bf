"""What the tracing tests share: one in-memory exporter behind the global tracer provider (a
process sets that provider once), and ways to read the spans it holds."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_exporter = InMemorySpanExporter()
_installed = False


def exporter() -> InMemorySpanExporter:
    """The exporter every span this process ends goes to, once it is installed (here)."""
    global _installed
    if not _installed:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
        trace.set_tracer_provider(provider)
        _installed = True
    return _exporter


def tracer() -> trace.Tracer:
    exporter()
    return trace.get_tracer("waymark-tests")


@contextlib.contextmanager
def w3c_propagation() -> Iterator[None]:
    """The client injects the caller's span with the global propagator (contract/tracing.md),
    which OTEL_PROPAGATORS in the environment can make one that writes no `traceparent`. W3C
    Trace Context within the block, whatever the environment says."""
    previous = propagate.get_global_textmap()
    propagate.set_global_textmap(TraceContextTextMapPropagator())
    try:
        yield
    finally:
        propagate.set_global_textmap(previous)


def of_workflow(workflow_id: str) -> list[ReadableSpan]:
    """The ended spans that name `workflow_id`."""
    return [
        s
        for s in _exporter.get_finished_spans()
        if (s.attributes or {}).get("waymark.workflow.id") == workflow_id
    ]


def named(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    """The one span called `name` among `spans`."""
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, f"expected one span {name!r}, got {[s.name for s in spans]}"
    return found[0]


def traceparent(trace_id: int, span_id: int) -> str:
    return f"00-{trace_id:032x}-{span_id:016x}-01"


def ids(tp: str) -> tuple[int, int]:
    """The trace id and span id a traceparent names."""
    _, trace_id, span_id, _ = tp.split("-")
    return int(trace_id, 16), int(span_id, 16)
