"""The benchmark driver's pure parts: arguments, cleanup, change batches, the round loop with
Spark and dbt faked (no Spark, no dbt run)."""

import importlib.util
import math
import os
import re

import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "run.py")
_spec = importlib.util.spec_from_file_location("bench_run", _PATH)
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)


def test_cleanup_deletes_the_work_dir_unless_kept(tmp_path):
    work = tmp_path / "bench-x"
    (work / "session" / "warehouse").mkdir(parents=True)
    bench = run.Bench.__new__(run.Bench)  # no dbt project, no Spark
    bench.work, bench.spark = str(work), None
    bench.cleanup()
    assert not work.exists()
    assert run.parse_args(["--keep"]).keep and not run.parse_args([]).keep


def test_incremental_models_can_be_left_out():
    bench = run.Bench.__new__(run.Bench)
    bench.args = run.parse_args(["--shapes", "rowwise", "--no-incremental"])
    assert bench.all_models() == ["br_rowwise", "tbl_rowwise", "gate_rowwise", "ovh_view", "ovh_table"]
    bench.args = run.parse_args(["--shapes", "rowwise"])
    assert "inc_rowwise" in bench.all_models()


def test_scales_and_fractions_parse():
    args = run.parse_args(["--scales", "1e6,10000000", "--fractions", "0.001", "--shapes", "agg"])
    assert (args.scales, args.fractions, args.shapes) == ([1_000_000, 10_000_000], [0.001], ["agg"])


def test_distributions_parse():
    assert run.parse_args([]).distributions == ["uniform"]
    args = run.parse_args(["--distributions", "recent,uniform,append,recent"])
    assert args.distributions == ["recent", "uniform", "append"]  # order kept, duplicates dropped
    for bad in ("bogus", "uniform,bogus", ","):
        with pytest.raises(SystemExit):
            run.parse_args(["--distributions", bad])


# ---------------------------------------------------------------- change batches (bench/data.py)
data = run.data
SOURCE = re.compile(
    r"select (?:(\d+) \+ )?pmod\(i \* (\d+) \+ (\d+), (\d+)\) as id, "
    r"if\(i < (\d+), 'u', 'd'\) as op\n"
    r"  from \(select id as i from range\((\d+)\)\)")
INSERTS = re.compile(r"select (\d+) \+ id as id, 'i' as op from range\((\d+)\)")


def batch(sql):
    """The (id, op) rows of a change batch's MERGE source, evaluated from the SQL text."""
    source = sql.split("using (\n", 1)[1].split("\n) s\n", 1)[0]
    rows = []
    m = SOURCE.search(source)
    if m:
        base, mult, offset, modulus, upd, count = (int(g or 0) for g in m.groups())
        rows += [(base + (i * mult + offset) % modulus, "u" if i < upd else "d")
                 for i in range(count)]
    first, ins = (int(g) for g in INSERTS.search(source).groups())
    rows += [(first + i, "i") for i in range(ins)]
    assert source.count("select") == (2 if m else 1) + (1 if m else 0)  # nothing else in it
    return source, rows


def ops(rows):
    return tuple(sum(1 for _, op in rows if op == o) for o in "iud")


def test_uniform_batch_is_the_default_and_draws_from_all_ids():
    n, next_id = 100_000, 100_250
    assert data.change_counts(n, 0.01) == data.change_counts(n, 0.01, "uniform") == (400, 400, 200)
    sql = data.change_sql(n, 0.01, 3, next_id)
    assert sql == data.change_sql(n, 0.01, 3, next_id, "uniform")
    _, rows = batch(sql)
    assert ops(rows) == (400, 400, 200)
    touched = [i for i, op in rows if op != "i"]
    assert len(set(touched)) == len(touched) and all(0 <= i < n for i in touched)
    assert not all(i >= next_id - data.window(n) for i in touched)  # not the recent window
    assert [i for i, op in rows if op == "i"] == list(range(next_id, next_id + 400))


@pytest.mark.parametrize("n,fraction,expected", [
    (100_000, 0.001, (40, 40, 20)),  # 60 touched rows fit in the 1,000-id window
    (100_000, 0.1, (4000, 667, 333)),  # 6,000 capped to the window, 2:1 kept
    (1_000_000, 0.01, (4000, 4000, 2000)),  # 6,000 fit in the 10,000-id window
    (50, 0.5, (10, 1, 0)),  # window of 1 id
])
def test_recent_batch_touches_only_the_newest_ids(n, fraction, expected):
    next_id = n + 777  # earlier rounds inserted 777 rows
    assert data.change_counts(n, fraction, "recent") == expected
    sql = data.change_sql(n, fraction, 5, next_id, "recent")
    assert sql == data.change_sql(n, fraction, 5, next_id, "recent")  # deterministic
    _, rows = batch(sql)
    assert ops(rows) == expected
    lo = next_id - data.window(n)
    touched = [i for i, op in rows if op != "i"]
    assert len(set(touched)) == len(touched)
    assert all(lo <= i < next_id for i in touched), (lo, next_id, min(touched), max(touched))
    inserted = [i for i, op in rows if op == "i"]
    assert inserted == list(range(next_id, next_id + expected[0]))
    base, _, _, modulus, count = data.touched_ids(n, fraction, 5, next_id, "recent")
    assert (base, base + modulus, count) == (lo, next_id, expected[1] + expected[2])


