"""The Python part of the polyglot example: a worker with two workflows.

- `combine` (input: a text) calls two remote steps by name — `shout`, served by the TypeScript
  worker, and `reverse`, served by the Go worker — and returns both results. It starts both
  calls before waiting for either, so they run at once; each result is recorded as this
  workflow's step, and a replay reads it back instead of calling again.
- `countdown` (input: N) writes N, N-1, ..., 1 to its stream `countdown`, a durable sleep apart,
  closes the stream and returns "liftoff". The TypeScript client follows the stream live.

Run it with the SDK's venv (`make -C sdk-clients/python deps`, which also installs the
OpenTelemetry SDK and its OTLP gRPC exporter):

    WAYMARK_SERVER=127.0.0.1:7450 sdk-clients/python/.venv/bin/python sdk-clients/examples/polyglot/python/worker.py

Tracing: with `OTEL_EXPORTER_OTLP_ENDPOINT` set (`http://127.0.0.1:4317`, say), the worker sends
its spans (contract/tracing.md) over OTLP/gRPC there, as service `polyglot-python`. Each span is
exported as it ends, so a worker killed with SIGKILL has sent every span it finished; SIGTERM
stops it cleanly (ending the spans still open, which are sent too). Without the variable nothing
is installed and the worker runs as before.
"""

import asyncio
import logging
import os
import signal
from collections.abc import Callable

from waymark import Worker, WorkflowContext

APP = "polyglot-python"

worker = Worker(app_name=APP, app_version="1")  # server: WAYMARK_SERVER
log = logging.getLogger(APP)


@worker.workflow("combine")
async def combine(ctx: WorkflowContext, text: str) -> dict[str, str]:
    shout = await ctx.start_step("shout", text)  # TypeScript
    reverse = await ctx.start_step("reverse", text)  # Go
    return {
        "shout": await ctx.step_result(shout),
        "reverse": await ctx.step_result(reverse),
    }


@worker.workflow("countdown")
async def countdown(ctx: WorkflowContext, n: int) -> str:
    for i in range(n, 0, -1):
        await ctx.write_stream("countdown", i)
        await ctx.sleep(0.5)  # so a reader sees the values arrive one by one
    await ctx.close_stream("countdown")
    return "liftoff"


def install_tracing() -> Callable[[], None] | None:
    """With OTEL_EXPORTER_OTLP_ENDPOINT set, sets up the OpenTelemetry SDK to export every span
    over OTLP/gRPC as it ends, and returns what flushes and closes it; else None."""
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if not endpoint:
        return None
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    # The exporter reads the endpoint itself; one given as host:port (no scheme) is taken as
    # plaintext, like http://, unless OTEL_EXPORTER_OTLP_INSECURE says otherwise.
    plain = "://" not in endpoint and "OTEL_EXPORTER_OTLP_INSECURE" not in os.environ
    exporter = OTLPSpanExporter(insecure=True) if plain else OTLPSpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": APP}))
    # Synchronous: a span is sent when it ends, so a worker killed outright loses none it ended.
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    log.info("exporting spans to %s over OTLP/gRPC", endpoint)
    return provider.shutdown


async def main() -> None:
    shutdown = install_tracing()
    if shutdown is None:
        await worker.run()
        return
    # SIGTERM and SIGINT stop the worker (its open spans end), then the exporter is flushed.
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.stop)
    try:
        await worker.run()
    finally:
        shutdown()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    asyncio.run(main())
