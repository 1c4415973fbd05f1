"""A model that renders run_started_at / invocation_id into audit columns compiles to new SQL on
every run; that is not a model change: it replays, and the rows a refresh writes carry that
refresh's values (as dbt's incremental models do), the others keep theirs."""

from __future__ import annotations

import pytest

from tests.functional.helpers import rows, run_ok, sources_yml

AUDITED = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, v, '{{ run_started_at }}' as loaded_at, '{{ invocation_id }}' as loaded_by
from {{ source('raw', 'src') }}
"""


class TestRunValues:
    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": sources_yml("src"), "audited.sql": AUDITED}

    def test_audit_columns_do_not_rebuild(self, project):
        src = f"{project.test_schema}.src"
        target = f"{project.test_schema}.audited"
        project.run_sql(f"create table {src} (id int, v int) using delta "
                        f"tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"insert into {src} values (1, 1), (2, 2), (3, 3)")
        (first,) = run_ok(["run"])
        assert first.adapter_response["action"] == "backfill"

        project.run_sql(f"update {src} set v = 20 where id = 2")
        (second,) = run_ok(["run"])
        assert second.adapter_response["action"] == "replay", second.adapter_response
        by_id = {r["id"]: r for r in rows(project, f"select * from {target}")}
        assert by_id[2]["v"] == 20
        # the replayed row carries this run's invocation, the untouched ones the backfill's
        assert by_id[2]["loaded_by"] != by_id[1]["loaded_by"] == by_id[3]["loaded_by"]
        assert by_id[2]["loaded_at"] > by_id[1]["loaded_at"]

        (third,) = run_ok(["run"])
        assert third.adapter_response["action"] == "noop", third.adapter_response