def test_recent_picks_differ_by_round_and_fill_a_full_window():
    n, next_id = 100_000, 104_000
    _, a = batch(data.change_sql(n, 0.1, 1, next_id, "recent"))
    _, b = batch(data.change_sql(n, 0.1, 2, next_id, "recent"))
    assert a != b
    assert sorted(i for i, op in a if op != "i") == list(range(next_id - 1000, next_id))


def test_recent_multiplier_stays_coprime_with_the_window():
    assert data._multiplier(1000) == data.PRIME
    m = data._multiplier(2 * data.PRIME)
    assert math.gcd(m, 2 * data.PRIME) == 1


def test_append_batch_is_inserts_only():
    n, next_id = 100_000, 100_000
    assert data.change_counts(n, 0.01, "append") == (1000, 0, 0)
    assert data.change_counts(n, 0.0, "append") == (1, 0, 0)
    sql = data.change_sql(n, 0.01, 2, next_id, "append")
    source, rows = batch(sql)
    assert "'u'" not in source and "'d'" not in source and "pmod" not in source
    assert ops(rows) == (1000, 0, 0)
    assert [i for i, _ in rows] == list(range(next_id, next_id + 1000))
    assert sql.startswith("merge into raw.fact t") and sql.count("merge into") == 1


def test_upsert_batch_updates_and_inserts_without_deletes():
    n, next_id = 100_000, 100_000
    assert data.change_counts(n, 0.01, "upsert") == (400, 600, 0)
    source, rows = batch(data.change_sql(n, 0.01, 2, next_id, "upsert"))
    assert ops(rows) == (400, 600, 0)
    assert all(0 <= i < n for i, op in rows if op == "u")


def test_unknown_distribution_is_refused():
    with pytest.raises(ValueError):
        data.change_counts(1000, 0.1, "zipf")
    with pytest.raises(ValueError):
        data.change_sql(1000, 0.1, 1, 1000, "zipf")


# ---------------------------------------------------------------- rounds (Spark and dbt faked)
class _Node:
    def __init__(self, name):
        self.name = name


class _Result:
    def __init__(self, name):
        self.node, self.status, self.execution_time = _Node(name), "success", 1.0
        self.message = ""
        self.adapter_response = {"action": "replay", "statements": 3, "writes": 1}


def test_every_record_and_round_carries_its_distribution(tmp_path, capsys):
    bench = run.Bench.__new__(run.Bench)
    bench.args = run.parse_args(["--scales", "1000", "--fractions", "0.01,0.1", "--reps", "2",
                                 "--shapes", "rowwise", "--distributions", "recent,append"])
    bench.records, bench.traces, bench.round_no, bench.next_id = [], [], 0, 0
    bench.trace = str(tmp_path / "none.trace")
    sqls = []
    bench.sql = lambda statement: sqls.append(statement) or []
    bench.version = lambda table: 0
    bench.signature = lambda sql: (1, "h")
    bench.dbt_run = lambda select, full_refresh=False: [_Result(name) for name in select]
    bench.start = lambda: None
    bench.spark = None
    warmed = []
    bench.warm_up = lambda: warmed.append(1)
    saved = []
    bench.save = lambda result: saved.append(len(result["records"]))

    def build(n):
        bench.next_id, bench.consumed = n, 0
        return {}

    bench.build = build
    result = bench.run()
    records = result["records"]
    rounds = {(r["distribution"], r["fraction"], r["rep"]) for r in records}
    assert rounds == {(d, f, rep) for d in ("recent", "append") for f in (0.01, 0.1)
                      for rep in (1, 2)}
    assert len(saved) == 8  # partial results after every round
    assert len(warmed) == 8  # each round's queries run once before its timed writes
    assert result["meta"]["distributions"] == ["recent", "append"]
    per_round = len(records) // 8
    assert {r["changes"] for r in records if r["distribution"] == "append"} == {10, 100}
    assert {r["changes"] for r in records if r["distribution"] == "recent"} == {10, 50}
    merges = [s for s in sqls if s.startswith("merge into raw.fact")]
    assert len(merges) == 8 and all("'u'" not in m.split(") s")[0] for m in merges[4:])
    # The summary line of a round lists that round's records only (not the other distribution's).
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "]   " in ln]
    assert len(lines) == 8 and all(ln.count("s,") == per_round - 1 for ln in lines)
