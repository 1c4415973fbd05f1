"""The target's key ceiling (plan/key_top.py): what proves a new key cannot collide."""

from dataclasses import replace

from dbt.adapters.spark_batch_refresh.plan.key_top import (
    KeyTop, above, ceiling_after, key_type, make_top, raised, single_key)
from dbt.adapters.spark_batch_refresh.storage.commit_log import RefreshCommit

from tests.unit.test_commit_log import COMMIT, _entry

ID = key_type("ID", "BIGINT")


def top(value: str, key=ID) -> KeyTop:
    made = make_top(key, value)
    assert made is not None
    return made


def test_only_types_whose_text_orders_as_spark_orders_them() -> None:
    assert ID is not None and ID.column == "id" and ID.sql_type == "bigint"
    assert key_type("d", "date") is not None
    for other in ("double", "decimal(10,2)", "timestamp", "string", "string collate UTF8_LCASE",
                  "struct<a:int>", None):
        assert key_type("k", other) is None
    assert make_top(ID, "12x") is None
    assert make_top(key_type("d", "date"), "+10000-01-01") is None


def test_a_single_key_column_found_by_name_in_any_case() -> None:
    columns = [("ID", "bigint"), ("name", "string"), ("day", "date")]
    assert single_key(["id"], columns) == ID
    assert single_key(["Day"], columns) == key_type("day", "date")
    assert single_key(["name"], columns) is None  # no ceiling for strings
    assert single_key(["id", "day"], columns) is None  # compound
    assert single_key(["missing"], columns) is None


def test_integers_compare_by_value_not_text() -> None:
    assert above(top("99"), ID, "100")  # "99" > "100" as text
    assert not above(top("100"), ID, "100")  # equal may collide
    assert not above(top("100"), ID, "-5")
    assert raised(top("99"), top("100")) == top("100")
    assert raised(top("100"), top("99")) == top("100")


def test_dates() -> None:
    day = key_type("d", "date")
    assert above(top("2024-01-31", day), day, "2024-02-01")
    assert not above(top("2024-01-31", day), day, "2024-01-31")


def test_unknown_or_other_key_proves_nothing() -> None:
    assert not above(None, ID, "5")
    assert not above(top("1"), None, "5")
    assert not above(top("1"), ID, None)
    other = key_type("order_id", "bigint")
    assert not above(top("1"), other, "5")  # a ceiling of another column
    assert not above(top("1"), key_type("id", "int"), "5")


def test_a_whole_model_write_sets_it_a_replay_raises_it() -> None:
    assert ceiling_after(True, ID, top("7"), None) == top("7")
    assert ceiling_after(True, ID, top("7"), top("1000")) == top("7")  # rows deleted
    assert ceiling_after(False, ID, top("7"), top("3")) == top("7")
    assert ceiling_after(False, ID, None, top("3")) == top("3")  # only tombstones
    assert ceiling_after(False, ID, top("7"), None) is None  # never known: stays unknown
    assert ceiling_after(True, None, top("7"), top("3")) is None


def test_carried_in_the_commit_metadata() -> None:
    commit = replace(COMMIT, key_top=top("41"))
    back = RefreshCommit.from_history(_entry(commit.to_metadata(), 9), commit.model_id)
    assert back is not None and back.key_top == top("41")
    plain = RefreshCommit.from_history(_entry(COMMIT.to_metadata(), 9), COMMIT.model_id)
    assert plain is not None and plain.key_top is None
    assert KeyTop.from_json({"column": "id", "type": "double", "max": "1.5"}) is None
    assert KeyTop.from_json("nonsense") is None


def test_the_keys_a_commit_inserted_from_its_file_statistics() -> None:
    import json

    from dbt.adapters.spark_batch_refresh.storage.jvm_commit_stats import added_max

    def add(stats, **extra) -> str:
        return json.dumps({"add": {"path": "p", "dataChange": True,
                                   "stats": json.dumps(stats) if stats is not None else None,
                                   **extra}})

    def file(top, records=3, nulls=0):
        return {"numRecords": records, "minValues": {"Id": 0}, "maxValues": {"Id": top},
                "nullCount": {"Id": nulls}}

    info = json.dumps({"commitInfo": {"operation": "WRITE"}})
    assert added_max("\n".join([info, add(file(7)), add(file(12)), add(file(9))]), "id") == "12"
    assert added_max("\n".join([info, add(file("2024-02-01")), add(file("2024-01-31"))]),
                     "id") == "2024-02-01"
    # no row, or only NULLs, in a file: nothing to bound
    empty = {"numRecords": 2, "maxValues": {}, "nullCount": {"id": 2}}
    assert added_max("\n".join([add(empty), add(file(5))]), "id") == "5"
    # anything not told exactly: unknown
    assert added_max(info, "id") is None  # nothing added
    assert added_max(add(None), "id") is None  # no statistics
    assert added_max(add({"numRecords": 2, "maxValues": {"v": 1}}), "id") is None
    assert added_max("\n".join([add(file(5)), json.dumps({"cdc": {"path": "c"}})]), "id") is None
    assert added_max(add(file(5), deletionVector={"storageType": "u"}), "id") is None
    assert added_max(add(file(5), dataChange=False), "id") is None
    assert added_max("\n".join([add(file(5)), add(file("2024-01-01"))]), "id") is None


