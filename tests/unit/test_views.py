"""Views seen through (sql/views.py): the definition read from DESCRIBE TABLE EXTENDED and its
text spliced where the model names the view."""

from __future__ import annotations

import pytest
from sqlglot.errors import ParseError

from dbt.adapters.spark_batch_refresh.sql.views import (
    ViewDefinition,
    describe_rows_view,
    inline_views,
    view_body,
)

STG = ViewDefinition("analytics.stg", "select id, upper(s) as s from orders where id > 0",
                     ("spark_catalog", "analytics"), ("id", "s"), ("id", "s"))


def _describe(kind: str, columns, info):
    rows = [{"col_name": c, "data_type": "int"} for c in columns]
    rows += [{"col_name": "", "data_type": ""},
             {"col_name": "# Detailed Table Information", "data_type": ""},
             {"col_name": "Type", "data_type": kind}]
    rows += [{"col_name": k, "data_type": v} for k, v in info.items()]
    return rows


def test_describe_rows_read_a_view_and_not_a_table():
    rows = _describe("VIEW", ["x", "y"], {
        "View Text": "select id, v from a.v1",
        "View Catalog and Namespace": "spark_catalog.a",
        "View Query Output Columns": "[`id`, `v`]"})
    assert describe_rows_view("a.v2", rows) == ViewDefinition(
        "a.v2", "select id, v from a.v1", ("spark_catalog", "a"), ("x", "y"), ("id", "v"))
    assert describe_rows_view("a.t", _describe("MANAGED", ["id"], {"Provider": "delta"})) is None


def test_the_view_is_spliced_where_the_model_names_it_keeping_aliases():
    sql = "select o.id, stg.s from analytics.stg o join `analytics`.`stg` on o.id = stg.id"
    assert inline_views(sql, {"analytics.stg": STG}) == (
        "select o.id, stg.s from (\n"
        "select id, upper(s) as s from `analytics`.orders where id > 0\n"
        ") o join (\n"
        "select id, upper(s) as s from `analytics`.orders where id > 0\n"
        ") `stg` on o.id = stg.id")


def test_a_renaming_view_renames_its_query_columns():
    renamed = ViewDefinition("a.v2", "select id, v from a.v1", ("spark_catalog", "a"),
                             ("x", "y"), ("id", "v"))
    assert view_body(renamed) == "SELECT `id` AS `x`, `v` AS `y` FROM (\nselect id, v from a.v1\n) _br_view"


def test_other_catalogs_keep_their_catalog_in_qualified_names():
    view = ViewDefinition("c.db.v", "select * from t", ("c", "db"), ("a",), ("a",))
    assert view_body(view) == "select * from `c`.`db`.t"


def test_a_column_qualified_by_the_views_database_is_left_alone():
    with pytest.raises(ParseError):
        inline_views("select analytics.stg.id from analytics.stg", {"analytics.stg": STG})
