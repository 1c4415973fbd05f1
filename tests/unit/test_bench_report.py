"""The benchmark's pure result code: medians, merging result files, change distributions, tables,
targets (no Spark; matplotlib stubbed)."""

import importlib.util
import os
import sys
from unittest import mock

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "report.py")
_spec = importlib.util.spec_from_file_location("bench_report", _PATH)
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)


def rec(method, seconds, scale=1000, shape="rowwise", fraction=0.01, correct=True, **kw):
    return dict(scale=scale, shape=shape, fraction=fraction, method=method, seconds=seconds,
                changes=int(scale * fraction), rep=1, correct=correct, **kw)


def test_median_and_summary():
    assert report.median([3.0, 1.0, 2.0]) == 2.0
    assert report.median([]) is None
    s = report.summarize([rec("replay", 4.0, statements=20, writes=4), rec("replay", 2.0,
                          statements=22, writes=4), rec("replay", 9.0, statements=21, writes=4)])
    cell = s[(1000, "rowwise", "uniform", 0.01, "replay")]
    assert (cell["seconds"], cell["statements"], cell["writes"], cell["reps"]) == (4.0, 21, 4, 3)


def test_one_wrong_repetition_marks_the_cell_wrong():
    s = report.summarize([rec("incremental", 1.0), rec("incremental", 1.0, correct=False)])
    assert s[(1000, "rowwise", "uniform", 0.01, "incremental")]["correct"] is False
    table = report.main_table(s)
    assert "**wrong**" in table


def test_later_result_file_replaces_a_cell():
    a = {"records": [rec("replay", 5.0), rec("rebuild", 8.0)]}
    b = {"records": [rec("replay", 3.0)]}
    merged = report.summarize(report.merge_records([a, b]))
    assert merged[(1000, "rowwise", "uniform", 0.01, "replay")]["seconds"] == 3.0
    assert merged[(1000, "rowwise", "uniform", 0.01, "rebuild")]["seconds"] == 8.0


def test_targets_ratio_and_fixed_costs():
    recs = [rec("replay", 2.6), rec("hand_merge", 2.0), rec("rebuild", 5.2),
            rec("gated_skip", 1.25), rec("overhead_view", 1.0), rec("noop", 1.2)]
    text = report.targets(report.summarize(recs))
    assert text.startswith("Issue #15's targets")
    assert "1.30x" in text and "**met** (1 of 1 cells)" in text
    assert "skip **met** (1 of 1 scales), no-op **met** (1 of 1 scales)" in text
    assert "skip +0.25 s, worst no-op +0.20 s" in text
    assert "not measured" in text  # no 10M / 100M run
    assert "   - uniform: rowwise (1%: 1,000)" in text  # replay beat the rebuild at 1,000 rows
    assert "Targets 1-3" not in text and "10M -> 100M" not in text  # the old targets are gone


def test_statement_kinds():
    assert report.statement_kind("MERGE INTO s_batch_refresh.batch_refresh_state t") .startswith("state")
    assert report.statement_kind("merge into bench.br_rowwise t using x") == "target MERGE (write)"
    assert report.statement_kind("describe history raw.fact limit 1").startswith("DESCRIBE HISTORY")


def test_targets_no_op_margin_is_not_rounded_across_the_limit():
    recs = [rec("overhead_view", 0.07), rec("noop", 0.38), rec("gated_skip", 0.2)]
    text = report.targets(report.summarize(recs))
    assert "no-op **not met** by 0.01 s (0 of 1 scales)" in text and "+0.31 s" in text


def test_write_report_creates_the_output_folder(tmp_path):
    out = tmp_path / "new" / "dir"
    meta = dict(started="now", scales=[1000], fractions=[0.01], shapes=["rowwise"], reps=1,
                wall_s=60, cpus=2, memory="1 kB", spark="4.2.0", driver_memory="1g")
    report.write_report([{"records": [rec("replay", 1.0)], "traces": [], "meta": meta}],
                        str(out), "t", charts=False)
    assert (out / "t.md").exists()


META = dict(started="now", scales=[1000], fractions=[0.01], shapes=["rowwise"], reps=1,
            wall_s=60, cpus=2, memory="1 kB", spark="4.2.0", driver_memory="1g")