def test_the_keys_a_commit_inserted_from_its_change_feed() -> None:
    """Over a SQL connection (Thrift, Connect) the same answer comes from the commit's change
    feed: one statement; a feed that cannot be read leaves the ceiling unknown."""
    from dbt_common.exceptions import DbtDatabaseError

    from dbt.adapters.spark_batch_refresh.storage.delta import feed_key_max

    sent = []

    def fetch(answer):
        def run(sql):
            sent.append(sql)
            if isinstance(answer, Exception):
                raise answer
            return answer
        return run

    assert feed_key_max(fetch([{"top": "12"}]), "s.t", 3, "Id") == "12"
    assert sent == ["SELECT CAST(max(`Id`) AS STRING) AS top FROM table_changes('s.t', 3, 3) "
                    "WHERE _change_type = 'insert'"]
    assert feed_key_max(fetch([{"top": None}]), "s.t", 3, "id") is None  # nothing inserted
    assert feed_key_max(fetch(DbtDatabaseError("DELTA_MISSING_CHANGE_DATA")), "s.t", 3,
                        "id") is None


def test_an_overwrite_or_inline_append_ceiling_is_read_back() -> None:
    from dbt.adapters.spark_batch_refresh.plan.key_top import with_inserted

    assert with_inserted(None, ID, "40") == top("40")  # an overwrite: its rows are the table
    assert with_inserted(top("50"), ID, "40") == top("50")  # an append below the old ceiling
    assert with_inserted(top("30"), ID, "40") == top("40")
    assert with_inserted(top("30"), ID, None) is None  # not readable
    assert with_inserted(top("30", key_type("other", "bigint")), ID, "40") is None


def test_which_upstream_commits_hold_inserts_alone() -> None:
    from dbt.adapters.spark_batch_refresh.storage.delta import inserts_only

    zero = {"numTargetRowsUpdated": "0", "numTargetRowsDeleted": "0", "numTargetRowsCopied": "0",
            "numTargetFilesRemoved": "0", "numTargetDeletionVectorsAdded": "0",
            "numTargetRowsInserted": "5"}
    assert inserts_only({"operation": "WRITE", "isBlindAppend": True})
    assert inserts_only({"operation": "MERGE", "isBlindAppend": False, "operationMetrics": zero})
    for name in ("numTargetRowsUpdated", "numTargetRowsDeleted", "numTargetRowsCopied",
                 "numTargetFilesRemoved", "numTargetDeletionVectorsAdded"):
        assert not inserts_only({"operation": "MERGE", "operationMetrics": {**zero, name: "1"}})
        assert not inserts_only({"operation": "MERGE", "operationMetrics": {
            k: v for k, v in zero.items() if k != name}})  # a server that does not say
    assert not inserts_only({"operation": "WRITE", "isBlindAppend": False})
    assert not inserts_only({"operation": "DELETE", "operationMetrics": zero})


def test_planning_knows_a_replay_would_be_one_checked_insert() -> None:
    from dbt.adapters.spark_batch_refresh.engine.executor import Refresher
    from dbt.adapters.spark_batch_refresh.engine.record import Recorder
    from dbt.adapters.spark_batch_refresh.plan.config import parse_config
    from dbt.adapters.spark_batch_refresh.plan.planner import ModelState, UpstreamPoint
    from dbt.adapters.spark_batch_refresh.sql.analysis import analyze
    from dbt.adapters.spark_batch_refresh.storage.commit_log import TargetLog

    def refresher(embedded: bool, inserts: bool) -> Refresher:
        r = Refresher(lambda sql: [], lambda sql: None, Recorder(),
                      inserted_key_max=(lambda t, v, c: None) if embedded else None)
        r.reader.inserts_only = lambda u, start, end: inserts and (start, end) == (4, 6)
        return r

    config = parse_config("m", {"unique_key": "id"})
    rowwise = analyze("select id, v from raw.ev where v > 0", ["id"])
    state = ModelState("f", {"raw.ev": UpstreamPoint(3, None)}, "idle", None)
    latest = {"raw.ev": UpstreamPoint(6, None)}
    log = TargetLog(replace(COMMIT, key_top=top("9")))
    assert refresher(True, True)._inserts_replay(config, rowwise, log, state, latest)
    # over a server too: the ceiling is read from the commit's change feed
    assert refresher(False, True)._inserts_replay(config, rowwise, log, state, latest)
    assert not refresher(True, False)._inserts_replay(config, rowwise, log, state, latest)
    assert not refresher(True, True)._inserts_replay(config, rowwise, TargetLog(COMMIT), state,
                                                     latest)  # no ceiling
    agg = analyze("select id, count(*) as n from raw.ev group by id", ["id"])
    assert not refresher(True, True)._inserts_replay(config, agg, log, state, latest)
