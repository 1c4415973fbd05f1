from dbt.adapters.spark_batch_refresh.sql import sqlgen
from dbt.adapters.spark_batch_refresh.embedded.session_defaults import (
    DELTA_VERIFY_NON_UTC, SessionSettings, embedded_confs)


def test_literal_escaping():
    assert sqlgen.lit("it's") == "'it\\'s'"
    assert sqlgen.lit(None) == "NULL" and sqlgen.lit(3) == "3" and sqlgen.lit(True) == "true"


def test_merge_updates_only_changed_rows():
    sql = sqlgen.merge_staging("s.t", "s.st", ["id"], ["id", "v", "w"], delete_missing=False)
    assert "WHEN MATCHED AND s._br_present IS NULL THEN DELETE" in sql
    assert "NOT (t.`v` <=> s.`v`) OR NOT (t.`w` <=> s.`w`)" in sql
    assert "NOT MATCHED BY SOURCE" not in sql
    full = sqlgen.merge_staging("s.t", "s.st", ["id"], ["id", "v"], delete_missing=True)
    assert full.endswith("WHEN NOT MATCHED BY SOURCE THEN DELETE")


def test_staging_affected_restricts_and_tombstones():
    sql = sqlgen.staging_affected("SELECT id, v FROM s.t", "_keys", ["id"])
    assert "WITH _br_affected AS (SELECT `id` FROM _keys)" in sql
    assert "WHERE `id` IN (SELECT `id` FROM _br_affected)" in sql
    assert "LEFT JOIN _br_rows" in sql and "_br_k_0" in sql
    keys = sqlgen.affected_keys(["SELECT `id` FROM a", "SELECT `id` FROM b"], ["id"])
    assert keys.startswith("SELECT DISTINCT `id` FROM (") and "UNION ALL" in keys


def test_model_columns_drop_bookkeeping():
    assert sqlgen.model_columns(["id", "v", "_br_present", "_br_had_old", "_br_k_0"]) == ["id", "v"]


def test_staging_from_changes_nets_signed_rows():
    sql = sqlgen.staging_from_changes("SELECT id, v FROM plus", "SELECT id, v FROM minus",
                                      ["id", "v"], ["id"])
    assert "SELECT `id`, `v`, 1 AS _br_s FROM (\nSELECT id, v FROM plus" in sql
    assert "SELECT `id`, `v`, -1 AS _br_s FROM (\nSELECT id, v FROM minus" in sql
    assert "GROUP BY `id`, `v` HAVING sum(_br_s) <> 0" in sql
    # a row that appears twice stays twice, so the key check sees the duplicate
    assert "array_repeat(struct(`id`, `v`, true AS _br_present), CAST(_br_n AS INT))" in sql
    assert "max(CASE WHEN _br_n < 0 THEN true END) AS _br_had_old" in sql
    # one pass over the netted rows, grouped by key; a key with no present row is a tombstone
    assert "FROM _br_net GROUP BY `id` HAVING count(*) > 0" in sql and "JOIN" not in sql
    assert sql.count("_br_k_0") == 1 and "LATERAL VIEW OUTER explode(_br_rs)" in sql


def test_merge_guard_refuses_new_rows_on_unchanged_keys_first():
    sql = sqlgen.merge_staging("s.t", "s.st", ["id"], ["id", "v"], delete_missing=False,
                               guard_new_keys=True)
    clauses = sql.split("\n")[3:]
    assert clauses[0].startswith("WHEN MATCHED AND s._br_present IS NOT NULL AND "
                                 "s._br_had_old IS NULL THEN UPDATE SET t.`id` = raise_error(")
    assert sqlgen.DUPLICATE_KEY_MARKER in clauses[0]
    assert "raise_error" not in sqlgen.merge_staging("s.t", "s.st", ["id"], ["id", "v"], False)


def test_new_key_collisions_count_what_the_guard_fails_on():
    sql = sqlgen.new_key_collisions("s.t", "st", ["id"], ("1", "9"))
    assert "JOIN s.t t ON t.`id` = s._br_k_0 AND t.`id` BETWEEN 1 AND 9" in sql
    assert sql.endswith("WHERE s._br_present IS NOT NULL AND s._br_had_old IS NULL")


