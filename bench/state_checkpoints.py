"""The end-of-run write of the state and history tables against their Delta checkpoint interval.

Each round is what a `dbt run` of `models` batch_refresh models writes after its last node
(engine/record.py's Recorder.flush, as dbt runs it): the state read, the history INSERT, the
state write (a MERGE before session 63, an INSERT OVERWRITE since). Delta writes a checkpoint of a table every `delta.checkpointInterval` commits (10 by
default) inside the commit that reaches it; between checkpoints every statement that needs the
table's file list replays the JSON commits since the last one. One schema per interval, the
rounds interleaved (the order rotated each round), in one local session with the embedded
session's local-sized defaults (scratch_spark.py).

    python bench/state_checkpoints.py [rounds] [models] [intervals] [name]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import datetime, timedelta
from typing import Any, Dict, List, Mapping

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.scratch_spark import arguments, scratch  # noqa: E402
from dbt.adapters.spark_batch_refresh.engine.record import (  # noqa: E402
    Outcome, Recorder, history_row)
from dbt.adapters.spark_batch_refresh.plan.planner import UpstreamPoint  # noqa: E402
from dbt.adapters.spark_batch_refresh.storage.commit_log import RefreshCommit  # noqa: E402
from dbt.adapters.spark_batch_refresh.storage.state import StateStore  # noqa: E402


def _outcomes(schema: str, models: int, n: int, now: datetime) -> List[Outcome]:
    """Round n's refreshes of `models` models, as the engine hands them to the Recorder."""
    point = {"raw.src": UpstreamPoint(n, now)}
    outcomes = []
    for i in range(models):
        commit = RefreshCommit(
            model_id=f"model.p.m{i}", refresh=n + 1, plan_id=f"run-{n}", run_id=f"run-{n}",
            action="replay", mode="auto", reason="upstream moved", fingerprint="f" * 16,
            columns="id", pinned=point, consumed=point, version=n, timestamp=now,
            metrics={"numTargetRowsInserted": "100"})
        outcomes.append(Outcome(schema, commit.model_id, f"p.m{i}", now, commit=commit,
                                history=history_row(commit, None, now, now), sql="select 1"))
    return outcomes


def main() -> None:
    rounds, models, intervals, name = arguments(40, 8, "10,100", "state-checkpoints")
    chosen = [int(x) for x in intervals.split(",")]
    with scratch("br_ckpt_", "local[*]", 2) as spark:
        def fetch(sql: str) -> List[Mapping[str, Any]]:
            return [r.asDict() for r in spark.sql(sql).collect()]

        def run(sql: str) -> None:
            spark.sql(sql).collect()

        stores = {}
        for interval in chosen:
            store = StateStore(f"ckpt{interval}", fetch, run)
            store.ensure()
            for table in (store.state, store.history):
                run(f"ALTER TABLE {table} SET TBLPROPERTIES "
                    f"('delta.checkpointInterval' = '{interval}')")
            stores[interval] = store
        times: Dict[int, List[float]] = {i: [] for i in chosen}
        # A new process (each `dbt run` on the embedded session) reads the tables cold: the
        # newest checkpoint and every JSON commit since. Measured every 10 rounds, outside the
        # round times, with Delta's log cache dropped first.
        cold: Dict[int, List[float]] = {i: [] for i in chosen}
        delta_log = spark._jvm.org.apache.spark.sql.delta.DeltaLog
        start = datetime(2026, 1, 1)
        for n in range(rounds):
            order = chosen[n % len(chosen):] + chosen[:n % len(chosen)]
            for interval in order:
                recorder = Recorder()
                for outcome in _outcomes(stores[interval].schema, models, n,
                                         start + timedelta(minutes=n)):
                    recorder.add(outcome)
                began = time.perf_counter()
                recorder.flush(fetch, run)
                times[interval].append(time.perf_counter() - began)
            if n % 10 == 9:
                for interval in order:
                    delta_log.clearCache()
                    began = time.perf_counter()
                    stores[interval].refreshes(f"model.p.m{i}" for i in range(models))
                    cold[interval].append(time.perf_counter() - began)
        warm = min(5, rounds // 2)
        lines = [f"# {name}: state + history write per round, by checkpoint interval", "",
                 f"`python bench/state_checkpoints.py {rounds} {models} {intervals} {name}`; "
                 f"{models} models a round, {rounds} rounds, interleaved; the first "
                 f"{warm} rounds (warm-up) left out of the figures.", "",
                 "| interval | mean s | median s | max s | total s | cold read, median s | cold read, max s |",
                 "|---:|---:|---:|---:|---:|---:|---:|"]
        for interval in chosen:
            kept = times[interval][warm:]
            lines.append(f"| {interval} | {statistics.mean(kept):.2f} | "
                         f"{statistics.median(kept):.2f} | {max(kept):.2f} | {sum(kept):.1f} | "
                         f"{statistics.median(cold[interval]):.2f} | {max(cold[interval]):.2f} |")
        lines += ["", "Per round (s):", ""]
        for interval in chosen:
            lines.append(f"* {interval}: " + " ".join(f"{t:.2f}" for t in times[interval]))
        lines += ["", "Cold reads every 10 rounds (s):", ""]
        for interval in chosen:
            lines.append(f"* {interval}: " + " ".join(f"{t:.2f}" for t in cold[interval]))
        print("\n".join(lines))


if __name__ == "__main__":
    main()
