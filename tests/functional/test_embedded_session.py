"""The embedded session's Delta commits outside UTC: no state reconstruction after a commit.

Where the session's, the JVM's or the machine's time zone is not UTC, Delta (3.3 and later)
rebuilds a table's state after every commit to check the file list it keeps in the commit's
checksum, unless `allFilesInCrc.verificationMode.forceOnNonUTC.enabled` is off; the embedded
session turns it off (embedded/session_defaults.py DELTA_VERIFY_NON_UTC). The JVM of this suite
runs in the machine's zone (UTC here), so a session in another zone stands for a user's laptop.
"""

from __future__ import annotations

from typing import Any

from dbt.adapters.spark_batch_refresh.embedded.session_defaults import DELTA_VERIFY_NON_UTC


def _post_commit_rebuilt(log: Any) -> bool:
    """Whether the newest snapshot Delta installed after a commit had its state reconstructed
    (a Spark job over the table's log, which a blind INSERT otherwise never needs)."""
    return bool(log.unsafeVolatileSnapshot().stateReconstructionTriggered())


class TestCommitsOutsideUtc:
    def test_a_commit_outside_utc_rebuilds_no_table_state(self, project):
        from dbt.adapters.spark_batch_refresh.embedded.spark import EmbeddedSpark

        session = EmbeddedSpark._base.newSession()  # its confs are its own, not dbt's sessions'
        session.conf.set("spark.sql.session.timeZone", "America/New_York")
        table = f"{project.test_schema}.outside_utc"
        session.sql(f"create table {table} (id int) using delta")
        location = session.sql(f"describe detail {table}").collect()[0]["location"]
        jvm = session._jvm
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(session._jsparkSession, location)

        assert session.conf.get(DELTA_VERIFY_NON_UTC) == "false"
        session.sql(f"insert into {table} values (1)")
        assert not _post_commit_rebuilt(log)
        # Delta's own default, in the same session: the same blind INSERT rebuilds the state.
        session.conf.set(DELTA_VERIFY_NON_UTC, "true")
        session.sql(f"insert into {table} values (2)")
        assert _post_commit_rebuilt(log)
        assert [r["id"] for r in session.sql(f"select id from {table} order by id").collect()] == [1, 2]
