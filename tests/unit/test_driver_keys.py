"""The key checks of a small changes-only staging in the driver (engine/driver_keys.py); their
agreement with sqlgen.key_quality on real Spark is tests/functional/test_changes_only.py's."""

from dbt.adapters.spark_batch_refresh.engine import driver_keys as dk


def row(key, present=True, had_old=None, second="x"):
    return {"_br_t0": key, "_br_t1": second, "_br_present": present, "_br_had_old": had_old}


def test_eligible_only_for_a_counted_small_change_of_exact_key_types():
    types = {"id": "bigint", "d": "date", "x": "double", "s": "string collate UTF8_LCASE"}
    assert dk.eligible(100, ["id"], types, 5_000_000)
    assert dk.eligible(100, ["ID", "d"], types, 5_000_000)  # case of the configured key
    assert not dk.eligible(None, ["id"], types, 5_000_000)  # the planner could not count
    assert not dk.eligible(0, ["id"], types, 5_000_000)
    assert not dk.eligible(dk.DRIVER_KEYS_MAX_ROWS + 1, ["id"], types, 5_000_000)
    assert not dk.eligible(100, ["id"], types, 50)  # several chunks: staged and persisted
    assert not dk.eligible(100, ["id", "x"], types, 5_000_000)  # -0.0 and 0.0 are one key
    assert not dk.eligible(100, ["s"], types, 5_000_000)  # a collation's equality
    assert not dk.eligible(100, [], types, 5_000_000)


def test_quality_from_rows_ordered_by_the_key():
    # NULLs first, as Spark orders them ascending; 3 twice; 5 a tombstone; 7 and 9 new
    rows = [row(None, present=True), row(None, present=None), row("3", had_old=True),
            row("3", had_old=True), row("5", present=None, had_old=True), row("7"),
            row("9")]
    found = dk.quality(rows, 1, ranged=True, top=True)
    assert found == {"staged": 7, "distinct_keys": 4, "null_keys": 1, "null_any": 2,
                     "tombstones": 2, "new_rows": 3, "key_min": "3", "key_max": "9",
                     "new_min": "7", "new_max": "9", "key_top": "9"}
    assert dk.listed(rows) == ["3", "3", "5", "7", "9"]
    # a compound key is distinct by all its columns, and NULL in any of them
    pairs = [row("1", second="a"), row("1", second="b"), row("1", second=None)]
    assert dk.quality(pairs, 2, ranged=False, top=False) == {
        "staged": 3, "distinct_keys": 2, "null_keys": 1, "null_any": 1, "tombstones": 0,
        "new_rows": 3}


def test_key_read_is_ordered_and_bounded():
    sql = dk.keys_sql("_br_staging_x", ["id", "d"])
    assert "CAST(_br_k_0 AS STRING) AS _br_t0, CAST(_br_k_1 AS STRING) AS _br_t1" in sql
    assert sql.endswith(f"ORDER BY _br_k_0 LIMIT {dk.DRIVER_KEYS_MAX_ROWS + 1}")


def test_a_null_safe_key_counts_its_null_as_a_key():
    rows = [row(None), row("3", had_old=True), row("5", present=None, had_old=True)]
    found = dk.quality(rows, 1, ranged=False, top=False, null_safe=True)
    assert found["distinct_keys"] == 3 and found["staged"] == 3
    assert dk.quality(rows, 1, ranged=False, top=False)["distinct_keys"] == 2


def test_an_outer_key_counts_nulls_in_its_checked_columns_alone():
    # (journal, line): a journal without lines has a NULL line, no NULL key; a NULL journal is
    pairs = [row("1", second=None), row("2", second="7"), row(None, second="8")]
    found = dk.quality(pairs, 2, ranged=False, top=False, null_safe=True, null_checked=[0])
    assert (found["null_keys"], found["distinct_keys"]) == (1, 3)
    assert dk.quality(pairs[:2], 2, ranged=False, top=False, null_safe=True,
                      null_checked=[0])["null_keys"] == 0
