"""A `batch_refresh` model over views replays: dbt's default materialization is `view`, so most
projects' staging models are views, and a view has no versions or change feed of its own. The
views are read through (a view over a view too): the Delta table beneath becomes the model's
pinned upstream and its change feed is replayed. A view's edited definition is a model change.
Before views were read through, every refresh of these models was a full recompute."""

from __future__ import annotations

import os

import pytest
from dbt.tests.util import run_dbt_and_capture

from tests.functional.helpers import assert_contract, consumed_versions, run_ok, sources_yml

STG_ORDERS = """
{{ config(materialized='view') }}
select id, cust, amount * 10 as amt, status
from {{ source('raw', 'orders') }}
where status <> 'void'
"""
# A view over the view.
STG_BIG = """
{{ config(materialized='view') }}
select * from {{ ref('stg_orders') }} where amt > 0
"""
ROWS_V = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, cust, amt from {{ ref('stg_big') }}
"""
# Over a view made outside dbt (a source), which renames its columns.
RENAMED_V = """
{{ config(materialized='batch_refresh', unique_key='oid') }}
select oid, c from {{ source('raw', 'renamed') }} where c > 1
"""
AGG_V = """
{{ config(materialized='batch_refresh') }}
select s.cust, count(*) as n, sum(s.amt) as total
from {{ ref('stg_orders') }} s
group by s.cust
"""


def _by_model(results):
    return {r.node.name: r.adapter_response.get("action") for r in results
            if r.node.config.materialized == "batch_refresh"}


class TestViewsSeenThrough:
    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": sources_yml("orders", "renamed"), "stg_orders.sql": STG_ORDERS,
                "stg_big.sql": STG_BIG, "rows_v.sql": ROWS_V, "agg_v.sql": AGG_V,
                "renamed_v.sql": RENAMED_V}

    def test_models_over_views_replay(self, project):
        s = project.test_schema
        project.run_sql(f"create table {s}.orders (id int, cust int, amount int, status string) "
                        f"using delta tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"insert into {s}.orders values (1, 1, 5, 'open'), (2, 1, 7, 'open'), "
                        f"(3, 2, -1, 'open'), (4, 3, 9, 'void')")
        project.run_sql(f"create view {s}.renamed (oid, c) as select id, cust from {s}.orders")
        assert _by_model(run_ok(["run"])) == {"rows_v": "backfill", "agg_v": "backfill",
                                              "renamed_v": "backfill"}
        for model in ("rows_v", "agg_v", "renamed_v"):
            # the Delta table beneath the views is what the model pinned
            assert set(consumed_versions(project, model)) == {f"{s}.orders"}
            assert_contract(project, model)

        project.run_sql(f"update {s}.orders set amount = 50 where id = 1")
        project.run_sql(f"delete from {s}.orders where id = 2")
        project.run_sql(f"insert into {s}.orders values (5, 2, 3, 'open'), (6, 3, 4, 'void')")
        project.run_sql(f"update {s}.orders set amount = 2 where id = 3")  # enters stg_big
        assert _by_model(run_ok(["run"])) == {"rows_v": "replay", "agg_v": "replay",
                                              "renamed_v": "replay"}
        for model in ("rows_v", "agg_v", "renamed_v"):
            assert_contract(project, model)
        _, explained = run_dbt_and_capture(
            ["run-operation", "batch_refresh_explain", "--args", "{model: rows_v}"])
        assert f"views:      {s}.stg_big, {s}.stg_orders (read through" in explained, explained
        assert f"{s}.orders: Delta v" in explained, explained

    def test_an_edited_view_rebuilds_its_readers(self, project):
        path = os.path.join(project.project_root, "models", "stg_orders.sql")
        with open(path, "w") as handle:
            handle.write(STG_ORDERS.replace("amount * 10", "amount * 100"))
        assert _by_model(run_ok(["run"])) == {"rows_v": "backfill", "agg_v": "backfill",
                                              "renamed_v": "noop"}
        for model in ("rows_v", "agg_v"):
            assert_contract(project, model)
        assert _by_model(run_ok(["run"])) == {"rows_v": "noop", "agg_v": "noop",
                                              "renamed_v": "noop"}
