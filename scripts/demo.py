"""`make demo`: the example project end to end, every step in one process (one Spark JVM).

seed -> run (backfill) -> scripted upstream change -> run (replay or overwrite) -> run (no-op)
-> status
-> test (the contract check, `batch_refresh_consistent`). dbt runs in-process through its
programmatic runner, so the embedded Spark starts once, as a Spark server you connect to
(`method: thrift`) would already be running: the times dbt prints are a refresh's own cost,
not a JVM start and cold planning per command (bench/README.md, "Cost floor", for those).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import List

from dbt.cli.main import dbtRunner

PROJECT = Path(__file__).resolve().parents[1] / "examples"
STEPS = [
    ("dbt seed (orders, customers as Delta tables with Change Data Feed)", ["seed"]),
    ("dbt run #1: snapshot backfill", ["run"]),
    ("upstream change: inserts, updates and deletes on orders",
     ["run-operation", "apply_demo_changes"]),
    ("dbt run #2: the change applied (each model replays it, or rewrites where that is "
     "estimated cheaper)", ["run"]),
    ("dbt run #3: nothing changed upstream, a no-op", ["run"]),
    ("history (dbt run-operation batch_refresh_status)",
     ["run-operation", "batch_refresh_status"]),
    ("dbt test (batch_refresh_consistent: each target equals its model from scratch)", ["test"]),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project-dir", type=Path, default=PROJECT)
    parser.add_argument("--profiles-dir", type=Path, default=PROJECT.parent / "profiles")
    parser.add_argument("--target", help="a profile output, e.g. `connect` (profiles/profiles.yml)")
    args = parser.parse_args()
    project = args.project_dir.resolve()
    os.chdir(project)
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    for generated in (".batch_refresh", "target", "logs"):  # start clean every time
        shutil.rmtree(project / generated, ignore_errors=True)
    runner = dbtRunner()
    common: List[str] = ["--profiles-dir", str(args.profiles_dir.resolve())]
    common += ["--target", args.target] if args.target else []
    for title, args in STEPS:
        print(f"\n==> {title}", flush=True)
        started = time.monotonic()
        result = runner.invoke(args + common)
        print(f"    ({time.monotonic() - started:.1f} s)", flush=True)
        if not result.success:
            print(f"demo step failed: dbt {' '.join(args)}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
