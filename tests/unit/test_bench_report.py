"""The benchmark's pure result code: medians, merging result files, tables, targets (no Spark)."""

import importlib.util
import os

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
    cell = s[(1000, "rowwise", 0.01, "replay")]
    assert (cell["seconds"], cell["statements"], cell["writes"], cell["reps"]) == (4.0, 21, 4, 3)


def test_one_wrong_repetition_marks_the_cell_wrong():
    s = report.summarize([rec("incremental", 1.0), rec("incremental", 1.0, correct=False)])
    assert s[(1000, "rowwise", 0.01, "incremental")]["correct"] is False
    table = report.main_table(s)
    assert "**wrong**" in table


def test_later_result_file_replaces_a_cell():
    a = {"records": [rec("replay", 5.0), rec("rebuild", 8.0)]}
    b = {"records": [rec("replay", 3.0)]}
    merged = report.summarize(report.merge_records([a, b]))
    assert merged[(1000, "rowwise", 0.01, "replay")]["seconds"] == 3.0
    assert merged[(1000, "rowwise", 0.01, "rebuild")]["seconds"] == 8.0


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
