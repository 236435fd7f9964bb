"""OpenTelemetry traces and metrics of recall, side queries, extraction and the store.

asyncrecall is a library: it never configures OpenTelemetry, it reports to the global
tracer and meter providers the application set up (``opentelemetry.trace`` and
``opentelemetry.metrics``), so its spans nest under the caller's current span (a
Pydantic AI or OpenAI Agents run, a web request). The command line sets providers up
when asked (``cli._telemetry``). Span and metric names: ``docs/observability.md``.

**Off costs one check.** :func:`current` answers ``None`` unless a provider other than
the API's placeholder is set: while ``opentelemetry`` was never imported in the process,
that is one dictionary lookup, and nothing of OpenTelemetry is imported here. Every hook
of the recall's path asks once per user message and keeps the answer with the recall
(:class:`RecallTrace`, or ``None``), so the other steps test an attribute.

Only ``opentelemetry-api`` is used (the ``otel`` extra; frameworks such as Pydantic AI
bring it too): where it is not installed, telemetry stays off.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, Meter
    from opentelemetry.trace import Span, Tracer

    from asyncrecall.prefetch._events import EventBase

__all__ = [
    "DELIVERY_POINT",
    "INSTRUMENTATION",
    "RecallTrace",
    "SearchTrace",
    "Telemetry",
    "current",
]

#: The instrumentation scope's name (the tracer's and the meter's).
INSTRUMENTATION: Final = "asyncrecall"
#: The attribute naming where a recall's memory went (``user_query``, ``tool_result``,
#: ``search``) or ``none`` when it went nowhere.
DELIVERY_POINT: Final = "asyncrecall.delivery.point"
_REASON: Final = "asyncrecall.delivery.reason"
_STRATEGY: Final = "asyncrecall.recall.strategy"
#: Histogram buckets in seconds: recall's added latency is sub-millisecond when it works.
_LATENCY_BUCKETS: Final = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
)  # fmt: skip

_on: Telemetry | None = None


def current() -> Telemetry | None:
    """The instruments when the application configured OpenTelemetry, else ``None``.

    Cheap when off: without ``opentelemetry`` imported anywhere in the process, one
    lookup in ``sys.modules``; with it imported but no provider set, a look at the two
    global providers. Once a provider is seen the answer is kept (OpenTelemetry sets
    each global provider at most once)."""
    on = _on
    if on is not None:
        return on
    if "opentelemetry" not in sys.modules:
        return None
    return _probe()


def _probe() -> Telemetry | None:
    global _on
    try:
        from opentelemetry import metrics, trace
    except ImportError:  # a namespace package of something else
        return None
    tracer_provider = trace.get_tracer_provider()
    tracing = not isinstance(tracer_provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
    meter_provider = metrics.get_meter_provider()
    # The API's placeholder is private (``_ProxyMeterProvider``): told by its name.
    metering = not isinstance(meter_provider, metrics.NoOpMeterProvider) and not type(
        meter_provider
    ).__name__.startswith("_Proxy")
    if not (tracing or metering):
        return None
    from asyncrecall import __version__

    _on = Telemetry(
        trace.get_tracer(INSTRUMENTATION, __version__),
        metrics.get_meter(INSTRUMENTATION, __version__),
    )
    return _on


class Telemetry:
    """The tracer and the instruments (made once, when OpenTelemetry is first seen on)."""

    def __init__(self, tracer: Tracer, meter: Meter) -> None:
        self.tracer = tracer
        self.deliveries: Counter = meter.create_counter(
            "asyncrecall.recall.deliveries",
            unit="{recall}",
            description="Memory blocks delivered, by point (user_query, tool_result, "
            "search), and recalls that delivered nothing (point none, with a reason)",
        )
        self.added: Histogram = meter.create_histogram(
            "asyncrecall.recall.latency_added",
            unit="s",
            description="Time recall added before the request that carries the user's "
            "message (start, take and any wait), or a search's whole recall",
            explicit_bucket_boundaries_advisory=_LATENCY_BUCKETS,
        )
        self.duration: Histogram = meter.create_histogram(
            "asyncrecall.recall.duration",
            unit="s",
            description="From a recall's start to its settling (it runs in the background)",
            explicit_bucket_boundaries_advisory=_LATENCY_BUCKETS,
        )
        self.holds: Counter = meter.create_counter(
            "asyncrecall.memory.holds",
            unit="{memory}",
            description="Writes that left a memory held until the user confirms it",
        )
        self.confirms: Counter = meter.create_counter(
            "asyncrecall.memory.confirms",
            unit="{memory}",
            description="Memories the user confirmed (a hold lifted, a waiting change applied)",
        )
        self.store_duration: Histogram = meter.create_histogram(
            "asyncrecall.store.operation.duration",
            unit="s",
            description="Duration of a memory store operation",
            explicit_bucket_boundaries_advisory=_LATENCY_BUCKETS,
        )
        self.genai_duration: Histogram = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration (the side queries)",
        )
        self.genai_tokens: Histogram = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used (the side queries)",
        )

    # -- recall ---------------------------------------------------------------------

    def recall(self, prompt_id: str, started: float) -> RecallTrace:
        """A span for one user message's recall, under the caller's current span;
        ``started``: :func:`time.perf_counter` when the caller's start began."""
        span = self.tracer.start_span(
            "asyncrecall.recall", attributes={"asyncrecall.recall.prompt_id": prompt_id}
        )
        return RecallTrace(self, span, started)

    def skipped(self, reason: str) -> None:
        """No recall started for a user message (``memory_recall_skipped``)."""
        self.deliveries.add(1, {DELIVERY_POINT: "none", _REASON: reason})

    @contextlib.contextmanager
    def search(self, query_chars: int, limit: int) -> Iterator[SearchTrace]:
        """A recall a client waits for (the MCP server's ``search``): its whole time is
        latency added, and its answer is delivered at point ``search``."""
        with self.tracer.start_as_current_span(
            "asyncrecall.recall",
            attributes={
                "asyncrecall.recall.query_chars": query_chars,
                "asyncrecall.recall.limit": limit,
            },
        ) as span:
            found = SearchTrace(self, span)
            yield found
            found.end()

    # -- operations -----------------------------------------------------------------

    @contextlib.contextmanager
    def operation(self, name: str, attributes: Mapping[str, Any]) -> Iterator[Span]:
        """A span ``name`` for work of ours (extraction, consolidation), current inside."""
        with self.tracer.start_as_current_span(name, attributes=dict(attributes)) as span:
            yield span

    @contextlib.contextmanager
    def store_operation(self, operation: str, store: object) -> Iterator[Span]:
        """A span and a duration for one :class:`~asyncrecall.memory.Store` operation."""
        kind = type(store).__name__
        attributes = {"asyncrecall.store.operation": operation, "asyncrecall.store.kind": kind}
        began = time.perf_counter()
        error: str | None = None
        try:
            with self.tracer.start_as_current_span(
                f"asyncrecall.store.{operation}", attributes=attributes
            ) as span:
                yield span
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            if error is not None:
                attributes["error.type"] = error
            self.store_duration.record(time.perf_counter() - began, attributes)

    def stored(self, operation: str, result: object) -> None:
        """Count a hold (a write that left the memory held) or a confirm."""
        if operation == "confirm":
            self.confirms.add(1)
        elif operation in {"save_memory", "import_record", "import_records"}:
            for doc in result if isinstance(result, list) else (result,):
                if getattr(doc, "quarantined", False):
                    origin = str(getattr(doc, "origin", ""))
                    self.holds.add(1, {"asyncrecall.memory.origin": origin})

    # -- the side query (GenAI semantic conventions) -----------------------------------

    @contextlib.contextmanager
    def side_query(
        self, *, model: str, base_url: str, max_tokens: int, schema_name: str
    ) -> Iterator[Span]:
        """A GenAI client span ``chat {model}`` for one side query, current inside."""
        from opentelemetry.trace import SpanKind, Status, StatusCode

        parts = urlsplit(base_url)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model,
            "gen_ai.request.temperature": 0.0,
            "gen_ai.request.max_tokens": max_tokens,
            "gen_ai.output.type": "json",
            "asyncrecall.side_query.schema": schema_name,
        }
        if parts.hostname:
            attributes["server.address"] = parts.hostname
            attributes["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
        metric = {
            k: attributes[k]
            for k in ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model")
        }
        began = time.perf_counter()
        with self.tracer.start_as_current_span(
            f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes,
            record_exception=False, set_status_on_exception=False,
        ) as span:  # fmt: skip
            try:
                yield span
            except BaseException as exc:
                error = type(exc).__name__
                span.set_attribute("error.type", error)
                span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))
                metric["error.type"] = error
                raise
            finally:
                self.genai_duration.record(time.perf_counter() - began, metric)

    def completion(self, completion: Any, model: str) -> None:
        """What a side query's answer says of itself: response model, id, finish reasons
        and token usage, on the current side-query span and the token histogram."""
        from opentelemetry import trace

        if not isinstance(completion, Mapping):
            return
        span = trace.get_current_span()
        if isinstance(completion.get("model"), str):
            span.set_attribute("gen_ai.response.model", completion["model"])
        if isinstance(completion.get("id"), str):
            span.set_attribute("gen_ai.response.id", completion["id"])
        reasons = [
            str(c["finish_reason"])
            for c in completion.get("choices") or ()
            if isinstance(c, Mapping) and c.get("finish_reason")
        ]
        if reasons:
            span.set_attribute("gen_ai.response.finish_reasons", reasons)
        usage = completion.get("usage")
        if not isinstance(usage, Mapping):
            return
        base = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}
        for key, kind in (("prompt_tokens", "input"), ("completion_tokens", "output")):
            count = usage.get(key)
            if isinstance(count, int) and not isinstance(count, bool):
                span.set_attribute(f"gen_ai.usage.{kind}_tokens", count)
                self.genai_tokens.record(
                    count, {**base, "gen_ai.request.model": model, "gen_ai.token.type": kind}
                )


