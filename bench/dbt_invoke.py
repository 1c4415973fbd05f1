"""`dbt run` in-process for the benchmark drivers (bench/run.py, bench/tpch.py)."""

from __future__ import annotations

import os
from typing import Any, List


def run_models(dbt: Any, project: str, args: List[str]) -> List[Any]:
    """`dbt run <args>` of `project` (its own profiles.yml, run from its directory, quiet);
    the node results, or an error naming every node that did not succeed."""
    argv = ["run", "--project-dir", project, "--profiles-dir", project, "--quiet", *args]
    cwd = os.getcwd()
    os.chdir(project)
    try:
        res = dbt.invoke(argv)
    finally:
        os.chdir(cwd)
    if res.result is None:
        raise RuntimeError(f"dbt {' '.join(argv)} failed: {res.exception}")
    results = list(res.result.results)
    bad = [r for r in results if str(r.status) not in ("success", "RunStatus.Success")]
    if bad:
        raise RuntimeError("; ".join(f"{r.node.name}: {r.status} {r.message}" for r in bad))
    return results
