"""The embedded session: Delta commits outside UTC rebuild no table state; a failed statement
leaves no stack traces on the console.

Where the session's, the JVM's or the machine's time zone is not UTC, Delta (3.3 and later)
rebuilds a table's state after every commit to check the file list it keeps in the commit's
checksum, unless `allFilesInCrc.verificationMode.forceOnNonUTC.enabled` is off; the embedded
session turns it off (embedded/session_defaults.py DELTA_VERIFY_NON_UTC). The JVM of this suite
runs in the machine's zone (UTC here), so a session in another zone stands for a user's laptop.

A statement whose task fails is reported by dbt once; Spark's own logs of the same failure
(embedded/log4j2.properties) stay off the console, and so does the Hive metastore's refusal of
a Delta table's schema that every REPLACE USING write meets.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

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


@contextmanager
def _console(session: Any) -> Iterator[Any]:
    """What reaches log4j's root appenders inside the block (a StringWriter)."""
    log4j = session._jvm.org.apache.logging.log4j
    context = log4j.LogManager.getContext(False)
    config = context.getConfiguration()
    written = session._jvm.java.io.StringWriter()
    layout = log4j.core.layout.PatternLayout.createDefaultLayout()
    capture = log4j.core.appender.WriterAppender.createAppender(
        layout, None, written, "batch-refresh-test-capture", False, True)
    capture.start()
    config.getRootLogger().addAppender(capture, None, None)
    context.updateLoggers()
    try:
        yield written
    finally:
        config.getRootLogger().removeAppender("batch-refresh-test-capture")
        context.updateLoggers()
        capture.stop()


class TestFailedTasksQuiet:
    def test_a_failed_task_logs_nothing_to_the_console(self, project):
        """A statement that fails in its task, as a refresh's inline key check does by design:
        the loggers that would print its stack trace are off, an error of another logger still
        reaches the console's appenders."""
        from dbt.adapters.spark_batch_refresh.embedded.spark import EmbeddedSpark

        session = EmbeddedSpark._base.newSession()
        log4j = session._jvm.org.apache.logging.log4j
        table = f"{project.test_schema}.failing_write"
        with _console(session) as written:
            session.sql(f"create table {table} (id int) using delta")
            with pytest.raises(Exception, match="batch_refresh probe"):
                session.sql(f"insert into {table} select case when id < 5 then cast(id as int) "
                            f"else raise_error('batch_refresh probe') end from range(10)").collect()
            log4j.LogManager.getLogger("batch_refresh.test").error("a logger left on")
        text = written.toString()
        assert "a logger left on" in text
        assert "batch_refresh probe" not in text, text[:3000]
        assert session.sql(f"select count(*) as n from {table}").collect()[0]["n"] == 0

    def test_the_metastore_logs_nothing_spark_handles(self, project):
        """The DataFrame write a REPLACE USING runs as (storage/frame_write.py) replaces the
        table through the Hive metastore, which refuses the Delta table's schema first and logs
        that with its trace, as it logs the existing schema of a `CREATE SCHEMA IF NOT EXISTS`;
        the metastore's other errors still reach the console."""
        from dbt.adapters.spark_batch_refresh.embedded.spark import EmbeddedSpark
        from dbt.adapters.spark_batch_refresh.storage.frame_write import (
            replace_using_statement, write_replace_using)

        session = EmbeddedSpark._base.newSession()
        log4j = session._jvm.org.apache.logging.log4j
        table = f"{project.test_schema}.replaced_using"
        session.sql(f"create table {table} using delta as "
                    "select id, id * 10 as v from range(5)")
        statement = replace_using_statement(
            f"INSERT INTO {table} REPLACE USING (`id`)\nSELECT id, v + 1 AS v FROM {table} "
            "WHERE id IN (1, 2) UNION ALL SELECT 7 AS id, 70 AS v")
        assert statement is not None
        with _console(session) as written:
            write_replace_using(session, statement)
            session.sql(f"create schema if not exists {project.test_schema}")  # it exists
            log4j.LogManager.getLogger("org.apache.hadoop.hive.metastore.RetryingHMSHandler") \
                .error("a metastore error left on")
        text = written.toString()
        assert "a metastore error left on" in text
        assert "incompatible" not in text and "Failed to alter" not in text, text[:3000]
        assert "AlreadyExists" not in text, text[:3000]
        rows = session.sql(f"select id, v from {table} order by id").collect()
        assert [(r["id"], r["v"]) for r in rows] == [(0, 0), (1, 11), (2, 21), (3, 30),
                                                     (4, 40), (7, 70)]


class TestReplaceUsingFromCache:
    def test_a_cached_staging_that_reads_the_target_is_written_as_cached(self, project):
        """An overwrite by `saveAsTable` uncaches every cached plan that reads the table it
        writes before it runs, so the REPLACE USING write of a cached staging that reads the
        target (as the coarse keys' staging does) ran the staging's query again: its rows are
        materialized before the write now. A Python UDF counts the staging's evaluations."""
        from dbt.adapters.spark_batch_refresh.embedded.spark import EmbeddedSpark
        from dbt.adapters.spark_batch_refresh.storage.frame_write import (
            reads_table, replace_using_statement, write_replace_using)

        session = EmbeddedSpark._base.newSession()
        table = f"{project.test_schema}.replaced_from_cache"
        session.sql(f"create table {table} using delta as select id, id * 10 as v from range(5)")
        evaluated = session.sparkContext.accumulator(0)

        def counted(value: int) -> int:
            evaluated.add(1)
            return value

        session.udf.register("_br_probe_counted", counted, "bigint")
        session.sql(f"cache lazy table _br_probe_staging as select t.id, "
                    f"_br_probe_counted(t.v + 1) as v from {table} t where t.id in (1, 2)")
        assert session.sql("select count(*) as n from _br_probe_staging").collect()[0]["n"] == 2
        assert evaluated.value == 2
        statement = replace_using_statement(
            f"INSERT INTO {table} REPLACE USING (`id`)\nSELECT id, v FROM _br_probe_staging")
        assert statement is not None
        assert reads_table(session, session.sql(statement.query), table)
        write_replace_using(session, statement)
        assert evaluated.value == 2  # written from the cache, not evaluated again
        rows = session.sql(f"select id, v from {table} order by id").collect()
        assert [(r["id"], r["v"]) for r in rows] == [(0, 0), (1, 11), (2, 21), (3, 30), (4, 40)]
        assert not reads_table(session, session.sql("select 1 as id"), table)
        # The write's own read of the target (an anti-join) leaves the frame as it is.
        assert not reads_table(session, session.sql(f"select id from {table}"), table)
        session.sql("drop view if exists _br_probe_staging")
