"""The strategy is one value: the replay rule from the analysis, the write from the strategy,
and both carried through the commit's metadata (pure, no Spark)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime

import pytest

from dbt.adapters.spark_batch_refresh.plan.config import BatchRefreshConfig
from dbt.adapters.spark_batch_refresh.plan.planner import Plan, UpstreamPoint
from dbt.adapters.spark_batch_refresh.plan.strategy import (
    REPLAY, REPLAY_RULES, Strategy, Write, backfills_checked, choose_write,
    replay_rule, writes_direct)
from dbt.adapters.spark_batch_refresh.sql import analysis as sa
from dbt.adapters.spark_batch_refresh.sql.sqlgen import INLINE_CHECK_MARKER, backfill_checked
from dbt.adapters.spark_batch_refresh.storage.commit_log import RefreshCommit

INTS = [("id", "int"), ("v", "bigint")]


def _rule(sql: str, key: tuple = (), upkeep: str = "recompute", moved=("raw.a",), columns=None):
    analysis = sa.analyze(sql, list(key))
    config = BatchRefreshConfig(unique_key=tuple(analysis.key), aggregate_upkeep=upkeep)
    return replay_rule(analysis, config, moved, columns)


def test_replay_rule_per_shape():
    rowwise = "select id, v * 2 as v from raw.a where v > 0"
    assert _rule(rowwise, ("id",)) is Strategy.ROWWISE
    assert _rule(rowwise) is Strategy.APPEND  # no key: inserts appended
    join = "select a.id, b.name from raw.a a join raw.b b on a.bid = b.id"
    assert _rule(join, ("id",), moved=("raw.a", "raw.b")) is Strategy.DELTA_JOIN
    agg = "select g, sum(v) as s, count(*) as n from raw.a group by g"
    assert _rule(agg) is Strategy.AFFECTED_KEYS
    assert _rule(agg, upkeep="delta") is Strategy.DELTA_AGGREGATE
    window = "select id, row_number() over (partition by g order by v) as r from raw.a"
    assert _rule(window, ("id",)) is Strategy.AFFECTED_KEYS
    ranked = ("with t as (select g, sum(v) as s from raw.a group by g) "
              "select g, s, rank() over (order by s) as r from t")
    assert _rule(ranked, ("g",), upkeep="delta") is Strategy.INTERMEDIATE


def test_ungroupable_output_columns_keep_the_recompute():
    rowwise = "select id, v from raw.a"
    assert _rule(rowwise, ("id",), columns=INTS) is Strategy.ROWWISE
    assert _rule(rowwise, ("id",), columns=[("id", "int"), ("v", "map<string,int>")]) \
        is Strategy.AFFECTED_KEYS


@pytest.mark.parametrize("strategy, keyed, rows, replaceable, in_place, write", [
    (Strategy.BACKFILL, True, 5, False, False, Write.CREATE),
    (Strategy.BACKFILL, True, 5, False, True, Write.MERGE_ALL),
    (Strategy.OVERWRITE, True, 0, False, False, Write.INSERT_OVERWRITE),
    (Strategy.APPEND, False, 3, False, False, Write.APPEND),
    (Strategy.DELTA_AGGREGATE, False, 1, False, False, Write.INSERT_OVERWRITE),  # global agg
    (Strategy.FULL, False, 9, False, False, Write.INSERT_OVERWRITE),
    (Strategy.ROWWISE, True, 0, False, False, Write.MARKER),
    (Strategy.ROWWISE, True, 4, True, False, Write.REPLACE_WHERE),
    (Strategy.AFFECTED_KEYS, True, 4, False, False, Write.MERGE),
    (Strategy.FULL, True, 4, True, False, Write.MERGE_ALL),
    # the whole model staged, even when empty: target rows it lacks are deleted
    (Strategy.INTERMEDIATE, True, 0, True, False, Write.MERGE_ALL),
])
def test_choose_write(strategy, keyed, rows, replaceable, in_place, write):
    assert choose_write(strategy, keyed=keyed, chunks=1, rows=rows, replaceable=replaceable,
                        in_place=in_place) is write


def test_what_is_written_straight_from_the_model():
    """Nothing to check before the write: an overwrite, and a keyless model's backfill or full
    recompute, a sidecar's included (built first, the model read from it); a key keeps the
    staging unless the backfill checks it in the write (backfills_checked)."""
    def direct(sql: str, strategy: Strategy, key: tuple = (), upkeep: str = "recompute") -> bool:
        analysis = sa.analyze(sql, list(key))
        config = BatchRefreshConfig(unique_key=tuple(analysis.key), aggregate_upkeep=upkeep)
        return writes_direct(strategy, config)

    rowwise = "select id, v * 2 as v from raw.a where v > 0"
    total = "select sum(v) as s, count(*) as n from raw.a"
    assert direct(rowwise, Strategy.BACKFILL)
    assert direct(rowwise, Strategy.FULL)
    assert direct(total, Strategy.BACKFILL)
    assert direct(rowwise, Strategy.OVERWRITE, ("id",))
    assert not direct(rowwise, Strategy.BACKFILL, ("id",))  # its keys checked first
    assert not direct("select g, sum(v) as s from raw.a group by g", Strategy.BACKFILL)  # inferred
    assert direct(total, Strategy.BACKFILL, upkeep="delta")  # the sidecar built first
    assert not direct(rowwise, Strategy.APPEND)


def test_which_keyed_backfills_check_their_keys_in_the_write():
    """A keyed backfill that replaces the target (a sidecar is built first)."""
    def checked(sql: str, key: tuple = (), upkeep: str = "recompute", replaces: bool = True,
                strategy=Strategy.BACKFILL) -> bool:
        analysis = sa.analyze(sql, list(key))
        config = BatchRefreshConfig(unique_key=tuple(analysis.key), aggregate_upkeep=upkeep)
        return backfills_checked(strategy, config, replaces_target=replaces)

    rowwise = "select id, v * 2 as v from raw.a where v > 0"
    grouped = "select g, sum(v) as s from raw.a group by g"
    assert checked(rowwise, ("id",)) and checked(grouped)
    assert not checked(rowwise)  # keyless: writes_direct
    assert not checked(rowwise, ("id",), replaces=False)  # rebuilt in place, as a difference
    assert checked(grouped, upkeep="delta")  # the sidecar built first
    assert not checked(rowwise, ("id",), strategy=Strategy.FULL)


def test_a_checked_backfill_fails_on_a_null_or_repeated_key():
    sql = backfill_checked("select * from t", ["a", "b", "n"], ["a", "b"], ["a", "b"])
    assert "count(*) OVER (PARTITION BY _br_m.`a`, _br_m.`b`)" in sql
    assert "WHEN `a` IS NULL OR `b` IS NULL THEN raise_error(" in sql
    assert "WHEN _br_n = 1 THEN true" in sql
    assert INLINE_CHECK_MARKER in sql


def test_an_intermediates_touched_partitions_merge_by_key():
    # rows and tombstones of the touched partitions: the rest of the target stays
    assert choose_write(Strategy.INTERMEDIATE, keyed=True, chunks=1, rows=5, replaceable=False,
                        in_place=False, partial=True) is Write.MERGE
    assert choose_write(Strategy.INTERMEDIATE, keyed=True, chunks=1, rows=0, replaceable=False,
                        in_place=False, partial=True) is Write.MARKER


def test_several_chunks_of_nothing_still_merge():
    assert choose_write(Strategy.ROWWISE, keyed=True, chunks=2, rows=0, replaceable=False,
                        in_place=False) is Write.MERGE


def test_a_strategy_is_its_value_in_text_json_and_dicts():
    assert str(Strategy.DELTA_JOIN) == f"{Strategy.DELTA_JOIN}" == "delta_join"
    assert json.dumps({"s": Strategy.ROWWISE}) == '{"s": "rowwise"}'
    assert {"rowwise": 1}[Strategy.ROWWISE] == 1 and Strategy("append") is Strategy.APPEND
    assert {s.action for s in REPLAY_RULES} == {REPLAY}
    assert Strategy.AFFECTED_KEYS.staged_from == "snapshot" and Strategy.FULL.staged_from is None


def test_plan_and_commit_carry_the_rule():
    t = datetime(2030, 1, 1)
    plan = Plan("replay", "upstream moved", "incremental", pinned={"a": UpstreamPoint(3, t)},
                consumed={"a": UpstreamPoint(1, t)})
    assert plan.strategy is Strategy.AFFECTED_KEYS and plan.ranges() == {"a": (2, 3)}
    assert replace(plan, rule=Strategy.ROWWISE).strategy is Strategy.ROWWISE
    assert replace(plan, action="overwrite", rule=Strategy.ROWWISE).strategy is Strategy.OVERWRITE
    commit = RefreshCommit(
        model_id="m", refresh=2, plan_id="p", run_id="p", action="replay", mode="incremental",
        reason="r", fingerprint="f", columns="c", pinned=plan.pinned, consumed=plan.consumed,
        rule=Strategy.DELTA_JOIN)
    entry = {"version": 4, "timestamp": t, "userMetadata": commit.to_metadata()}
    back = RefreshCommit.from_history(entry, "m")
    assert back is not None and back.strategy is Strategy.DELTA_JOIN
    older = json.loads(commit.to_metadata())
    older["strategy"] = "partition_recompute"  # a rule this version does not know
    back = RefreshCommit.from_history({**entry, "userMetadata": json.dumps(older)}, "m")
    assert back is not None and back.strategy is Strategy.AFFECTED_KEYS


def test_run_values_leave_the_fingerprint_alone():
    sql = "select id, '{t}' as loaded_at, '{i}' as loaded_by from raw.a"
    one = sql.format(t="2026-11-25 18:30:00.123456+00:00", i="0d8f7c1e-aaaa-bbbb-cccc-1234567890ab")
    two = sql.format(t="2026-11-26 07:00:00.000001+00:00", i="5e0c2a9b-dddd-eeee-ffff-0987654321ba")
    first = sa.fingerprint(sa.analyze(one), {}, ("2026-11-25 18:30:00.123456+00:00",
                                                 "0d8f7c1e-aaaa-bbbb-cccc-1234567890ab"))
    second = sa.fingerprint(sa.analyze(two), {}, ("2026-11-26 07:00:00.000001+00:00",
                                                  "5e0c2a9b-dddd-eeee-ffff-0987654321ba"))
    assert first == second
    assert sa.fingerprint(sa.analyze(one), {}) != sa.fingerprint(sa.analyze(two), {})
    edited = one.replace("raw.a", "raw.b")
    assert sa.fingerprint(sa.analyze(edited), {}, ("2026-11-25 18:30:00.123456+00:00",)) != first


def test_new_keys_above_the_ceiling_are_inserted_blind():
    def write(**kw):
        return choose_write(Strategy.ROWWISE, keyed=True, rows=kw.pop("rows", 5),
                            replaceable=False, in_place=False, **kw)
    assert write(chunks=1, unseen=True) is Write.INSERT_NEW
    assert write(chunks=1, unseen=False) is Write.MERGE
    assert write(chunks=2, unseen=True) is Write.MERGE  # chunks merge by key
    assert write(chunks=1, unseen=True, rows=0) is Write.MARKER


def test_an_upsert_staging_is_replaced_by_key_where_the_session_can():
    def write(**kw):
        return choose_write(Strategy.ROWWISE, keyed=True, rows=kw.pop("rows", 5),
                            in_place=False, **kw)
    assert write(chunks=1, replaceable=True, upsert=True) is Write.REPLACE_USING
    assert write(chunks=1, replaceable=False, upsert=True) is Write.REPLACE_USING  # any key count
    assert write(chunks=1, replaceable=True, upsert=False) is Write.REPLACE_WHERE
    assert write(chunks=2, replaceable=False, upsert=True) is Write.MERGE  # chunks merge by key
    assert write(chunks=1, replaceable=False, upsert=True, rows=0) is Write.MARKER
    assert write(chunks=1, replaceable=False, upsert=True, unseen=True) is Write.INSERT_NEW
