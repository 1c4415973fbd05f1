"""Named fail points: a testing aid that kills (or pauses) the process at a chosen point.

Enabled only by `BATCH_REFRESH_FAIL_AT=<point>`; `os._exit` skips every cleanup handler, so the
state left behind is what a killed process or a lost driver leaves.

`BATCH_REFRESH_PAUSE_AT=<point>` with `BATCH_REFRESH_PAUSE_FIFO=<named pipe>` blocks the process
at the point instead, until a controller writes a line to the pipe (or closes it). Opening the
pipe for reading blocks until the controller opens it for writing, so the controller knows the
process is parked at the point the moment its own open returns: concurrency tests use it to hold
a refresh at a known phase, deterministically, without sleeps.
"""

from __future__ import annotations

import os
import sys

ENV = "BATCH_REFRESH_FAIL_AT"
MODE_ENV = "BATCH_REFRESH_FAIL_MODE"  # "exit" (default) or "error": raise like a Spark error
PAUSE_ENV = "BATCH_REFRESH_PAUSE_AT"
PAUSE_FIFO_ENV = "BATCH_REFRESH_PAUSE_FIFO"
EXIT_CODE = 137


# Testing aid: the rows per group up to which a decimal average is taken from the delta
# state (aggdelta.DecimalAverage; the real bound is 500 million or more), so that a test can
# reach the recompute past it.
DECIMAL_AVG_ROWS_ENV = "BATCH_REFRESH_DECIMAL_AVG_ROWS"


def decimal_average_rows() -> "int | None":
    value = os.environ.get(DECIMAL_AVG_ROWS_ENV)
    return int(value) if value else None


class InjectedFault(RuntimeError):
    """Stands in for a Spark error at a fail point (BATCH_REFRESH_FAIL_MODE=error)."""


def fail_point(name: str) -> None:
    if os.environ.get(PAUSE_ENV) == name:
        _pause(name)
    if os.environ.get(ENV) != name:
        return
    if os.environ.get(MODE_ENV, "exit") == "error":
        raise InjectedFault(f"injected fault at fail point '{name}'")
    sys.stderr.write(f"batch_refresh: fail point '{name}' reached, exiting\n")
    sys.stderr.flush()
    os._exit(EXIT_CODE)


def _pause(name: str) -> None:
    fifo = os.environ.get(PAUSE_FIFO_ENV)
    if not fifo:
        raise InjectedFault(f"{PAUSE_ENV}={name} needs {PAUSE_FIFO_ENV}=<path of a named pipe>")
    sys.stderr.write(f"batch_refresh: paused at '{name}' (waiting on {fifo})\n")
    sys.stderr.flush()
    with open(fifo) as pipe:  # blocks until the controller opens the pipe for writing
        pipe.readline()  # blocks until it writes a line or closes the pipe
    sys.stderr.write(f"batch_refresh: released at '{name}'\n")
    sys.stderr.flush()