class RecallTrace:
    """One user message's recall as a span: opened by the prefetcher's start, given its
    events (the same as stream-json's), ended when the recall is used or dropped.

    Attributes (``docs/observability.md``): the prompt id; once settled the strategy,
    how many files were selected, whether it abstained and why; where its memory was
    delivered (``asyncrecall.delivery.point``) or why not; the latency it added before
    the request carrying the user's message."""

    def __init__(self, telemetry: Telemetry, span: Span, started: float) -> None:
        self.telemetry = telemetry
        self.span = span
        #: Seconds of the caller's time spent on recall before the first request.
        self.added = time.perf_counter() - started
        self.point: str | None = None
        self.strategy = "none"
        self.ended = False
        self._added_recorded = False

    @contextlib.contextmanager
    def current(self) -> Iterator[None]:
        """The recall's span as the current one: a task created inside (the side query)
        nests its spans under it."""
        from opentelemetry import trace

        with trace.use_span(self.span, end_on_exit=False):
            yield

    def settled(self, result: Any, recall_ms: float) -> None:
        """The recall finished (``result``: its :class:`~asyncrecall.memory.RecallResult`);
        nothing once the span ended (a recall cancelled when dropped settles after)."""
        if self.ended:
            return
        selected = len(result.selected)
        self.strategy = str(result.strategy)
        attributes: dict[str, Any] = {
            _STRATEGY: self.strategy,
            "asyncrecall.recall.selected": selected,
            "asyncrecall.recall.abstained": selected == 0,
            "asyncrecall.recall.settle_ms": round(recall_ms, 3),
        }
        if result.reason:
            attributes["asyncrecall.recall.reason"] = str(result.reason)
        if result.fallback_reason:
            attributes["asyncrecall.recall.fallback_reason"] = str(result.fallback_reason)
        self.span.set_attributes(attributes)
        self.span.add_event("settled", {"asyncrecall.recall.selected": selected})
        self.telemetry.duration.record(recall_ms / 1000.0, {_STRATEGY: self.strategy})

    def took(self, point: str, outcome: str, seconds: float) -> None:
        """A take at ``point`` (``outcome``: ``injected``, ``instant``, ``empty``,
        ``not_settled``); the first one ends the latency recall added."""
        self.span.add_event("take", {DELIVERY_POINT: point, "asyncrecall.take.outcome": outcome})
        if not self._added_recorded:
            self.added += seconds
            self._record_added(point)

    def _record_added(self, point: str) -> None:
        self._added_recorded = True
        self.span.set_attribute("asyncrecall.recall.latency_added_ms", round(self.added * 1000, 3))
        self.telemetry.added.record(self.added, {DELIVERY_POINT: point})

    def waited(self, seconds: float) -> None:
        """The caller waited for the recall before its first request (blocking modes)."""
        self.added += seconds

    def event(self, event: EventBase) -> None:
        """A prefetcher event of this recall, as a span event (and counted when it is a
        delivery)."""
        data = event.to_dict()
        kind = data.pop("type")
        attributes = {
            f"asyncrecall.{k}": v if not isinstance(v, list) else [str(i) for i in v]
            for k, v in data.items()
            if isinstance(v, str | int | float | bool | list)
        }
        self.span.add_event(kind, attributes)
        if kind == "memory_injected":
            point, strategy = str(data["point"]), str(data["strategy"])
            self.telemetry.deliveries.add(1, {DELIVERY_POINT: point, _STRATEGY: strategy})
            if self.point is None or strategy != "instant-lexical":
                self.point = point
            self.span.set_attribute("asyncrecall.recall.injected", len(data["paths"]))

    def end(self, reason: str | None = None) -> None:
        """The recall is used up or dropped (``reason``: the discard's, or why nothing
        was delivered)."""
        span = self.span
        self.ended = True
        if not self._added_recorded:  # dropped before any request (a blocking wait's end)
            self._record_added("none")
        point = self.point or "none"
        span.set_attribute(DELIVERY_POINT, point)
        if self.point is None:
            why = reason or "nothing_selected"
            span.set_attribute(_REASON, why)
            self.telemetry.deliveries.add(
                1, {DELIVERY_POINT: "none", _REASON: why, _STRATEGY: self.strategy}
            )
        span.end()


