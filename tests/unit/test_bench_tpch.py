"""bench/tpch.py's pure parts: the `table` model each query is compared with."""

import importlib.util
import os

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "tpch.py")
_spec = importlib.util.spec_from_file_location("bench_tpch", _PATH)
tpch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tpch)

MODEL = ("{{ config(materialized='batch_refresh', unique_key=['l_orderkey'],\n"
         "          refresh_mode='auto') }}\nselect l_orderkey, count(*) as n\n"
         "from {{ source('tpch', 'lineitem') }} group by l_orderkey\n")


def test_a_table_is_replaced_as_a_delta_table_is_unless_dropped():
    # file_format='delta' makes dbt-spark `create or replace` the table, keeping its log (what
    # bench/run.py's tables and a Delta user's `table` do); without it dbt-spark drops the
    # table and creates it anew, which skips reading the old table's state.
    replaced, dropped = tpch.as_table(MODEL), tpch.as_table(MODEL, dropped=True)
    assert replaced.startswith("{{ config(materialized='table', file_format='delta') }}")
    assert dropped.startswith("{{ config(materialized='table') }}")
    for sql in (replaced, dropped):
        assert "batch_refresh" not in sql and "unique_key" not in sql
        assert sql.endswith("from {{ source('tpch', 'lineitem') }} group by l_orderkey\n")
