"""Named fail points: a testing aid that kills the process abruptly at a chosen point.

Enabled only by `BATCH_REFRESH_FAIL_AT=<point>`; `os._exit` skips every cleanup handler, so the
state left behind is what a killed process or a lost driver leaves.
"""

from __future__ import annotations

import os
import sys

ENV = "BATCH_REFRESH_FAIL_AT"
MODE_ENV = "BATCH_REFRESH_FAIL_MODE"  # "exit" (default) or "error": raise like a Spark error
EXIT_CODE = 137


class InjectedFault(RuntimeError):
    """Stands in for a Spark error at a fail point (BATCH_REFRESH_FAIL_MODE=error)."""


def fail_point(name: str) -> None:
    if os.environ.get(ENV) != name:
        return
    if os.environ.get(MODE_ENV, "exit") == "error":
        raise InjectedFault(f"injected fault at fail point '{name}'")
    sys.stderr.write(f"batch_refresh: fail point '{name}' reached, exiting\n")
    sys.stderr.flush()
    os._exit(EXIT_CODE)