class SearchTrace:
    """A recall the caller waits for whole (see :meth:`Telemetry.search`)."""

    def __init__(self, telemetry: Telemetry, span: Span) -> None:
        self.telemetry = telemetry
        self.span = span
        self.began = time.perf_counter()
        self.selected = 0
        self.strategy = "none"

    def settled(self, result: Any) -> None:
        """The search's :class:`~asyncrecall.memory.RecallResult`."""
        self.selected = len(result.selected)
        self.strategy = str(result.strategy)
        self.span.set_attributes(
            {
                _STRATEGY: self.strategy,
                "asyncrecall.recall.selected": self.selected,
                "asyncrecall.recall.abstained": self.selected == 0,
            }
        )
        if result.reason:
            self.span.set_attribute("asyncrecall.recall.reason", str(result.reason))

    def end(self) -> None:
        elapsed = time.perf_counter() - self.began
        telemetry, span = self.telemetry, self.span
        point = "search" if self.selected else "none"
        span.set_attribute(DELIVERY_POINT, point)
        span.set_attribute("asyncrecall.recall.latency_added_ms", round(elapsed * 1000, 3))
        telemetry.added.record(elapsed, {DELIVERY_POINT: "search"})
        telemetry.duration.record(elapsed, {_STRATEGY: self.strategy})
        extra = {} if self.selected else {_REASON: "nothing_selected"}
        telemetry.deliveries.add(1, {DELIVERY_POINT: point, _STRATEGY: self.strategy, **extra})
