"""Prometheus metrics: requests by route and status, request latency, and per-stage latency
(embed, database, retrieve, generate, check). Each app has its own registry, so several apps in
one process (tests) never clash over metric names."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from pgcite import Answer, Replica, StageEvent

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "pgcite_http_requests_total", "HTTP requests by route template and status",
            ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram(
            "pgcite_http_request_duration_seconds", "HTTP request latency by route template",
            ["method", "route"], buckets=_BUCKETS, registry=self.registry)
        self.stages = Histogram(
            "pgcite_stage_duration_seconds", "Latency of one pipeline stage",
            ["stage"], buckets=_BUCKETS, registry=self.registry)
        self.outcomes = Counter(
            "pgcite_stage_outcomes_total", "Optional stages by outcome (applied, skipped, "
            "fallback): a rising fallback count means a model is failing or late",
            ["stage", "outcome"], registry=self.registry)
        self.routes = Counter(
            "pgcite_routes_total", "Routes the router chose (keyword, direct, decompose, hyde)",
            ["route"], registry=self.registry)
        self.answers = Counter(
            "pgcite_answers_total", "Answers by generator and outcome",
            ["generator", "abstained"], registry=self.registry)

    def watch_replicas(self, measure: Callable[[], list[Replica]],
                       served: Callable[[], Mapping[str, int]]) -> None:
        """Export each read replica's health and lag, measured at every scrape, and where
        reads went (``Client.replica_lag`` and ``Client.replicas.served``)."""
        self.registry.register(_ReplicaCollector(measure, served))

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def observe_stages(self, timings_ms: Mapping[str, float]) -> None:
        for stage, ms in timings_ms.items():
            if stage != "total":
                self.stages.labels(stage).observe(ms / 1000)

    def observe_outcomes(self, outcomes: Iterable[tuple[str, str]]) -> None:
        for stage, outcome in outcomes:
            self.outcomes.labels(stage, outcome).inc()

    def observe_routes(self, events: Iterable[StageEvent]) -> None:
        for event in events:
            if event.stage == "route" and event.outcome != "skipped":
                self.routes.labels(event.detail.split(" ", 1)[0]).inc()  # "keyword (heuristic)…"

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _ReplicaCollector:
    def __init__(self, measure: Callable[[], list[Replica]],
                 served: Callable[[], Mapping[str, int]]) -> None:
        self._measure, self._served = measure, served

    def collect(self) -> Iterator[Metric]:
        replicas = self._measure()
        up = GaugeMetricFamily("pgcite_replica_up", "1 while a read replica serves reads",
                               labels=["replica"])
        lag_bytes = GaugeMetricFamily(
            "pgcite_replica_lag_bytes", "WAL the replica has not replayed yet (primary's "
            "current LSN minus its replay LSN)", labels=["replica"])
        lag_s = GaugeMetricFamily(
            "pgcite_replica_lag_seconds", "Age of the last transaction a replica replayed, "
            "while it is behind (0 when caught up)", labels=["replica"])
        for replica in replicas:
            up.add_metric([replica.label], 1.0 if replica.healthy else 0.0)
            if replica.lag_bytes is not None:
                lag_bytes.add_metric([replica.label], float(replica.lag_bytes))
            if replica.lag_seconds is not None:
                lag_s.add_metric([replica.label], replica.lag_seconds)
        reads = CounterMetricFamily(
            "pgcite_reads", "Searches and answers by the node that served them (a replica, "
            "primary) and reads run again elsewhere (retried)", labels=["node"])
        for node, count in sorted(self._served().items()):
            reads.add_metric([node], float(count))
        yield from (up, lag_bytes, lag_s, reads)


_SELF_CHECK_STEPS = ("grade", "rewrite", "sufficiency", "external")


def answer_outcomes(answer: Answer) -> list[tuple[str, str]]:
    """The self-check steps of an answer's trace as (step, outcome) pairs."""
    pairs: list[tuple[str, str]] = []
    for event in answer.trace:
        if event.step in _SELF_CHECK_STEPS:
            outcome = event.detail.split(":", 1)[0]
            pairs.append((event.step, outcome if outcome in ("skipped", "fallback")
                          else "applied"))
    return pairs
