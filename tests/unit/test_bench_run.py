"""The benchmark driver's pure parts: arguments and cleanup (no Spark, no dbt run)."""

import importlib.util
import os

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


def test_scales_and_fractions_parse():
    args = run.parse_args(["--scales", "1e6,10000000", "--fractions", "0.001", "--shapes", "agg"])
    assert (args.scales, args.fractions, args.shapes) == ([1_000_000, 10_000_000], [0.001], ["agg"])
