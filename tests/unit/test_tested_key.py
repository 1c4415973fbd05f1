"""The key a model's tests and constraints declare (plan/tested_key.py)."""

from dbt.adapters.spark_batch_refresh.plan.config import TESTED_KEYS, parse_config
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
    config = parse_config("m", {TESTED_KEYS: [{"kind": "primary_key", "columns": ["id"]}]})
    assert config.tested_key == ("id",) and config.unique_key == ()
    assert "unique_key" in config.result_fingerprint_parts()
    assert config.result_fingerprint_parts() == parse_config("m", {}).result_fingerprint_parts()
