"""The refresh lease under real concurrency: two connections race for the same model."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any, List

import pytest

from dbt.adapters.spark_batch_refresh.storage.state import StateStore

TRIALS = 4


class TestLeaseRace:
    @pytest.fixture(scope="class")
    def models(self):
        return {"placeholder.sql": "select 1 as id"}

    def _race(self, project: Any, store_schema: str, model_id: str, seen_of: Any) -> List[Any]:
        adapter = project.adapter
        results: List[Any] = [None, None]
        barrier = threading.Barrier(2)
        now = datetime(2030, 1, 1)

        def contender(i: int) -> None:
            with adapter.connection_named(f"race_{i}"):
                store = StateStore(store_schema, adapter._fetch_dicts, adapter._run_sql)
                seen = seen_of(store)
                barrier.wait()
                try:
                    results[i] = store.take_lease(
                        model_id=model_id, relation="x", seen=seen, run_id=f"run{i}",
                        holder=f"t{i}", now=now, until=now + timedelta(hours=1), plan={"p": i},
                    )
                except Exception as exc:  # noqa: BLE001 - recorded and asserted below
                    results[i] = exc

        threads = [threading.Thread(target=contender, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results

    def test_exactly_one_wins(self, project):
        schema = f"{project.test_schema}_leases"
        with project.adapter.connection_named("setup"):
            StateStore(schema, project.adapter._fetch_dicts, project.adapter._run_sql).ensure()
        outcomes = []
        for trial in range(TRIALS):
            model_id = f"model.race.m{trial}"
            # new model: both insert the first state row
            first = self._race(project, schema, model_id, lambda store: None)
            # idle model: both compare-and-set the same row they read
            with project.adapter.connection_named("reset"):
                project.adapter._run_sql(
                    f"UPDATE {schema}.batch_refresh_state SET phase = 'idle' WHERE model_id = '{model_id}'")
            second = self._race(project, schema, model_id, lambda store: store.read(model_id))
            for results in (first, second):
                assert all(isinstance(r, bool) for r in results), results
                assert sorted(results) == [False, True], results
                outcomes.append(results)
            with project.adapter.connection_named("verify"):
                rows = project.adapter._fetch_dicts(
                    f"select run_id from {schema}.batch_refresh_state where model_id = '{model_id}'")
            assert len(rows) == 1
        assert len(outcomes) == 2 * TRIALS

    def test_the_tables_checkpoint_every_hundredth_commit(self, project):
        """Each `dbt run` commits once to each table: Delta's default checkpoint every 10th
        commit made every 10th run's end-of-run write twice as slow (state_checkpoints.py)."""
        schema = f"{project.test_schema}_leases"
        with project.adapter.connection_named("props"):
            store = StateStore(schema, project.adapter._fetch_dicts, project.adapter._run_sql)
            store.ensure()
            for table in (store.state, store.history):
                rows = project.adapter._fetch_dicts(
                    f"SHOW TBLPROPERTIES {table} ('delta.checkpointInterval')")
                assert [r["value"] for r in rows] == ["100"], (table, rows)

    def test_a_run_that_lost_its_lease_is_told(self, project):
        """A lease that expired mid-merge and was taken over: the first run's progress write
        changes nothing and says so (ChunkedApply then stops with a lease error)."""
        schema = f"{project.test_schema}_leases"
        model_id = "model.race.lost"
        start = datetime(2030, 1, 1)
        with project.adapter.connection_named("lost"):
            store = StateStore(schema, project.adapter._fetch_dicts, project.adapter._run_sql)
            store.ensure()
            assert store.take_lease(model_id=model_id, relation="x", seen=None, run_id="first",
                                    holder="a", now=start, until=start + timedelta(minutes=1),
                                    plan={"p": 1}, chunks=3)
            assert store.chunk_done(model_id, "first", 1, start, start + timedelta(minutes=1))
            later = start + timedelta(minutes=5)  # past the lease: another run takes it over
            assert store.take_lease(model_id=model_id, relation="x", seen=store.read(model_id),
                                    run_id="second", holder="b", now=later,
                                    until=later + timedelta(minutes=1), plan={"p": 1}, chunks=3,
                                    keep_progress=True)
            assert store.chunk_done(model_id, "first", 2, later, later) is False
            row = store.read(model_id)
            assert (row.run_id, row.chunks_done) == ("second", 1)
