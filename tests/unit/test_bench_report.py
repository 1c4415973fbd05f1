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
            rec("gated_skip", 1.5), rec("overhead_view", 1.0), rec("noop", 1.2)]
    text = report.targets(report.summarize(recs))
    assert "1.30x" in text and "**met** (1 of 1 cells)" in text
    assert "skip **met**, no-op **met** (1 of 1 scales)" in text
    assert "skip +0.50 s, worst no-op +0.20 s" in text
    assert "not measured" in text  # no 100M run
    assert "rowwise (1%: 1,000)" in text  # crossover: replay beat the rebuild at 1,000 rows


def test_statement_kinds():
    assert report.statement_kind("MERGE INTO s_batch_refresh.batch_refresh_state t") .startswith("state")
    assert report.statement_kind("merge into bench.br_rowwise t using x") == "target MERGE (write)"
    assert report.statement_kind("describe history raw.fact limit 1").startswith("DESCRIBE HISTORY")


def test_targets_no_op_margin_is_not_rounded_across_the_limit():
    recs = [rec("overhead_view", 0.07), rec("noop", 1.08), rec("gated_skip", 0.2)]
    text = report.targets(report.summarize(recs))
    assert "no-op **not met** (0 of 1 scales)" in text and "+1.01 s" in text


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


def test_targets_use_the_uniform_cells():
    text = report.targets(report.summarize(report.merge_records([two_distributions()])))
    assert "over the uniform change distribution" in text and "recent are in the table" in text
    assert "**not met** (0 of 1 cells)" in text and "2.00x" in text  # uniform 4.0 / 2.0 only
    only_uniform = report.targets(report.summarize([rec("replay", 2.6), rec("hand_merge", 2.0)]))
    assert "distribution" not in only_uniform  # old result files read as before


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


def test_charts_do_not_crash_with_several_distributions(tmp_path, monkeypatch):
    """matplotlib replaced by a stub: one time-vs-fraction chart per scale and distribution."""
    plt = mock.MagicMock()
    plt.subplots.side_effect = lambda *a, **kw: (mock.MagicMock(), [[mock.MagicMock()] * a[1]]
                                                 if a else mock.MagicMock())
    mpl = mock.MagicMock(pyplot=plt)
    monkeypatch.setitem(sys.modules, "matplotlib", mpl)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", plt)
    result = two_distributions()
    result["records"] += [rec("replay", 2.0, scale=10_000, fraction=0.001),
                          rec("replay", 3.0, distribution="append")]
    paths = [os.path.basename(p) for p in report.make_charts([result], str(tmp_path), "t")]
    assert paths == ["t_time_vs_fraction_1000.png", "t_time_vs_fraction_10000.png",
                     "t_time_vs_fraction_1000_recent.png", "t_time_vs_fraction_1000_append.png"]
