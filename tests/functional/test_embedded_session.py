"""The embedded session: Delta commits outside UTC rebuild no table state; a failed statement
leaves no stack traces on the console.

Where the session's, the JVM's or the machine's time zone is not UTC, Delta (3.3 and later)
rebuilds a table's state after every commit to check the file list it keeps in the commit's
checksum, unless `allFilesInCrc.verificationMode.forceOnNonUTC.enabled` is off; the embedded
session turns it off (embedded/session_defaults.py DELTA_VERIFY_NON_UTC). The JVM of this suite
runs in the machine's zone (UTC here), so a session in another zone stands for a user's laptop.

A statement whose task fails is reported by dbt once; Spark's own logs of the same failure
(embedded/log4j2.properties) stay off the console.
"""

from __future__ import annotations

from typing import Any

import pytest

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


class TestFailedTasksQuiet:
    def test_a_failed_task_logs_nothing_to_the_console(self, project):
        """A statement that fails in its task, as a refresh's inline key check does by design:
        the loggers that would print its stack trace are off, an error of another logger still
        reaches the console's appenders."""
        from dbt.adapters.spark_batch_refresh.embedded.spark import EmbeddedSpark

        session = EmbeddedSpark._base.newSession()
        jvm = session._jvm
        log4j = jvm.org.apache.logging.log4j
        context = log4j.LogManager.getContext(False)
        config = context.getConfiguration()
        written = jvm.java.io.StringWriter()
        layout = log4j.core.layout.PatternLayout.createDefaultLayout()
        capture = log4j.core.appender.WriterAppender.createAppender(
            layout, None, written, "batch-refresh-test-capture", False, True)
        capture.start()
        config.getRootLogger().addAppender(capture, None, None)
        context.updateLoggers()
        try:
            table = f"{project.test_schema}.failing_write"
            session.sql(f"create table {table} (id int) using delta")
            with pytest.raises(Exception, match="batch_refresh probe"):
                session.sql(f"insert into {table} select case when id < 5 then cast(id as int) "
                            f"else raise_error('batch_refresh probe') end from range(10)").collect()
            log4j.LogManager.getLogger("batch_refresh.test").error("a logger left on")
        finally:
            config.getRootLogger().removeAppender("batch-refresh-test-capture")
            context.updateLoggers()
            capture.stop()
        text = written.toString()
        assert "a logger left on" in text
        assert "batch_refresh probe" not in text, text[:3000]
        assert session.sql(f"select count(*) as n from {table}").collect()[0]["n"] == 0
