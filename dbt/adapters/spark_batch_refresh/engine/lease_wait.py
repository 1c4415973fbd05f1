"""Waiting for another run's lease (config `lease_wait`), instead of failing at once.

A scheduler that starts overlapping runs of a model (an Airflow retry, a backfill beside the
hourly job) wants the second run to wait its turn. The waiting run polls the model's state row
with backoff until the lease is released or has expired, then plans again from the target's
log: the other run usually consumed the changes, so that is a no-op; a dead holder's expired
lease is taken over by the resume path. Past the wait budget it fails with the lease error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Optional

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_batch_refresh.plan.config import format_duration
from dbt.adapters.spark_batch_refresh.errors import BatchRefreshLeaseError
from dbt.adapters.spark_batch_refresh.failpoints import fail_point
from dbt.adapters.spark_batch_refresh.engine.lease_holder import LOCAL, ProcessTable
from dbt.adapters.spark_batch_refresh.storage.state import StateRow

logger = AdapterLogger("SparkBatchRefresh")

FIRST_POLL_S = 0.5
MAX_POLL_S = 10.0
# A refresh plans again each time a lease it met is freed; a bound keeps a model whose lease
# keeps changing hands from planning forever.
MAX_REPLANS = 5


class LeaseFreed(BatchRefreshLeaseError):
    """The lease this run waited for is free: plan the refresh again from the target's log.

    A lease error subclass so every handler that lets lease errors through (nothing of this
    run's was written yet) lets this through to the retry loop too.
    """


def unexpired(row: Optional[StateRow], now: datetime) -> bool:
    """A refresh in progress whose lease's expiry is still ahead, its holder alive or not."""
    return (row is not None and row.phase != "idle" and row.lease_until is not None
            and row.lease_until > now)


def held(row: Optional[StateRow], now: datetime, processes: ProcessTable = LOCAL) -> bool:
    """A live lease of another run: unexpired, and held by a process this host cannot tell
    has ended (lease_holder.py)."""
    return (unexpired(row, now) and row is not None
            and not processes.gone(row.lease_holder, row.plan))


@dataclass
class LeaseWait:
    """One refresh's budget for waiting on leases, shared by every attempt it makes."""

    budget_s: float
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _deadline: Optional[float] = field(default=None, repr=False)
    _logged: bool = field(default=False, repr=False)
    _replans: int = field(default=0, repr=False)

    def replan(self) -> bool:
        """Count one more planning of the refresh; False once the bound is reached."""
        self._replans += 1
        return self._replans <= MAX_REPLANS

    def until_free(self, model: str, row: StateRow, read: Callable[[], Optional[StateRow]],
                   now: Callable[[], datetime],
                   error: Callable[[Optional[StateRow]], BatchRefreshLeaseError]) -> None:
        """Return once `row`'s lease is released or expired; raise `error` when the budget is
        spent (at once with no budget, as a run without lease_wait always did)."""
        if self.budget_s <= 0:
            raise error(row)
        if self._deadline is None:
            self._deadline = self.monotonic() + self.budget_s
        if not self._logged:
            self._logged = True
            logger.info(
                f"batch_refresh model '{model}': run {row.run_id} by {row.lease_holder} holds the "
                f"refresh lease (phase {row.phase}, until {row.lease_until}); waiting up to "
                f"{format_duration(self.budget_s)} (lease_wait) for it.")
            fail_point("lease_wait")
        delay = FIRST_POLL_S
        current: Optional[StateRow] = row
        while held(current, now()):
            left = self._deadline - self.monotonic()
            if left <= 0:
                raise error(current)
            self.sleep(min(delay, left))
            delay = min(delay * 2, MAX_POLL_S)
            current = read()
