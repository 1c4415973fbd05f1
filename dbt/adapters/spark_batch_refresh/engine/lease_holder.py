"""Who holds a refresh lease, and whether that process is gone.

A multi-chunk refresh killed mid-plan (SIGKILL, an OOM kill, Ctrl-C past dbt's cleanup) leaves
its lease live until `lease_timeout` (1h by default), and every run until then fails with the
lease error. The usual next run is on the same machine (a scheduler's retry, the developer who
pressed Ctrl-C), and there the kernel can say the holder is gone. So a lease records its
process: the host and pid that users read (`lease_holder`), and in the lease's plan the boot id,
the pid namespace and the process's start time, which tell a reused pid, a second machine of
the same name and a container of the same name from the holder. A lease is taken over early
only when all of these say gone; anything unknown (another host, another boot or container, no
/proc, a lease written before this) waits for the expiry as before. Taking over is safe whenever expiry is: each chunk carries its plan's txnVersion, so a
statement the dead run left running on a server commits a chunk at most once either way.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

# The key in the lease's plan JSON that holds the holder's `Process.start`.
PROCESS_KEY = "holder_process"


@dataclass(frozen=True)
class Process:
    """One process, named so that a later reader can tell whether it still runs."""

    host: str
    pid: int
    start: Optional[str]  # "<boot id>|<pid namespace>|<start time>", None where unknown

    @property
    def holder(self) -> str:
        return f"{self.host}:{self.pid}"


def stat_start_time(stat: str) -> Optional[str]:
    """Field 22 of /proc/<pid>/stat (the process's start time since boot, in clock ticks).

    The command name (field 2) is in parentheses and may hold spaces or parentheses itself,
    so fields are counted after the last ')'.
    """
    _, sep, rest = stat.rpartition(")")
    fields = rest.split()
    # rest starts at field 3 (state): field 22 is its 20th
    return fields[19] if sep and len(fields) >= 20 else None


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _pid_namespace() -> Optional[str]:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


@dataclass(frozen=True)
class ProcessTable:
    """The host's view of its processes (/proc on Linux); injected in unit tests."""

    read: Callable[[str], Optional[str]] = _read
    exists: Callable[[int], bool] = _exists
    hostname: Callable[[], str] = socket.gethostname
    namespace: Callable[[], Optional[str]] = _pid_namespace

    def scope(self) -> Optional[str]:
        """Where a pid means one process: this boot of the kernel, this pid namespace (two
        containers of one name on one node see different processes under the same pid)."""
        boot = (self.read("/proc/sys/kernel/random/boot_id") or "").strip()
        namespace = self.namespace()
        return f"{boot}|{namespace}" if boot and namespace else None

    def start_of(self, pid: int) -> Optional[str]:
        """"<scope>|<start time>" of a running pid, None if it is not running or unknown."""
        scope = self.scope()
        stat = self.read(f"/proc/{pid}/stat")
        start = stat_start_time(stat) if stat else None
        return f"{scope}|{start}" if scope and start else None

    def this_process(self) -> Process:
        pid = os.getpid()
        return Process(self.hostname(), pid, self.start_of(pid))

    def gone(self, holder: Optional[str], plan: Optional[Mapping[str, Any]]) -> bool:
        """True only when this host can tell the lease's process has ended: same host, boot
        and pid namespace, and its pid runs no longer or runs a process started later."""
        recorded = (plan or {}).get(PROCESS_KEY)
        if not holder or not isinstance(recorded, str):
            return False
        host, _, pid_text = holder.rpartition(":")
        scope = self.scope()
        if (host != self.hostname() or not pid_text.isdigit() or scope is None
                or recorded.rpartition("|")[0] != scope):
            return False
        pid = int(pid_text)
        if not self.exists(pid):
            return True
        # A running pid is the holder unless it started at another time (a reused pid); a
        # start time this user may not read (hidepid) leaves it the holder.
        start = self.start_of(pid)
        return start is not None and start != recorded


LOCAL = ProcessTable()
