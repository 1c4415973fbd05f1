"""lease_wait: polling a held lease with backoff on a fake clock (no Spark, no sleeping)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import List, Optional

import pytest

from dbt.adapters.spark_batch_refresh.plan.config import parse_config
from dbt.adapters.spark_batch_refresh.errors import BatchRefreshLeaseError
from dbt.adapters.spark_batch_refresh.engine.lease_wait import MAX_POLL_S, MAX_REPLANS, LeaseWait, held
from dbt.adapters.spark_batch_refresh.plan.planner import UpstreamPoint  # noqa: F401 - state deps
from dbt.adapters.spark_batch_refresh.storage.state import StateRow

NOW = datetime(2026, 1, 1, 12, 0, 0)


def _row(phase: str = "merging", until: Optional[datetime] = NOW + timedelta(hours=1)) -> StateRow:
    return StateRow(model_id="m", phase=phase, fingerprint="f", consumed={}, plan=None,
                    run_id="r1", lease_holder="host:1", lease_since=NOW, lease_until=until,
                    last_refresh_at=None)


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: List[float] = []

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


def _error(row: Optional[StateRow]) -> BatchRefreshLeaseError:
    return BatchRefreshLeaseError(f"held by {row.run_id if row else None}")


def test_held_means_live_lease_of_a_refresh_in_progress() -> None:
    assert held(_row(), NOW)
    assert not held(_row(phase="idle"), NOW)
    assert not held(_row(until=NOW - timedelta(seconds=1)), NOW)  # expired: a dead holder
    assert not held(_row(until=None), NOW)
    assert not held(None, NOW)


def test_no_budget_fails_at_once_without_reading() -> None:
    clock = _Clock()
    wait = LeaseWait(0.0, clock.monotonic, clock.sleep)
    with pytest.raises(BatchRefreshLeaseError, match="held by r1"):
        wait.until_free("m", _row(), lambda: pytest.fail("no poll without a budget"), lambda: NOW,
                        _error)
    assert clock.sleeps == []


def test_returns_once_the_lease_is_released_with_backoff() -> None:
    clock = _Clock()
    reads = iter([_row(), _row(), _row(), _row(phase="idle")])
    wait = LeaseWait(600.0, clock.monotonic, clock.sleep)
    wait.until_free("m", _row(), lambda: next(reads), lambda: NOW, _error)
    assert clock.sleeps == [0.5, 1.0, 2.0, 4.0]


def test_an_expired_lease_ends_the_wait() -> None:
    clock = _Clock()
    wait = LeaseWait(600.0, clock.monotonic, clock.sleep)
    later = iter([NOW, NOW + timedelta(hours=2)])  # the holder died; its lease ran out
    wait.until_free("m", _row(), lambda: _row(), lambda: next(later), _error)
    assert clock.sleeps == [0.5]


def test_budget_runs_out_with_the_lease_error_and_polls_stay_bounded() -> None:
    clock = _Clock()
    wait = LeaseWait(60.0, clock.monotonic, clock.sleep)
    with pytest.raises(BatchRefreshLeaseError, match="held by r1"):
        wait.until_free("m", _row(), lambda: _row(), lambda: NOW, _error)
    assert sum(clock.sleeps) == pytest.approx(60.0)
    assert max(clock.sleeps) <= MAX_POLL_S
    # one budget per refresh: a second wait in the same refresh does not start it again
    with pytest.raises(BatchRefreshLeaseError):
        wait.until_free("m", _row(), lambda: _row(), lambda: NOW, _error)
    assert sum(clock.sleeps) == pytest.approx(60.0)


def test_replans_are_bounded() -> None:
    wait = LeaseWait(10.0)
    assert all(wait.replan() for _ in range(MAX_REPLANS))
    assert not wait.replan()


def test_lease_wait_config() -> None:
    assert parse_config("m", {}).lease_wait_s == 0.0
    assert parse_config("m", {"lease_wait": "30m"}).lease_wait_s == 1800.0
    with pytest.raises(Exception, match="lease_wait"):
        parse_config("m", {"lease_wait": "soon"})
