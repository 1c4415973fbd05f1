"""The SET / RESET statements the embedded session applies through its conf (impl._run_sql)."""

from dbt.adapters.spark_batch_refresh.storage.session_confs import (
    TXN_VERSION, USER_METADATA, SessionConfs, conf_statement)


def test_what_session_confs_writes_is_recognised():
    statements = []
    metadata = '{"action":"replay","reason":"a; b = c","model":"m"}'
    with SessionConfs(statements.append, {USER_METADATA: metadata, TXN_VERSION: "3000000"}):
        pass
    assert [conf_statement(s) for s in statements] == [
        (USER_METADATA, metadata), (TXN_VERSION, "3000000"),
        (USER_METADATA, None), (TXN_VERSION, None)]


def test_everything_else_left_to_sql():
    for sql in ("SET", "SET spark.x", "SET spark.x=", "set spark.x=1", "RESET",
                "SET -v", "SELECT 1", "RESET spark.x extra", " SET spark.x=1"):
        assert conf_statement(sql) is None, sql


def test_the_value_is_taken_whole():
    text = '{"k": "v = w", "n": 1}'
    assert conf_statement(f"SET {USER_METADATA}={text}") == (USER_METADATA, text)