def two_distributions():
    """One result file: an old-style record (no distribution: uniform) and recent records."""
    return {"meta": {**META, "distributions": ["uniform", "recent"]}, "traces": [], "records": [
        rec("replay", 4.0, statements=28, writes=4), rec("hand_merge", 2.0),
        rec("rebuild", 8.0),
        rec("replay", 1.0, distribution="recent", statements=20, writes=3),
        rec("hand_merge", 0.5, distribution="recent"), rec("rebuild", 7.0, distribution="recent"),
        rec("noop", 0.5), rec("noop", 0.7, distribution="recent"),
    ]}


def test_a_record_without_distribution_is_uniform_and_distributions_are_separate_cells():
    s = report.summarize(report.merge_records([two_distributions()]))
    assert s[(1000, "rowwise", "uniform", 0.01, "replay")]["seconds"] == 4.0
    assert s[(1000, "rowwise", "recent", 0.01, "replay")]["seconds"] == 1.0
    assert s[(1000, "rowwise", "recent", 0.01, "replay")]["reps"] == 1
    explicit = report.summarize([rec("replay", 4.0, distribution="uniform")])
    assert list(explicit) == [(1000, "rowwise", "uniform", 0.01, "replay")]


def test_a_later_file_replaces_only_its_own_distribution():
    later = {"records": [rec("replay", 3.0, distribution="recent")]}
    s = report.summarize(report.merge_records([two_distributions(), later]))
    assert s[(1000, "rowwise", "recent", 0.01, "replay")]["seconds"] == 3.0
    assert s[(1000, "rowwise", "uniform", 0.01, "replay")]["seconds"] == 4.0


def test_main_table_has_a_distribution_column():
    table = report.main_table(report.summarize(report.merge_records([two_distributions()])))
    head, rule, uniform, recent = table.splitlines()
    assert head.split(" | ")[:4] == ["| fact rows", "shape", "distribution", "change"]
    assert head.endswith("| replay statements / commits |")
    assert rule.count("|") == head.count("|")
    assert uniform.startswith("| 1,000 | rowwise | uniform | 1% (10 rows) | 4.0 | 2.0 | 8.0 |")
    assert uniform.endswith("| 28 / 4 |")
    assert recent.startswith("| 1,000 | rowwise | recent | 1% (10 rows) | 1.0 | 0.5 | 7.0 |")
    assert recent.endswith("| 20 / 3 |")


def test_targets_count_every_distribution():
    text = report.targets(report.summarize(report.merge_records([two_distributions()])))
    assert "over the uniform change distribution" not in text
    # uniform 4.0 / 2.0 and recent 1.0 / 0.5: both cells count, each named with its distribution
    assert "**not met** by 0.70x (0 of 2 cells)" in text
    assert "2.00x (1,000 rows, uniform, 1%)" in text and "distributions uniform, recent." in text


def test_breakdown_and_render_with_two_distributions():
    result = two_distributions()
    for dist in (None, "recent"):
        t = dict(scale=1000, fraction=0.01, rep=1, model="br_rowwise", action="replay",
                 statements=[[0.5, "merge into bench.br_rowwise t using x"]])
        if dist:
            t["distribution"] = dist
        result["traces"].append(t)
    text = report.replay_breakdown(result["traces"], report.merge_records([result]))
    lines = text.splitlines()
    assert lines[0].startswith("| fact rows | distribution | model | action |")
    assert "| 1,000 | uniform | br_rowwise | replay | target MERGE (write) | 1 | 0.50 |" in lines
    assert "| 1,000 | recent | br_rowwise | replay | target MERGE (write) | 1 | 0.50 |" in lines
    # outside SQL = the record of the same distribution: 4.0 - 0.5 and 1.0 - 0.5
    assert "| 1,000 | uniform | br_rowwise | replay | (outside SQL: dbt, Jinja, planning) " \
           "| - | 3.50 |" in lines
    assert "| 1,000 | recent | br_rowwise | replay | (outside SQL: dbt, Jinja, planning) " \
           "| - | 0.50 |" in lines
    md = report.render([result])
    assert "distributions ['uniform', 'recent']" in md


