"""Named fail points: a testing aid that kills the process abruptly at a chosen point.

Enabled only by `BATCH_REFRESH_FAIL_AT=<point>`; `os._exit` skips every cleanup handler, so the
state left behind is what a killed process or a lost driver leaves.
"""

from __future__ import annotations

import os
import sys

ENV = "BATCH_REFRESH_FAIL_AT"
EXIT_CODE = 137


def fail_point(name: str) -> None:
    if os.environ.get(ENV) == name:
        sys.stderr.write(f"batch_refresh: fail point '{name}' reached, exiting\n")
        sys.stderr.flush()
        os._exit(EXIT_CODE)