def test_a_replace_where_guards_new_keys_in_the_write():
    sql = sqlgen.replace_where("s.t", "st", "id", ["3", "7"], ["id", "v"], ("3", "7"),
                               new_range=("7", "7"))
    assert sql.startswith("INSERT INTO s.t REPLACE WHERE `id` IN (3, 7) AND `id` BETWEEN 3 AND 7")
    # only a new row (no old one) meets the target's keys, read in the new keys' range
    assert ("LEFT JOIN (SELECT `id` AS _br_t0 FROM s.t WHERE `id` BETWEEN 7 AND 7) _br_c\n"
            "ON s._br_had_old IS NULL AND _br_c._br_t0 = s._br_k_0") in sql
    assert sql.endswith("WHERE s._br_present AND CASE WHEN _br_c._br_t0 IS NULL THEN true "
                        f"ELSE raise_error('{sqlgen.DUPLICATE_KEY_MARKER}') END")
    assert "SELECT s.`id`, s.`v` FROM st s" in sql


def test_recomputed_keys_are_compared_with_the_target_in_one_read():
    sql = sqlgen.keys_against_target("s.t", "st", ["id"], ["id", "v", "m"], ("1", "9"),
                                     unordered=["m"])
    assert sql.startswith("SELECT s._br_k_0 AS k, s._br_present IS NOT NULL AS present, "
                          "t.`id` IS NOT NULL AS existed, ")
    # equal rows are `same` (left out of the REPLACE WHERE); a map compares as JSON text
    assert ("AND NOT (NOT (t.`v` <=> s.`v`) OR NOT (to_json(t.`m`) <=> to_json(s.`m`))), "
            "false) AS same") in sql
    assert "LEFT JOIN s.t t ON t.`id` = s._br_k_0 AND t.`id` BETWEEN 1 AND 9" in sql
    assert sql.endswith("WHERE s._br_k_0 IS NOT NULL")  # a NULL key's tombstone matches nothing
    listed = sqlgen.replace_where("s.t", "st", "id", ["3"], ["id", "v"], ("3", "3"),
                                  listed_only=True)
    assert listed.endswith("SELECT `id`, `v` FROM st WHERE _br_present AND `id` IN (3)")


def test_a_compound_key_merge_prunes_by_its_first_column():
    sql = sqlgen.merge_staging("s.t", "st", ["a", "b"], ["a", "b", "v"], delete_missing=False,
                               key_range=("1", "9"))
    assert "ON t.`a` = s._br_k_0 AND t.`b` = s._br_k_1 AND t.`a` BETWEEN 1 AND 9" in sql


def test_key_quality_counts_null_keys_of_output_rows_only():
    sql = sqlgen.key_quality("st", ["a", "b"])
    # a tombstone with a NULL key (outer join) is no NULL output key, but is outside DISTINCT
    assert "WHEN (_br_k_0 IS NULL OR _br_k_1 IS NULL) AND _br_present THEN 1" in sql
    assert "WHEN _br_k_0 IS NULL OR _br_k_1 IS NULL THEN 1 ELSE 0 END), 0) AS null_any" in sql


def test_replace_where_lists_the_keys_and_checks_new_ones_in_their_own_range():
    sql = sqlgen.replace_where("s.t", "st", "id", ["3", "7", "9"], ["id", "v"], ("3", "9"))
    assert sql.startswith("INSERT INTO s.t REPLACE WHERE `id` IN (3, 7, 9) AND `id` BETWEEN 3 AND 9")
    assert sql.endswith("SELECT `id`, `v` FROM st WHERE _br_present")
    quality = sqlgen.key_quality("st", ["id"], key_range=True, from_changes=True)
    assert "sum(CASE WHEN _br_present AND _br_had_old IS NULL THEN 1 ELSE 0 END), 0) AS new_rows" in quality
    assert "min(CASE WHEN _br_present AND _br_had_old IS NULL THEN _br_k_0 END) AS STRING) AS new_min" in quality
    assert "new_rows" not in sqlgen.key_quality("st", ["id"], key_range=True)


