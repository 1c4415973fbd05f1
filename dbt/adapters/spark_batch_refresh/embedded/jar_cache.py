"""The Delta jars an earlier embedded start resolved, and the lock that makes the first
resolution happen once on a machine.

Spark resolves `spark.jars.packages` with Ivy into one cache shared by every process of the
user. Two processes resolving into an empty cache at once (two `dbt` commands, or two pytest
workers on a fresh machine) download the same jar files over each other, and one of them fails
with "Downloaded file size (0) doesn't match expected Content Length". So a start that has no
remembered jars takes a file lock for its start; whoever waited then finds the jars the first
one remembered and starts from them, with no resolution at all.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional, TypeVar

T = TypeVar("T")


def read_jars(path: str) -> Optional[List[str]]:
    """The jar paths remembered in `path`, or None when there is no such file."""
    try:
        with open(path) as handle:
            return [line.strip() for line in handle if line.strip()]
    except OSError:
        return None


def remember_jars(path: str, jars: str) -> bool:
    """Writes the local jar files of Spark's `spark.jars` value to `path`; False when they are
    not all local files or the file cannot be written (the next start resolves again)."""
    local = [j.removeprefix("file://").removeprefix("file:") for j in jars.split(",") if j]
    if not local or not all(os.path.isfile(j) for j in local):
        return False
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write("\n".join(local) + "\n")
    except OSError:
        return False
    return True


@contextmanager
def resolving_alone(path: str) -> Iterator[None]:
    """Holds an exclusive lock beside `path` (POSIX advisory lock) while inside. Where there
    is no fcntl (Windows) or the lock file cannot be made, it does not lock: the race it
    prevents is a failed first start, which a second attempt gets past."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        handle = open(path + ".lock", "a")
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def start_resolving_once(cache: str,
                         confs_for: Callable[[Optional[List[str]]], Dict[str, str]],
                         build: Callable[[Dict[str, str]], T]) -> T:
    """`build(confs)` with the confs for the jars remembered in `cache`; when those confs make
    Spark resolve the Delta package, under the lock, with the jars read again once it is held
    (another process may have resolved and remembered them while this one waited)."""
    confs = confs_for(read_jars(cache))
    if "spark.jars.packages" not in confs:
        return build(confs)
    with resolving_alone(cache):
        return build(confs_for(read_jars(cache)))
