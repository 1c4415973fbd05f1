"""A lease's holder judged gone only when this host can tell (a fake process table, no /proc)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Dict, Optional

from dbt.adapters.spark_batch_refresh.engine.lease_holder import (
    LOCAL, PROCESS_KEY, ProcessTable, stat_start_time)
from dbt.adapters.spark_batch_refresh.engine.lease_wait import held, unexpired
from dbt.adapters.spark_batch_refresh.plan.planner import UpstreamPoint  # noqa: F401 - state deps
from dbt.adapters.spark_batch_refresh.storage.state import StateRow

BOOT = "acf129aa-bc7f-4fbd-b8d5-e5175321a027"
NS = "pid:[4026531836]"
NOW = datetime(2026, 1, 1, 12, 0, 0)


def _stat(pid: int, start: int, comm: str = "python") -> str:
    # fields 3.. after the command: state, then 18 more before starttime (field 22)
    return f"{pid} ({comm}) S " + " ".join(["0"] * 18) + f" {start} 0 0\n"


def _table(running: Dict[int, int], host: str = "vm", boot: str = BOOT,
           ns: Optional[str] = NS) -> ProcessTable:
    files = {"/proc/sys/kernel/random/boot_id": boot + "\n"}
    files.update({f"/proc/{pid}/stat": _stat(pid, start) for pid, start in running.items()})
    return ProcessTable(read=files.get, exists=lambda pid: pid in running,
                        hostname=lambda: host, namespace=lambda: ns)


def _lease(pid: int = 42, start: int = 1000, host: str = "vm", boot: str = BOOT,
           ns: str = NS) -> tuple:
    return f"{host}:{pid}", {"plan_id": "p", PROCESS_KEY: f"{boot}|{ns}|{start}"}


def test_start_time_is_field_22_whatever_the_command_name() -> None:
    assert stat_start_time(_stat(7, 123456)) == "123456"
    assert stat_start_time(_stat(7, 99, comm="a) (b c")) == "99"
    assert stat_start_time("garbage") is None
    assert stat_start_time("7 (x) S 1 2") is None


def test_a_holder_that_runs_still_holds() -> None:
    holder, plan = _lease()
    assert not _table({42: 1000}).gone(holder, plan)


def test_a_holder_whose_pid_ended_is_gone() -> None:
    holder, plan = _lease()
    assert _table({}).gone(holder, plan)


def test_a_reused_pid_is_not_the_holder() -> None:
    holder, plan = _lease(start=1000)
    assert _table({42: 5000}).gone(holder, plan)


def test_what_this_host_cannot_tell_holds_until_expiry() -> None:
    holder, plan = _lease()
    assert not _table({}, host="other").gone(holder, plan)  # another machine
    assert not _table({}, boot="another-boot").gone(holder, plan)  # rebooted since
    assert not _table({}, ns="pid:[1]").gone(holder, plan)  # another container of that name
    assert not _table({}, ns=None).gone(holder, plan)  # no namespace to compare
    assert not _table({}).gone(holder, {"plan_id": "p"})  # a lease written before this
    assert not _table({}).gone("a", plan)  # a holder that names no pid
    assert not _table({}).gone(None, plan)
    assert not ProcessTable(read=lambda _path: None, namespace=lambda: None).gone(holder, plan)


def test_a_running_pid_whose_start_cannot_be_read_holds() -> None:
    holder, plan = _lease()
    table = _table({})
    hidden = ProcessTable(read=table.read, exists=lambda pid: True, hostname=table.hostname,
                          namespace=table.namespace)  # hidepid: another user's process
    assert not hidden.gone(holder, plan)


def test_a_gone_holders_lease_is_not_held_before_its_expiry() -> None:
    holder, plan = _lease()
    row = StateRow(model_id="m", phase="merging", fingerprint="f", consumed={}, plan=plan,
                   run_id="r1", lease_holder=holder, lease_since=NOW,
                   lease_until=NOW + timedelta(hours=1), last_refresh_at=None)
    assert held(row, NOW, processes=_table({42: 1000}))
    assert not held(row, NOW, processes=_table({})) and unexpired(row, NOW)


def test_this_process_is_never_gone_to_itself() -> None:
    me = LOCAL.this_process()
    assert me.holder.endswith(f":{me.pid}")
    assert not LOCAL.gone(me.holder, {PROCESS_KEY: me.start})
