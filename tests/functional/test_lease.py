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

    @staticmethod
    def _at_once(project: Any, store_schema: str, prepare: Any, act: Any) -> List[Any]:
        """act(i, store, prepared) on two connections at once, each after its own
        prepare(store); what each returned or raised."""
        adapter = project.adapter
        results: List[Any] = [None, None]
        barrier = threading.Barrier(2)

        def contender(i: int) -> None:
            with adapter.connection_named(f"race_{i}"):
                store = StateStore(store_schema, adapter._fetch_dicts, adapter._run_sql)
                prepared = prepare(store)
                barrier.wait()
                try:
                    results[i] = act(i, store, prepared)
                except Exception as exc:  # noqa: BLE001 - recorded and asserted by the caller
                    results[i] = exc

        threads = [threading.Thread(target=contender, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results

    def _race(self, project: Any, store_schema: str, model_id: str, seen_of: Any) -> List[Any]:
        now = datetime(2030, 1, 1)
        def take(i: int, store: StateStore, seen: Any) -> bool:
            return store.take_lease(model_id=model_id, relation="x", seen=seen, run_id=f"run{i}",
                                    holder=f"t{i}", now=now, until=now + timedelta(hours=1),
                                    plan={"p": i})

        return self._at_once(project, store_schema, seen_of, take)

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

    def test_the_end_of_run_state_write_keeps_leases_newer_rows_and_other_models(self, project):
        """upsert(), one write of the whole state table: a new model gets a row, a failed
        refresh records only its outcome, an older refresh changes nothing, a newer one takes
        the row but a live lease another run holds, and rows it does not name stay as they are."""
        schema = f"{project.test_schema}_upsert"
        now = datetime(2030, 1, 1, 12)
        with project.adapter.connection_named("upsert"):
            store = StateStore(schema, project.adapter._fetch_dicts, project.adapter._run_sql)
            store.ensure()
            project.adapter._run_sql(
                f"INSERT INTO {store.state} (model_id, relation, phase, fingerprint, plan, "
                f"run_id, lease_holder, lease_until, chunks_total, chunks_done, refresh, "
                f"last_outcome) VALUES "
                f"('m.old', 'x.old', 'idle', 'f5', NULL, 'r5', NULL, NULL, 1, 1, 5, 'success'), "
                f"('m.live', 'x.live', 'refreshing', 'f1', 'p', 'r1', 'other', "
                f"timestamp'2030-01-01 13:00:00', 3, 1, 1, 'success'), "
                f"('m.gone', 'x.gone', 'refreshing', 'f1', 'p', 'r1', 'other', "
                f"timestamp'2030-01-01 11:00:00', 3, 1, 1, 'success'), "
                f"('m.fail', 'x.fail', 'idle', 'f1', NULL, 'r1', NULL, NULL, 1, 1, 1, 'success'), "
                f"('m.other', 'x.other', 'idle', 'f9', NULL, 'r9', NULL, NULL, 1, 1, 9, 'success')")

            def ok(model_id: str, refresh: int) -> dict:
                return {"model_id": model_id, "relation": f"x.{model_id[2:]}", "ok": True,
                        "fingerprint": f"new{refresh}", "consumed": "{}", "run_id": f"n{refresh}",
                        "target_version": refresh, "target_committed_at": now, "refresh": refresh,
                        "last_refresh_at": now, "last_action": "replay", "last_outcome": "success",
                        "chunks_total": 2, "staged_rows": 7, "model_sql": "select 1", "now": now}

            store.upsert([ok("m.old", 4), ok("m.live", 2), ok("m.gone", 2), ok("m.new", 1),
                          {"model_id": "m.fail", "relation": "x.fail", "ok": False,
                           "last_outcome": "error: boom", "now": now}])
            rows = {r["model_id"]: r for r in project.adapter._fetch_dicts(
                f"SELECT * FROM {store.state} WHERE model_id LIKE 'm.%'")}
        assert sorted(rows) == ["m.fail", "m.gone", "m.live", "m.new", "m.old", "m.other"]
        assert (rows["m.old"]["refresh"], rows["m.old"]["fingerprint"]) == (5, "f5")
        live = rows["m.live"]
        assert (live["refresh"], live["fingerprint"], live["staged_rows"]) == (2, "new2", 7)
        assert (live["phase"], live["plan"], live["lease_holder"], live["run_id"],
                live["chunks_done"]) == ("refreshing", "p", "other", "r1", 1)
        gone = rows["m.gone"]
        assert (gone["phase"], gone["plan"], gone["lease_holder"], gone["lease_until"],
                gone["run_id"], gone["chunks_done"], gone["refresh"]) == (
            "idle", None, None, None, "n2", 2, 2)
        new = rows["m.new"]
        assert (new["phase"], new["refresh"], new["chunks_done"], new["updated_at"]) == (
            "idle", 1, 2, now)
        fail = rows["m.fail"]
        assert (fail["last_outcome"], fail["fingerprint"], fail["refresh"], fail["updated_at"]) == (
            "error: boom", "f1", 1, now)
        assert (rows["m.other"]["refresh"], rows["m.other"]["updated_at"]) == (9, None)

    def test_two_end_of_run_writes_at_once_both_land(self, project):
        """Two invocations' state writes race (each reads the whole table and rewrites it):
        where Delta fails the later commit it is written again, and neither model's row is
        lost or doubled."""
        schema = f"{project.test_schema}_upsert_race"
        now = datetime(2030, 1, 1, 12)
        adapter = project.adapter
        with adapter.connection_named("setup"):
            StateStore(schema, adapter._fetch_dicts, adapter._run_sql).ensure()
        for trial in range(TRIALS):
            def write(i: int, store: StateStore, _: Any, trial: int = trial) -> None:
                store.upsert([{"model_id": f"m.t{trial}.w{i}", "relation": "x", "ok": True,
                               "refresh": 1, "run_id": f"r{i}", "now": now}])

            assert self._at_once(project, schema, lambda store: None, write) == [None, None]
        with adapter.connection_named("verify"):
            rows = adapter._fetch_dicts(f"SELECT model_id FROM {schema}.batch_refresh_state")
        assert sorted(r["model_id"] for r in rows) == sorted(
            f"m.t{t}.w{i}" for t in range(TRIALS) for i in range(2))
