"""Runs crash-test steps in a process of its own (the parent pytest keeps its own Spark).

usage: python driver.py <project_dir> <step> [<step> ...]
steps: an operation name of the crash project (`setup`, `change`, `check`), `run`,
`run_expect_fail`, or `crash:<fail point>` (last: the process dies there).
The embedded Derby metastore admits one JVM at a time, so the parent never opens this
project's warehouse; every step that touches it runs here, in one JVM per driver process.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, List

from dbt.cli.main import dbtRunner


def emit(**data: Any) -> None:
    print("DRIVER " + json.dumps(data, default=str), flush=True)


def dbt(args: List[str]) -> Any:
    return dbtRunner().invoke([*args, "--profiles-dir", ".", "--project-dir", "."])


def main() -> None:
    project, *steps = sys.argv[1:]
    os.chdir(project)
    for step in steps:
        if step.startswith("crash:"):
            os.environ["BATCH_REFRESH_FAIL_AT"] = step.split(":", 1)[1]
            res = dbt(["run"])
            emit(step=step, crashed=False, success=res.success)  # not reached if it crashed
            sys.exit(3)
        if step in ("run", "run_expect_fail"):
            res = dbt(["run"])
            results = list(res.result or []) if res.result is not None else []
            emit(step=step, success=res.success,
                 actions=[(r.adapter_response or {}).get("action") for r in results],
                 resumed=[r.node.name for r in results
                          if (r.adapter_response or {}).get("resumed")],
                 messages=[str(r.message) for r in results])
            if step == "run" and not res.success:
                sys.exit(4)
            continue
        res = dbt(["run-operation", step])
        if not res.success:
            emit(step=step, success=False, error=str(res.exception))
            sys.exit(5)


if __name__ == "__main__":
    main()
