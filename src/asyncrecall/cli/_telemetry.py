"""The command line's OpenTelemetry: providers and exporters when asked, flushed on exit.

The library only reports to the global providers (``asyncrecall._telemetry``); ``run``,
``chat`` and ``mcp`` set them up here, from the SDK and its exporters (the ``otel``
extra), when

- ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT`` / ``..._METRICS_ENDPOINT``)
  is set: traces and metrics go there over OTLP/HTTP (the signal whose endpoint is set);
  without the extra, one warning line and the command runs without;
- the ``otel`` setting is true (``ASYNCRECALL_OTEL=1``, ``otel = true``): as above, to
  the standard default endpoint when none is set; without the extra, one line and exit 2;
- ``mcp --http`` serves: its metrics on ``/metrics`` in the Prometheus text format
  (:func:`metrics_route`, which any Starlette app can mount), the OTLP export besides
  when asked as above.

``otel = false`` turns all of it off. ``OTEL_SDK_DISABLED=true``, and
``OTEL_TRACES_EXPORTER``/``OTEL_METRICS_EXPORTER`` set to ``none``, are honoured. On exit
what is buffered is exported, within :data:`FLUSH_SECONDS` (an endpoint that does not
answer never holds the exit longer).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from asyncrecall._exceptions import ConfigError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from asyncrecall.cli._settings import Settings

__all__ = ["FLUSH_SECONDS", "METRICS_PATH", "Telemetry", "metrics_route", "telemetry_for"]

#: The most the exit waits for the last spans and metrics to be exported.
FLUSH_SECONDS: Final = 2.0
#: Where ``mcp --http`` serves its Prometheus metrics.
METRICS_PATH: Final = "/metrics"
_EXTRA: Final = "pip install 'asyncrecall[otel]'"
_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"


@dataclass
class Telemetry:
    """The providers this process set up; :meth:`shutdown` exports what is left."""

    shutdowns: list[Callable[[], object]] = field(default_factory=list)
    #: Metrics are served on ``/metrics`` (a Prometheus reader is registered).
    prometheus: bool = False

    def shutdown(self, timeout: float = FLUSH_SECONDS) -> None:
        """Export what is buffered and stop, in a daemon thread waited for at most
        ``timeout`` seconds: the exit never waits longer for an endpoint."""
        steps, self.shutdowns = self.shutdowns, []
        if not steps:
            return

        def run() -> None:
            for step in steps:
                with contextlib.suppress(Exception):  # the exporter logs its own failure
                    step()

        worker = threading.Thread(target=run, name="asyncrecall-otel-flush", daemon=True)
        worker.start()
        worker.join(timeout)


def _wanted(variable: str) -> bool:
    return bool(os.environ.get(variable, "").strip())


def _exporter_off(signal: str) -> bool:
    return os.environ.get(f"OTEL_{signal}_EXPORTER", "").strip().lower() == "none"


@contextlib.contextmanager
def telemetry_for(settings: Settings, *, prometheus: bool = False) -> Iterator[Telemetry | None]:
    """The command's OpenTelemetry set up as the settings and the environment ask (see
    the module's docstring), shut down on leaving, however it is left."""
    telemetry = configure(settings, prometheus=prometheus)
    try:
        yield telemetry
    finally:
        if telemetry is not None:
            telemetry.shutdown()


def configure(settings: Settings, *, prometheus: bool = False) -> Telemetry | None:
    """Set the global tracer and meter providers when asked; ``None`` when not."""
    explicit = settings.otel
    if explicit is False or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    every = explicit is True or _wanted(_ENDPOINT)
    traces = (every or _wanted(f"{_ENDPOINT[:-8]}TRACES_ENDPOINT")) and not _exporter_off("TRACES")
    metrics = (every or _wanted(f"{_ENDPOINT[:-8]}METRICS_ENDPOINT")) and not _exporter_off(
        "METRICS"
    )
    if not (traces or metrics or prometheus):
        return None
    try:
        return _set_up(traces=traces, metrics=metrics, prometheus=prometheus)
    except ImportError as exc:
        if explicit is True:
            raise ConfigError(
                f"otel is on but the OpenTelemetry SDK is missing: {_EXTRA} ({exc})"
            ) from exc
        if traces or metrics:  # asked by the environment: say so once, run without
            sys.stderr.write(
                f"asyncrecall: {_ENDPOINT} is set but the OpenTelemetry SDK is missing; "
                f"no traces or metrics are sent ({_EXTRA})\n"
            )
        return None


def _set_up(*, traces: bool, metrics: bool, prometheus: bool) -> Telemetry:
    from opentelemetry import metrics as metrics_api
    from opentelemetry import trace
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    readers: list[Any] = []
    if prometheus:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader

        readers.append(PrometheusMetricReader())
    if metrics:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    named = {} if _wanted("OTEL_SERVICE_NAME") else {SERVICE_NAME: "asyncrecall"}
    resource = Resource.create(named)
    telemetry = Telemetry(prometheus=prometheus)
    if traces:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(tracer_provider)
        telemetry.shutdowns.append(tracer_provider.shutdown)
    if readers:
        from opentelemetry.sdk.metrics import MeterProvider

        meter_provider = MeterProvider(
            resource=resource, metric_readers=readers, shutdown_on_exit=False
        )
        metrics_api.set_meter_provider(meter_provider)
        telemetry.shutdowns.append(meter_provider.shutdown)
    return telemetry


async def metrics_endpoint(request: Request) -> Response:
    """This process's metrics in the Prometheus text format (``prometheus_client``'s
    registry, which the Prometheus reader of :func:`telemetry_for` fills)."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
    from starlette.responses import Response

    del request
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


def metrics_route(path: str = METRICS_PATH) -> Route:
    """A Starlette route serving :func:`metrics_endpoint` at ``path`` (``GET``), for any
    ASGI app of the command line to mount (``mcp --http``, the console)."""
    from starlette.routing import Route

    return Route(path, endpoint=metrics_endpoint, methods=["GET"], name="metrics")


@contextlib.contextmanager
def query_span(model: str | None) -> Iterator[Callable[[str | None], None]]:
    """One user query of ``run`` or ``chat`` as a GenAI ``invoke_agent asyncrecall`` span,
    current while the query runs (its recall's span nests under it); yields a function
    to call with the query's error message (``None``: it answered). Nothing while
    OpenTelemetry is off."""
    from asyncrecall import _telemetry

    telemetry = _telemetry.current()
    if telemetry is None:
        yield lambda error: None
        return
    from opentelemetry.trace import Status, StatusCode

    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "asyncrecall"}
    if model:
        attributes["gen_ai.request.model"] = model
    with telemetry.tracer.start_as_current_span(
        "invoke_agent asyncrecall", attributes=attributes
    ) as span:

        def ended(error: str | None) -> None:
            if error is not None:
                span.set_attribute("error.type", "query_failed")
                span.set_status(Status(StatusCode.ERROR, error[:200]))

        yield ended
