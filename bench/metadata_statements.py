"""What a replay's metadata reads cost on one Delta table (session 11, issue #15 cost floor).

After each small UPDATE, one variant of the preflight's reads runs, then the `table_changes`
read a row-wise replay stages from. The question it answered: does `DESCRIBE DETAIL` (which
reports file count and size, so Delta rebuilds the snapshot state) buy anything later, or is it
pure overhead next to `SHOW TBLPROPERTIES` and a `DESCRIBE HISTORY` window?

Session 29 added the same reads answered from Delta's log in the embedded session
(storage/jvm_history.py), the variants marked (JVM); session 35 the two-commit read a refresh
makes after its write and the schema check, DESCRIBE QUERY, as a statement and answered by the
session's analyser (storage/jvm_describe.py).

usage: .venv/bin/python bench/metadata_statements.py [rounds]   (run alone: 2 cores)
Prints the median seconds per variant (the first two rounds of each are left out: JIT warm-up).
Everything lives in a temporary directory that is removed at the end.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.scratch_spark import arguments, scratch  # noqa: E402

from dbt.adapters.spark_batch_refresh.storage.jvm_describe import (  # noqa: E402
    describe_read, read_describe)
from dbt.adapters.spark_batch_refresh.storage.jvm_history import (  # noqa: E402
    history_read, read_history)

JVM = "JVM "  # a statement the adapter answers through the JVM in the embedded session
_QUERY = "DESCRIBE QUERY SELECT id, count(*) AS n, sum(v) AS s, max(v) AS m FROM u GROUP BY id"

VARIANTS: Dict[str, List[str]] = {
    "none": [],
    "describe detail": ["DESCRIBE DETAIL u"],
    "show tblproperties": ["SHOW TBLPROPERTIES u"],
    "history limit 5": ["DESCRIBE HISTORY u LIMIT 5"],
    # Session 14: the replay's upstream reads before and after they were folded into one.
    "history 1 + 2": ["DESCRIBE HISTORY u LIMIT 1", "DESCRIBE HISTORY u LIMIT 2"],
    "history limit 1": ["DESCRIBE HISTORY u LIMIT 1"],
    "history limit 10": ["DESCRIBE HISTORY u LIMIT 10"],
    "history limit 20": ["DESCRIBE HISTORY u LIMIT 20"],
    # Session 29: the embedded session's reads from Delta's log (storage/jvm_history.py).
    "history limit 1 (JVM)": [JVM + "DESCRIBE HISTORY u LIMIT 1"],
    "history limit 20 (JVM)": [JVM + "DESCRIBE HISTORY u LIMIT 20"],
    # Session 35: a refresh's read after its write, and its schema check.
    "history limit 2 (JVM)": [JVM + "DESCRIBE HISTORY u LIMIT 2"],
    "describe query": [_QUERY],
    "describe query (JVM)": [JVM + _QUERY],
}


def main(rounds: int) -> None:

    def timed(sql: str) -> float:
        started = time.monotonic()
        if sql.startswith(JVM):
            statement = sql[len(JVM):]
            read = history_read(statement)
            assert (read_history(spark, read) if read is not None
                    else read_describe(spark, describe_read(statement) or "")) is not None
        else:
            spark.sql(sql).collect()
        return time.monotonic() - started

    with scratch("br-metadata-bench-", "local[1]", 1) as spark:
        spark.sql("CREATE TABLE u (id INT, v INT) USING delta TBLPROPERTIES "
                  "(delta.enableChangeDataFeed = true, delta.enableDeletionVectors = true)")
        spark.sql("INSERT INTO u SELECT CAST(id AS INT), CAST(id AS INT) FROM range(50)")
        found: Dict[str, List[Tuple[float, float]]] = {name: [] for name in VARIANTS}
        for r in range(rounds):
            for name, statements in VARIANTS.items():
                spark.sql(f"UPDATE u SET v = v + 1 WHERE id = {r % 50}")
                version = spark.sql("DESCRIBE HISTORY u LIMIT 1").collect()[0]["version"]
                extra = sum(timed(sql) for sql in statements)
                changes = timed(f"SELECT count(*) FROM table_changes('u', {version}, {version})")
                found[name].append((extra, changes))
        for name, pairs in found.items():
            kept = pairs[2:]
            med = [sorted(p[i] for p in kept)[len(kept) // 2] for i in (0, 1)]
            print(f"{name:20s} reads {med[0]:6.3f} s   table_changes after {med[1]:6.3f} s   "
                  f"together {med[0] + med[1]:6.3f} s")


if __name__ == "__main__":
    main(*arguments(8))