def stub_matplotlib(monkeypatch):
    """matplotlib as a stub whose subplots() returns a figure and a grid of axes."""
    plt = mock.MagicMock()
    plt.subplots.side_effect = lambda *a, **kw: (mock.MagicMock(), [[mock.MagicMock()] * a[1]]
                                                 if a else mock.MagicMock())
    monkeypatch.setitem(sys.modules, "matplotlib", mock.MagicMock(pyplot=plt))
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", plt)


def test_charts_do_not_crash_with_several_distributions(tmp_path, monkeypatch):
    """matplotlib replaced by a stub: one time-vs-fraction chart per scale and distribution."""
    stub_matplotlib(monkeypatch)
    result = two_distributions()
    result["records"] += [rec("replay", 2.0, scale=10_000, fraction=0.001),
                          rec("replay", 3.0, distribution="append")]
    paths = [os.path.basename(p) for p in report.make_charts([result], str(tmp_path), "t")]
    assert paths == ["t_time_vs_fraction_1000.png", "t_time_vs_fraction_10000.png",
                     "t_time_vs_fraction_1000_recent.png", "t_time_vs_fraction_1000_append.png"]


def line(text, number):
    """One numbered target of the Targets text."""
    return next(t for t in text.splitlines() if t.startswith(f"{number}. "))


def commit_recs(replay_writes=1, replay_log=1, skip_writes=0, noop_writes=0, **kw):
    return [rec("replay", 1.0, writes=replay_writes, target_commits=replay_log, **kw),
            rec("gated_skip", 0.2, writes=skip_writes, target_commits=0, **kw),
            rec("noop", 0.2, writes=noop_writes, target_commits=0, **kw)]


def test_target_commits_met():
    text = line(report.targets(report.summarize(commit_recs())), 1)
    assert "replay **met** (adapter count: 1 in 1 cells; target's Delta log: 1 in 1 cells)" in text
    assert "gated skip **met** (adapter count: 0 in 1 cells; target's Delta log: 0 in 1 cells)" \
        in text
    # the no-op's target_commits is written as 0 by bench/run.py, not read from the log
    assert "no-op **met** (adapter count: 0 in 1 cells; its Delta log is not read" in text
    assert "taken as single-chunk." in text


def test_target_commits_not_met_on_any_repetition():
    recs = commit_recs(replay_writes=4) + commit_recs(skip_writes=1, noop_writes=2) \
        + [rec("replay", 1.0, writes=1, target_commits=1)]  # a third rep of the same cell
    text = line(report.targets(report.summarize(recs)), 1)
    assert "replay **not met** by 3 commits (adapter count: 1-4 in 1 cells;" in text
    assert "gated skip **not met** by 1 commit (adapter count: 0-1 in 1 cells;" in text
    assert "no-op **not met** by 2 commits" in text
    # the target's log disagreeing with the adapter's count fails too
    logged = line(report.targets(report.summarize(commit_recs(replay_log=2))), 1)
    assert "replay **not met** by 1 commit (adapter count: 1 in 1 cells; " \
           "target's Delta log: 2 in 1 cells)" in logged


def test_target_commits_not_measured():
    recs = [rec("replay", 1.0, writes="", target_commits=1), rec("gated_skip", 0.2)]
    text = line(report.targets(report.summarize(recs)), 1)
    assert "replay **not measured** (no record carries the adapter's write count)" in text
    assert "gated skip **not measured**" in text and "no-op **not measured**" in text


def test_target_commits_leave_out_replays_that_may_be_multi_chunk():
    recs = commit_recs(scale=100_000_000, fraction=0.1)  # 10M changed rows
    text = line(report.targets(report.summarize(recs)), 1)
    assert "replay **not measured** (no single-chunk replay cell)" in text
    assert "1 larger replay cells are left out." in text
    # a recorded chunk count is used as it is
    chunked = [rec("replay", 1.0, writes=1, target_commits=1, chunks=1, scale=100_000_000,
                   fraction=0.1)]
    text = line(report.targets(report.summarize(chunked)), 1)
    assert "replay **met**" in text and "no chunk count" not in text


