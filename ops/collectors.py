"""The metrics read at scrape time: the database's and the replicas' (SPEC §16, §16.1)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from core import replicas
from ledger import log_state
from ledger.selectors import log_stats
from tasks.health import evaluation_lag, tasks_overdue, tasks_per_status

# Seconds after the deadline; SPEC §4.3 promises at most 60.
LAG_BOUNDS = (1.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 300.0, 900.0)


class DatabaseCollector(Collector):
    def collect(self) -> Iterator:
        tasks = GaugeMetricFamily("cairn_tasks", "Tasks per status.", labels=["state"])
        for status, count in tasks_per_status().items():
            tasks.add_metric([status], count)
        yield tasks
        yield GaugeMetricFamily(
            "cairn_tasks_overdue",
            "Open tasks past their deadline (the worker keeps this at zero within a minute).",
            value=tasks_overdue(),
        )
        buckets, seconds = evaluation_lag(LAG_BOUNDS)
        yield HistogramMetricFamily(
            "cairn_evaluation_lag_seconds",
            "Seconds from a task's deadline to its evaluation.",
            buckets=buckets,
            sum_value=seconds,
        )
        entries, sequencer_lag = log_stats()
        yield GaugeMetricFamily(
            "cairn_log_entries", "Entries in the transparency log's tree.", value=entries
        )
        yield GaugeMetricFamily(
            "cairn_log_sequencer_lag_seconds",
            "How long the oldest entry not yet in the log has waited (SPEC §15.3: at most 60 s).",
            value=sequencer_lag,
        )
        yield GaugeMetricFamily(
            "cairn_log_rolled_back",
            "1 while the database's log does not extend a tree the site signed or a witness "
            "holds (SPEC §16.2): nothing is signed and writes are refused.",
            value=0 if log_state.rollback_found() is None else 1,
        )
        refusals = CounterMetricFamily(
            "cairn_log_witness_refusals",
            "Checkpoints a witness refused to cosign.",
            labels=["witness"],
        )
        for witness, count in sorted(log_state.witness_refusals().items()):
            refusals.add_metric([witness], count)
        yield refusals


class ReplicaCollector(Collector):
    def collect(self) -> Iterator:
        if not replicas.configured():
            return
        serving = GaugeMetricFamily(
            "cairn_replica_serving",
            "1 while the replica takes public reads; 0 while it is skipped (down, behind, or not a "
            "replica).",
            labels=["replica"],
        )
        lag = GaugeMetricFamily(
            "cairn_replica_lag_seconds",
            "How far the replica is behind the primary, as last checked.",
            labels=["replica"],
        )
        for state in replicas.states():
            serving.add_metric([state.alias], 1.0 if state.serving else 0.0)
            if state.lag_s is not None:
                lag.add_metric([state.alias], state.lag_s)
        yield serving
        yield lag
