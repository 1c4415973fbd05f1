"""The key a model's tests and constraints declare (plan/tested_key.py)."""

from dbt.adapters.spark_batch_refresh.plan.config import DECLARED_KEYS, parse_config
from dbt.adapters.spark_batch_refresh.plan.tested_key import declared_keys
from dbt.adapters.spark_batch_refresh.plan.tested_key import tested_key as declared_key


def test_unique_and_not_null_on_one_column():
    assert declared_key([{"kind": "unique", "columns": ["order_id"]},
                       {"kind": "not_null", "columns": ["order_id"]},
                       {"kind": "not_null", "columns": ["customer_id"]}]) == ("order_id",)


def test_unique_alone_or_restricted_declares_nothing():
    assert declared_key([{"kind": "unique", "columns": ["id"]}]) == ()
    assert declared_key([{"kind": "unique", "columns": ["id"], "where": "status = 'x'"},
                       {"kind": "not_null", "columns": ["id"]}]) == ()
    assert declared_key([{"kind": "accepted_values", "columns": ["status"]},
                       {"kind": "unique", "columns": [None]}]) == ()


def test_primary_key_first_then_combination():
    records = [{"kind": "unique_combination_of_columns", "columns": ["a", "b"]},
               {"kind": "unique", "columns": ["id"]}, {"kind": "not_null", "columns": ["ID"]}]
    assert declared_key(records) == ("id",)
    assert declared_key(records[:1]) == ("a", "b")
    assert declared_key(records + [{"kind": "primary_key", "columns": ["k"]}]) == ("k",)


def test_constraints_and_quoted_names():
    assert declared_key([{"kind": "unique_constraint", "columns": ['"id"']},
                       {"kind": "not_null_constraint", "columns": ["`id`"]}]) == ("id",)


def test_parsed_into_the_config_beside_unique_key():
    config = parse_config("m", {DECLARED_KEYS: {
        "model": [{"kind": "primary_key", "columns": ["id"]}],
        "upstreams": {"raw.orders": [{"kind": "unique", "columns": ["id"]},
                                     {"kind": "not_null", "columns": ["id"]}],
                      "raw.events": [{"kind": "unique", "columns": ["id"]}]}}})
    assert config.tested_key == ("id",) and config.unique_key == ()
    assert config.upstream_keys == {"raw.orders": ("id",)}
    assert "unique_key" in config.result_fingerprint_parts()
    assert config.result_fingerprint_parts() == parse_config("m", {}).result_fingerprint_parts()


def test_declared_keys_read_from_the_graph():
    def test(uid, name, node, column=None, **kwargs):
        # a source's test: no attached node, the source its one dependency
        return uid, {"resource_type": "test", "attached_node": node, "column_name": column,
                     "depends_on": {"nodes": [node or "source.p.raw.orders"]},
                     "test_metadata": {"name": name, "kwargs": kwargs}, "config": {}}

    graph = {"nodes": dict([
        ("model.p.m", {"unique_id": "model.p.m", "resource_type": "model", "columns": {},
                       "depends_on": {"nodes": ["source.p.raw.orders", "model.p.up"]}}),
        ("model.p.up", {"unique_id": "model.p.up", "resource_type": "model", "schema": "an",
                        "alias": "up", "config": {"materialized": "batch_refresh",
                                                  "unique_key": "k"}}),
        test("test.p.1", "unique", "model.p.m", "id"),
        test("test.p.2", "not_null", "model.p.m", "id"),
        test("test.p.3", "unique_combination_of_columns", None,
             combination_of_columns=["a", "b"]),
    ]), "sources": {"source.p.raw.orders": {"unique_id": "source.p.raw.orders",
                                            "resource_type": "source", "schema": "Raw",
                                            "identifier": "orders", "name": "orders"}}}
    found = declared_keys(graph, graph["nodes"]["model.p.m"])
    assert declared_key(found["model"]) == ("id",)
    assert {r: declared_key(v) for r, v in found["upstreams"].items()} == {
        "raw.orders": ("a", "b"), "an.up": ()}
    # an upstream batch_refresh model's configured key: as good as one its query proves
    config = parse_config("m", {DECLARED_KEYS: found})
    assert config.upstream_keys == {"raw.orders": ("a", "b")}
    assert config.upstream_model_keys == {"an.up": ("k",)}