def hand(replay, merge, scale=1000, fraction=0.01, dist="uniform"):
    return [rec("replay", replay, scale=scale, fraction=fraction, distribution=dist),
            rec("hand_merge", merge, scale=scale, fraction=fraction, distribution=dist)]


def test_target_hand_merge_every_cell():
    met = line(report.targets(report.summarize(
        hand(1.2, 1.0) + hand(0.5, 1.0, scale=1_000_000, dist="append"))), 2)
    assert "**met** (2 of 2 cells)" in met
    assert "from 0.50x (1,000,000 rows, append, 1%) to 1.20x (1,000 rows, uniform, 1%)" in met
    assert "cells at 1,000, 1,000,000 rows; distributions uniform, append." in met
    not_met = line(report.targets(report.summarize(
        hand(1.2, 1.0) + hand(1.5, 1.0, fraction=0.001, dist="recent"))), 2)
    assert "**not met** by 0.20x (1 of 2 cells)" in not_met
    assert "to 1.50x (1,000 rows, recent, 0.1%)" in not_met
    missing = line(report.targets(report.summarize([rec("replay", 1.0)])), 2)
    assert "**not measured** (no row-wise cell with both a replay and a hand MERGE)" in missing


def vs_rebuild(scale, shape, dist, replay, rebuild, fraction=0.001):
    return [rec("replay", replay, scale=scale, shape=shape, fraction=fraction, distribution=dist),
            rec("rebuild", rebuild, scale=scale, shape=shape, fraction=fraction,
                distribution=dist)]


def crossover_recs(agg_append=0.5):
    return (vs_rebuild(10_000_000, "rowwise", "recent", 1.0, 4.0)
            + vs_rebuild(10_000_000, "rowwise", "append", 1.0, 2.0)
            + vs_rebuild(10_000_000, "agg", "recent", 3.0, 4.0)
            + vs_rebuild(10_000_000, "agg", "append", agg_append, 1.0))


def test_target_crossover_at_10m():
    met = line(report.targets(report.summarize(crossover_recs())), 3)
    assert ": **met**. Replay / rebuild: rowwise/recent 0.25 **met**; rowwise/append 0.50 " \
           "**met**; agg/recent 0.75 **met**; agg/append 0.50 **met**." in met
    # "faster": a tie with the rebuild is not met
    tie = line(report.targets(report.summarize(crossover_recs(agg_append=1.0))), 3)
    assert "**not met** (3 of 4 met)" in tie and "agg/append 1.00 **not met** by 0.00" in tie
    slower = line(report.targets(report.summarize(crossover_recs(agg_append=1.3))), 3)
    assert "agg/append 1.30 **not met** by 0.30" in slower
    # uniform changes and other fractions are not the target's cells
    other = (vs_rebuild(10_000_000, "rowwise", "uniform", 1.0, 4.0)
             + vs_rebuild(10_000_000, "rowwise", "recent", 1.0, 4.0, fraction=0.01)
             + vs_rebuild(10_000_000, "agg", "recent", 5.0, 4.0)
             + [rec("replay", 1.0, scale=10_000_000, shape="agg", fraction=0.001,
                    distribution="append")])
    text = line(report.targets(report.summarize(other)), 3)
    assert "**not met** (0 of 4 met, 3 not measured)" in text
    assert "rowwise/recent **not measured** (no replay or rebuild cell)" in text
    assert "agg/append **not measured** (no rebuild cell)" in text
    none = line(report.targets(report.summarize([rec("replay", 1.0)])), 3)
    assert "**not measured** (4 of 4 missing)" in none


def test_crossover_information_per_distribution():
    recs = (vs_rebuild(1_000_000, "rowwise", "recent", 5.0, 4.0)
            + vs_rebuild(10_000_000, "rowwise", "recent", 1.0, 4.0)
            + vs_rebuild(10_000_000, "rowwise", "uniform", 5.0, 4.0))
    text = report.targets(report.summarize(recs)).splitlines()
    start = text.index("   Crossover (smallest measured table where replay beats the rebuild, "
                       "per change fraction), per change distribution:")
    assert text[start - 1].startswith("3. ") and text[start + 3].startswith("4. ")
    assert text[start + 1:start + 3] == ["   - uniform: rowwise (0.1%: none up to 10,000,000)",
                                         "   - recent: rowwise (0.1%: 10,000,000)"]


