"""The pause mode of the fail points and the Thrift poll backoff, without Spark."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dbt.adapters.spark_batch_refresh import failpoints
from dbt.adapters.spark_batch_refresh.connections import _BackoffPyhiveWrapper


def test_pause_blocks_until_a_line_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    monkeypatch.setenv(failpoints.PAUSE_ENV, "after_lease")
    monkeypatch.setenv(failpoints.PAUSE_FIFO_ENV, str(fifo))
    done = threading.Event()

    def parked() -> None:
        failpoints.fail_point("after_staging")  # another point: passes straight through
        failpoints.fail_point("after_lease")
        done.set()

    worker = threading.Thread(target=parked, daemon=True)
    worker.start()
    with open(fifo, "w") as pipe:  # returns once the worker has the pipe open: it is parked
        assert not done.is_set()
        pipe.write("go\n")
    worker.join(timeout=30)
    assert done.is_set()


def test_pause_without_pipe_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(failpoints.PAUSE_ENV, "after_lease")
    monkeypatch.delenv(failpoints.PAUSE_FIFO_ENV, raising=False)
    with pytest.raises(failpoints.InjectedFault, match=failpoints.PAUSE_FIFO_ENV):
        failpoints.fail_point("after_lease")


def test_thrift_polls_back_off_up_to_poll_interval() -> None:
    wrapper = _BackoffPyhiveWrapper(None, poll_interval=1)
    wrapper._next_wait_s = wrapper._FIRST_WAIT_S  # what each statement starts with
    waits = [wrapper.poll_interval for _ in range(7)]
    assert waits == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
