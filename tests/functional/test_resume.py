"""A Spark error mid-refresh leaves the state resumable; the next run resumes exactly once."""

from __future__ import annotations

import json

import pytest

from dbt.tests.util import run_dbt_and_capture

from tests.functional.helpers import (
    actions,
    assert_contract,
    rows,
    run_fails,
    run_ok,
    sources_yml,
    state,
)

SOURCES = sources_yml("src")
MODEL = """
{{ config(materialized='batch_refresh', unique_key='id', merge_chunk_rows=5) }}
select id, v * 10 as v10 from {{ source('raw', 'src') }} where v >= 0
"""


def built_then_20_updated(project):
    """`src` of 30 rows, every model built over it, then 20 of its rows updated (4 chunks of 5)."""
    src = f"{project.test_schema}.src"
    project.run_sql(f"create table {src} (id int, v int) using delta "
                    f"tblproperties (delta.enableChangeDataFeed = true)")
    project.run_sql(f"insert into {src} select cast(id as int), cast(id as int) from range(30)")
    run_ok(["run"])
    project.run_sql(f"update {src} set v = v + 100 where id < 20")


def target_commits(project):
    commits = []
    for entry in rows(project, f"describe history {project.test_schema}.chunky"):
        if entry.get("userMetadata"):
            commits.append(json.loads(entry["userMetadata"]))
    return commits


class TestErrorThenResume:
    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": SOURCES, "chunky.sql": MODEL}

    def test_error_mid_merge_then_resume(self, project, monkeypatch):
        built_then_20_updated(project)

        # a Spark-like error after the first of four chunks committed
        monkeypatch.setenv("BATCH_REFRESH_FAIL_AT", "after_chunk:1")
        monkeypatch.setenv("BATCH_REFRESH_FAIL_MODE", "error")
        output = run_fails(["run"])
        assert "injected fault at fail point 'after_chunk:1'" in output
        assert "the next `dbt run` resumes it" in output
        row = state(project, "chunky")
        assert row["phase"] == "merging" and row["chunks_total"] == 4 and row["chunks_done"] == 1
        plan_id = json.loads(row["plan"])["plan_id"]

        status = run_ok(["run-operation", "batch_refresh_status"])
        assert status is not None

        # a live lease (another run still working) is refused by unlock unless forced
        project.run_sql(f"update {project.test_schema}_batch_refresh.batch_refresh_state "
                        f"set lease_until = timestamp'2999-01-01 00:00:00'")
        monkeypatch.delenv("BATCH_REFRESH_FAIL_AT")
        output = run_fails(["run"])
        assert "holds the lease" in output and "batch_refresh_unlock" in output
        _, refused = run_dbt_and_capture(["run-operation", "batch_refresh_unlock", "--args", "{model: chunky}"])
        assert "refusing" in refused
        _, cleared = run_dbt_and_capture(
            ["run-operation", "batch_refresh_unlock", "--args", "{model: chunky, force: true}"])
        assert "lease cleared" in cleared and "resumes" in cleared

        # the next run resumes the same plan: the remaining chunks, each exactly once
        results = run_ok(["run"])
        assert results[0].adapter_response["resumed"] is True
        assert results[0].adapter_response["run_id"] == plan_id
        assert state(project, "chunky")["phase"] == "idle"
        assert_contract(project, "chunky")
        chunks = [c["chunk"] for c in target_commits(project) if c["batch_refresh_plan"] == plan_id]
        assert sorted(chunks) == [1, 2, 3, 4]
        assert actions(project, "chunky") == ["backfill", "replay"]


UPSTREAM = """
{{ config(materialized='batch_refresh') }}
select id, max(v) as v from {{ source('raw', 'src') }} group by id
"""
# No key of its own: `id`, through the key its upstream's GROUP BY proves and records.
DOWNSTREAM = """
{{ config(materialized='batch_refresh', merge_chunk_rows=5) }}
select id, v * 10 as v10 from {{ ref('grouped') }} where v >= 0
"""


class TestResumeThroughAnUpstreamKey:
    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": SOURCES, "grouped.sql": UPSTREAM, "keyed_down.sql": DOWNSTREAM}

    def test_an_interrupted_refresh_resumes_with_the_key_it_planned(self, project, monkeypatch):
        """A model keyed through its upstream model's recorded key, interrupted after its
        first chunk, resumes with that key (its upstreams are not read on a resume)."""
        built_then_20_updated(project)
        run_ok(["run", "--select", "grouped"])
        monkeypatch.setenv("BATCH_REFRESH_FAIL_AT", "after_chunk:1")
        monkeypatch.setenv("BATCH_REFRESH_FAIL_MODE", "error")
        output = run_fails(["run", "--select", "keyed_down"])
        assert "injected fault at fail point 'after_chunk:1'" in output
        row = state(project, "keyed_down")
        assert row["phase"] == "merging" and row["chunks_total"] == 4 and row["chunks_done"] == 1
        monkeypatch.delenv("BATCH_REFRESH_FAIL_AT")
        results = run_ok(["run", "--select", "keyed_down"])
        assert results[0].adapter_response["resumed"] is True
        assert state(project, "keyed_down")["phase"] == "idle"
        assert_contract(project, "keyed_down")
        assert actions(project, "keyed_down") == ["backfill", "replay"]


SINGLE = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, v * 10 as v10 from {{ source('raw', 'src') }} where v >= 0
"""


class TestStateWriteLostThenNothingToDo:
    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": SOURCES, "single.sql": SINGLE}

    @pytest.mark.parametrize("point", ["before_state_write", "before_history_write"])
    def test_the_next_run_records_the_refresh_it_finds(self, project, monkeypatch, point):
        """A run whose refresh committed but whose end-of-run write failed, then a run with
        nothing to refresh: that run records the refresh from the target's log (the state row
        users, `status` and `explain` read, and the history row), not only the next refresh
        that writes."""
        src = f"{project.test_schema}.src"
        project.run_sql(f"create table if not exists {src} (id int, v int) using delta "
                        f"tblproperties (delta.enableChangeDataFeed = true)")
        if not rows(project, f"select 1 from {src} limit 1"):  # the class's first case
            project.run_sql(f"insert into {src} select cast(id as int), cast(id as int) from range(30)")
            run_ok(["run"])
        expected = actions(project, "single") + ["replay"]
        project.run_sql(f"update {src} set v = v + 100 where id < 5")
        monkeypatch.setenv("BATCH_REFRESH_FAIL_AT", point)
        monkeypatch.setenv("BATCH_REFRESH_FAIL_MODE", "error")
        assert run_ok(["run"])[0].adapter_response["action"] == "replay"
        monkeypatch.delenv("BATCH_REFRESH_FAIL_AT")
        assert run_ok(["run"])[0].adapter_response["action"] == "noop"
        assert_contract(project, "single")  # against the versions the state row records
        assert actions(project, "single") == expected
        assert run_ok(["run"])[0].adapter_response["action"] == "noop"
        assert actions(project, "single") == expected  # recorded once