def test_target_100m():
    recs = (vs_rebuild(100_000_000, "rowwise", "recent", 0.8, 10.0)
            + vs_rebuild(100_000_000, "rowwise", "uniform", 6.0, 10.0)
            + vs_rebuild(100_000_000, "agg", "uniform", 3.0, 10.0))
    text = line(report.targets(report.summarize(recs)), 4)
    assert "recent <= 0.10: 0.08 **met**; uniform <= 0.50: 0.60 **not met** by 0.10." in text
    # the aggregate: information only, no verdict
    assert text.endswith("For information, agg replay / rebuild: recent -, uniform 0.30.")
    missing = line(report.targets(report.summarize(
        vs_rebuild(100_000_000, "rowwise", "recent", 0.8, 10.0, fraction=0.01)
        + [rec("replay", 4.0, scale=100_000_000, fraction=0.001, distribution="uniform")])), 4)
    assert "recent <= 0.10: **not measured** (no replay or rebuild cell)" in missing
    assert "uniform <= 0.50: **not measured** (no rebuild cell)" in missing


def test_target_skip_and_noop_above_overhead():
    recs = [rec("overhead_view", 0.1), rec("gated_skip", 0.4), rec("noop", 0.3),
            rec("noop", 0.35, shape="agg"),
            rec("overhead_view", 0.1, scale=10_000), rec("gated_skip", 0.5, scale=10_000),
            rec("noop", 0.9, scale=10_000, shape="agg")]
    text = line(report.targets(report.summarize(recs)), 5)
    assert "<= 0.3 s above dbt's per-model overhead" in text
    assert "skip **not met** by 0.10 s (1 of 2 scales), no-op **not met** by 0.50 s " \
           "(1 of 2 scales)" in text
    assert "1,000 rows: skip +0.30 s, worst no-op +0.25 s (overhead 0.10 s)" in text
    none = line(report.targets(report.summarize([rec("gated_skip", 0.4), rec("noop", 0.3)])), 5)
    assert "skip **not measured** (no gated skip and `select 1` view cells), no-op " \
           "**not measured**" in none


META = dict(started="2026-11-27", scales=[1], fractions=[0.01], shapes=["rowwise"], reps=1,
            wall_s=60, cpus=2, memory="1", spark="4.2.0", driver_memory="8g")


def test_strategy_targets_judge_auto_against_forced_and_rebuild():
    recs = []
    for scale, auto in ((100_000, 1.0), (1_000_000, 2.0)):
        recs += [rec("auto", auto, scale=scale, action="overwrite"), rec("replay", 3.0, scale=scale),
                 rec("overwrite", 1.0, scale=scale), rec("full", 4.0, scale=scale),
                 rec("rebuild", 1.0, scale=scale)]
    summary = report.summarize(recs)
    assert report.strategy_ratios(summary)[(100_000, "rowwise", "uniform", 0.01)] == (1.0, 1.0)
    text = report.strategy_targets(summary)
    assert "1. `auto` <= 1.15x the fastest forced strategy in at least 90% of cells: " \
           "**not met** (1 of 2 cells, 50%)." in text
    assert "every cell: **not met** by 0.50x (worst 2.00x, 1,000,000 rowwise uniform 1%; " \
           "1 of 2 cells over)." in text
    assert "the rebuild in every cell: **not met** by 0.90x" in text
    assert "### Strategies" in report.render([{"records": recs, "meta": META}])
    assert report.strategy_targets(report.summarize([rec("replay", 1.0)])) == ""


def test_strategies_chart_is_drawn_when_auto_cells_exist(tmp_path, monkeypatch):
    stub_matplotlib(monkeypatch)
    recs = [rec("auto", 1.0), rec("overwrite", 1.0), rec("rebuild", 1.0)]
    paths = [os.path.basename(p) for p in report.make_charts([{"records": recs}], str(tmp_path), "t")]
    assert "t_strategies.png" in paths