def test_a_replay_replaces_only_a_listable_staging_of_one_chunk():
    from dbt.adapters.spark_batch_refresh.engine.apply import (
        REPLACE_WHERE_MAX_KEYS, WHOLE_KEYS_REPLACE_MAX, replaceable)
    from dbt.adapters.spark_batch_refresh.engine.stage import Staged
    from dbt.adapters.spark_batch_refresh.plan.strategy import Strategy

    cols = [("id", "bigint"), ("v", "int"), (sqlgen.PRESENT, "boolean"),
            (sqlgen.HAD_OLD, "boolean"), ("_br_k_0", "bigint")]
    listable = {"key_range": ("1", "9"), "key_type": "bigint"}
    staged = Staged("st", cols, rows=10, **listable)
    assert replaceable(staged, 1)
    assert not replaceable(staged, 2)  # several chunks merge
    assert not replaceable(Staged("st", cols, rows=10), 1)  # no literal range
    # a compound key: its first column's range prunes a MERGE, but Delta's REPLACE WHERE
    # takes no `(a, b) IN (...)`
    assert not replaceable(Staged("st", cols, rows=10, key_range=("1", "9")), 1)
    snapshot = [c for c in cols if c[0] != sqlgen.HAD_OLD]  # recomputed keys: no old-row mark
    assert not replaceable(Staged("st", snapshot, rows=10, **listable), 1)
    # ... unless the staging holds every model row of its keys (recomputed for them), and
    # only a few: the target read and a long literal list cost more than the MERGE
    whole = Staged("st", snapshot, rows=10, strategy=Strategy.AFFECTED_KEYS, **listable)
    assert replaceable(whole, 1) and not replaceable(whole, 2)
    assert not replaceable(Staged("st", snapshot, rows=10, strategy=Strategy.AFFECTED_KEYS), 1)
    assert not replaceable(Staged("st", snapshot, rows=WHOLE_KEYS_REPLACE_MAX + 1,
                                  strategy=Strategy.AFFECTED_KEYS, **listable), 1)
    assert not replaceable(Staged("st", cols, rows=REPLACE_WHERE_MAX_KEYS + 1, **listable), 1)
    assert not replaceable(Staged("st", cols, rows=0, **listable), 1)
    # new keys only (an append): the insert-only MERGE is cheaper
    assert not replaceable(Staged("st", cols, rows=10, new_rows=10, **listable), 1)
    assert replaceable(Staged("st", cols, rows=10, new_rows=9, **listable), 1)


def test_merge_compares_maps_as_json():
    sql = sqlgen.merge_staging("s.t", "s.st", ["id"], ["id", "m", "v"], delete_missing=False,
                               unordered=["m"])
    assert "NOT (to_json(t.`m`) <=> to_json(s.`m`)) OR NOT (t.`v` <=> s.`v`)" in sql


def test_embedded_confs_defaults_and_overrides():
    confs = embedded_confs(SessionSettings(user_confs={"spark.sql.shuffle.partitions": "3"}),
                           cwd="/p", env={})
    assert confs["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert confs["spark.sql.catalog.spark_catalog"].endswith("DeltaCatalog")
    assert confs["spark.sql.warehouse.dir"] == "/p/.batch_refresh/warehouse"
    assert "databaseName=/p/.batch_refresh/metastore_db" in confs["spark.hadoop.javax.jdo.option.ConnectionURL"]
    assert confs["spark.jars.packages"].startswith("io.delta:delta-spark_4.2_2.13:")
    assert confs["spark.sql.shuffle.partitions"] == "3"
    assert confs[DELTA_VERIFY_NON_UTC] == "false"
    mine = embedded_confs(SessionSettings(user_confs={DELTA_VERIFY_NON_UTC: "true"}), cwd="/p", env={})
    assert mine[DELTA_VERIFY_NON_UTC] == "true"


def test_air_gapped_jars():
    confs = embedded_confs(SessionSettings(delta_jars=["/jars/a.jar", "/jars/b.jar"]), cwd="/p", env={})
    assert confs["spark.jars"] == "/jars/a.jar,/jars/b.jar" and "spark.jars.packages" not in confs
    env_confs = embedded_confs(SessionSettings(), cwd="/p", env={"BATCH_REFRESH_DELTA_JARS": "/x.jar"})
    assert env_confs["spark.jars"] == "/x.jar"


def test_user_java_options_add_to_ours():
    confs = embedded_confs(
        SessionSettings(user_confs={"spark.driver.extraJavaOptions": "-Xss4m"}), cwd="/p", env={})
    opts = confs["spark.driver.extraJavaOptions"]
    assert "-Dderby.system.home=/p/.batch_refresh" in opts and opts.endswith("-Xss4m")


def test_a_first_start_waits_for_the_one_resolving_the_jars(tmp_path):
    """Two processes resolving the Delta package into an empty Ivy cache at once download the
    same files over each other, and one start fails ("Downloaded file size (0) doesn't match
    expected Content Length": two pytest workers on a fresh machine). A start with no
    remembered jars waits for the lock and then starts from the jars the first one remembered."""
    import threading

    from dbt.adapters.spark_batch_refresh.embedded import jar_cache

    jar = tmp_path / "delta.jar"
    jar.write_text("")
    cache = str(tmp_path / "cache" / "delta.jars")
    found = {}

    def confs_for(jars):
        return embedded_confs(SessionSettings(cached_jars=jars), cwd=str(tmp_path), env={})

    def second():
        found.update(jar_cache.start_resolving_once(cache, confs_for, lambda confs: confs))

    with jar_cache.resolving_alone(cache):  # the first process, resolving
        waiting = threading.Thread(target=second)
        waiting.start()
        waiting.join(timeout=1.0)
        assert waiting.is_alive(), "the second start did not wait for the first"
        assert jar_cache.remember_jars(cache, f"file:{jar}")
    waiting.join()
    assert found["spark.jars"] == str(jar) and "spark.jars.packages" not in found
    # once remembered, a start takes no lock at all
    with jar_cache.resolving_alone(cache):
        assert jar_cache.start_resolving_once(cache, confs_for, dict)["spark.jars"] == str(jar)


def test_adapter_response_takes_every_field_of_the_result():
    from dbt.adapters.spark_batch_refresh.engine.run_result import RefreshResult
    from dbt.adapters.spark_batch_refresh.report.response import BatchRefreshResponse

    result = RefreshResult(action="replay", reason="upstream moved", mode="incremental",
                           run_id="r1", resumed=True, versions_from={"s.a": 3},
                           versions_to={"s.a": 5}, rows_inserted=2, rows_updated=1,
                           staged_rows=4, chunks=1, staged_from="changes", statements=14,
                           writes=1, duration_s=2.5)
    response = BatchRefreshResponse.from_result(result.to_dict())
    assert (response.action, response.code, response.rows_affected) == ("replay", "REPLAY", 3)
    assert response.versions_to == {"s.a": 5} and response.resumed is True
    assert (response.staged_from, response.statements, response.duration_s) == ("changes", 14, 2.5)
    # None (no fallback, not gated) stays present in run_results.json as ""
    assert response.fallback_reason == "" and response.next_due == ""
    assert response.rows_deleted == 0 and response.run_id == "r1"


def test_replace_using_checks_new_keys_in_the_write_and_parses_back():
    from dbt.adapters.spark_batch_refresh.storage.frame_write import (
        plain_keys, replace_using_statement)

    sql = sqlgen.replace_using("`s`.`t`", "st", ["id"], ["id", "v"], new_range=("10", "12"))
    assert sql.startswith("INSERT INTO `s`.`t` REPLACE USING (`id`)\nSELECT s.`id`, s.`v` FROM st s")
    assert "(SELECT `id` AS _br_t0 FROM `s`.`t` WHERE `id` BETWEEN 10 AND 12) _br_c" in sql
    assert "ON s._br_had_old IS NULL AND _br_c._br_t0 = s._br_k_0" in sql
    assert sql.endswith(f"ELSE raise_error('{sqlgen.DUPLICATE_KEY_MARKER}') END")
    parsed = replace_using_statement(sql)
    assert parsed is not None and parsed.target == "`s`.`t`" and parsed.keys == ["id"]
    assert parsed.query == sql.split("\n", 1)[1]
    # a compound key: every column in the check's join, no range without one
    compound = sqlgen.replace_using("t", "st", ["a", "b"], ["a", "b", "v"])
    assert "(SELECT `a` AS _br_t0, `b` AS _br_t1 FROM t) _br_c" in compound
    assert "_br_c._br_t0 = s._br_k_0 AND _br_c._br_t1 = s._br_k_1" in compound
    assert replace_using_statement(compound).keys == ["a", "b"]
    unguarded = sqlgen.replace_using("t", "st", ["id"], ["id", "v"], guarded=False)
    assert unguarded.endswith("\nSELECT `id`, `v` FROM st WHERE _br_present")
    assert replace_using_statement(sqlgen.replace_where(
        "t", "st", "id", ["1"], ["id"], ("1", "1"))) is None
    assert plain_keys(["id", "order_2"]) and not plain_keys(["my id"])
    spaced = replace_using_statement(sqlgen.replace_using("`my db`.`t 1`", "st", ["id"], ["id"]))
    assert spaced is not None and spaced.target == "`my db`.`t 1`"


def test_a_replay_replaces_by_key_an_upsert_staging_only():
    from dbt.adapters.spark_batch_refresh.engine.apply import upsertable
    from dbt.adapters.spark_batch_refresh.engine.stage import Staged
    from dbt.adapters.spark_batch_refresh.plan.strategy import Strategy

    cols = [("id", "bigint"), ("v", "int"), (sqlgen.PRESENT, "boolean"),
            (sqlgen.HAD_OLD, "boolean"), ("_br_k_0", "bigint")]
    assert upsertable(Staged("st", cols, rows=10, new_rows=3), 1, ["id"])
    assert upsertable(Staged("st", cols, rows=60_000), 1, ["a", "b"])  # no key list to limit
    assert not upsertable(Staged("st", cols, rows=10, tombstones=1), 1, ["id"])  # a delete
    assert not upsertable(Staged("st", cols, rows=10, new_rows=10), 1, ["id"])  # inserts alone
    assert not upsertable(Staged("st", cols, rows=10), 2, ["id"])  # several chunks
    assert not upsertable(Staged("st", cols, rows=0), 1, ["id"])
    assert not upsertable(Staged("st", cols, rows=10), 1, ["my id"])
    # recomputed keys: each with a row (its equal rows left out in the write), none gone
    snapshot = [c for c in cols if c[0] != sqlgen.HAD_OLD]
    assert upsertable(Staged("st", snapshot, rows=10, strategy=Strategy.AFFECTED_KEYS), 1,
                      ["id"])
    assert upsertable(Staged("st", snapshot, rows=900, strategy=Strategy.DELTA_AGGREGATE), 1,
                      ["a", "b"])
    assert not upsertable(Staged("st", snapshot, rows=10, tombstones=1,
                                 strategy=Strategy.AFFECTED_KEYS), 1, ["id"])


def test_a_whole_keys_staging_replaces_by_key_only_its_rows_that_differ():
    sql = sqlgen.replace_using_changed("s.t", "st", ["id"], ["id", "v", "m"], ("1", "9"),
                                       unordered=["m"])
    head, select, on, where = sql.split("\n")
    assert head == "INSERT INTO s.t REPLACE USING (`id`)"
    assert select == "SELECT s.`id`, s.`v`, s.`m` FROM st s LEFT ANTI JOIN s.t t"
    assert on.startswith("ON t.`id` = s._br_k_0 AND t.`id` BETWEEN 1 AND 9 AND NOT (")
    assert "NOT (t.`v` <=> s.`v`)" in on and "to_json(t.`m`)" in on
    assert where == f"WHERE s.{sqlgen.PRESENT}"
    from dbt.adapters.spark_batch_refresh.storage.frame_write import replace_using_statement
    parsed = replace_using_statement(sql)
    assert parsed is not None and parsed.keys == ["id"] and parsed.query.startswith("SELECT s.")


def test_a_replace_using_commit_counts_its_rows_from_its_metrics():
    """Its metrics (Delta 4.4, a 1,000-row target, one key updated and one inserted): the kept
    rows of the touched file count as output and as copied."""
    from dbt.adapters.spark_batch_refresh.engine.apply import count_committed
    from dbt.adapters.spark_batch_refresh.engine.run_result import RefreshResult

    result = RefreshResult("replay", "", "incremental")
    count_committed({"numOutputRows": "1001", "numCopiedRows": "999", "numDeletedRows": "1",
                     "numFiles": "2"}, result)
    assert (result.rows_inserted, result.rows_updated, result.rows_deleted) == (1, 1, 0)
    result = RefreshResult("replay", "", "incremental")
    count_committed({"numOutputRows": "3"}, result)  # a blind INSERT
    assert (result.rows_inserted, result.rows_updated, result.rows_deleted) == (3, 0, 0)


def test_a_null_safe_key_is_matched_by_null_safe_equality_everywhere():
    # a NULL group (config.nullable_key): its NULL key meets the NULL affected key and the
    # target's NULL row, counts as a distinct key, and passes the backfill's inline check
    affected = sqlgen.staging_affected("SELECT g, n FROM s.t", "_keys", ["g", "h"], null_safe=True)
    assert ("WHERE EXISTS (SELECT 1 FROM _br_affected _br_x WHERE _br_x.`g` <=> _br_m.`g` AND "
            "_br_x.`h` <=> _br_m.`h`)") in affected and " IN (" not in affected
    assert "count(DISTINCT struct(_br_k_0, _br_k_1)) AS distinct_keys" in sqlgen.key_quality(
        "st", ["g", "h"], null_safe=True)
    assert "count(DISTINCT _br_k_0, _br_k_1)" in sqlgen.key_quality("st", ["g", "h"])
    assert "IS NULL" not in sqlgen.backfill_checked("SELECT g FROM s.t", ["g"], ["g"], ())
    # a NULL has its own marker: an inferred key plans again null-safe without staging first
    assert (f"CASE WHEN `g` IS NULL OR `h` IS NULL THEN raise_error('{sqlgen.INLINE_NULL_MARKER}') "
            "WHEN _br_n = 1 THEN true") in sqlgen.backfill_checked(
        "SELECT g, h FROM s.t", ["g", "h"], ["g", "h"], ["g", "h"])
    # a key with an outer column (config.outer_key): its other columns' NULL alone is checked,
    # in the backfill's inline check and in a staging's counts
    assert (f"CASE WHEN `g` IS NULL THEN raise_error('{sqlgen.INLINE_NULL_MARKER}') "
            "WHEN _br_n = 1 THEN true") in sqlgen.backfill_checked(
        "SELECT g, h FROM s.t", ["g", "h"], ["g", "h"], ["g"])
    outer = sqlgen.key_quality("st", ["g", "h"], null_safe=True, null_checked=["g"])
    assert "WHEN (_br_k_0 IS NULL) AND" in outer and "_br_k_1 IS NULL" not in outer
    assert "count(DISTINCT struct(_br_k_0, _br_k_1))" in outer
    assert sqlgen.INLINE_CHECK_MARKER in sqlgen.INLINE_NULL_MARKER
    merge = sqlgen.merge_staging("s.t", "st", ["g"], ["g", "n"], delete_missing=True,
                                 null_safe=True)
    assert "ON t.`g` <=> s._br_k_0 AND s._br_source_row\n" in merge
    assert "WHEN NOT MATCHED BY SOURCE" in merge
    # the all-NULL key's tombstone goes in only where the target holds that key
    assert "WHERE" not in merge.split(" s\nON")[0]
    dropped = sqlgen.merge_staging("s.t", "st", ["g", "h"], ["g", "h", "n"], delete_missing=False,
                                   null_safe=True, keep_null_tombstone=False)
    assert ("WHERE _br_st._br_present IS NOT NULL OR NOT (_br_st._br_k_0 IS NULL AND "
            "_br_st._br_k_1 IS NULL))") in dropped
    assert "ON t.`g` <=> s._br_k_0 " in sqlgen.new_key_collisions("s.t", "st", ["g"],
                                                                  null_safe=True)
