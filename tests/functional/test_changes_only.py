"""Row-wise replays staged from the change feed alone (no scan of the upstream table).

Changes between two runs include the cases that make netting necessary: a row changed and
changed back, a row changed twice, a row deleted and re-inserted as it was, a row leaving and
re-entering the filter. A new upstream row that duplicates the key of an unchanged row is the
one thing the change feed alone cannot see; the MERGE refuses it before committing.
"""

from __future__ import annotations

import pytest

from dbt.adapters.spark_batch_refresh.engine.run_result import TRACE_ENV

from tests.functional.helpers import (
    assert_contract,
    run_fails,
    rows,
    run_ok,
    sources_yml,
    state,
    table_version,
)

ROWWISE = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, grp, v * 2 as v2 from {{ source('raw', 'src') }} where v >= 0
"""
# A map column cannot be grouped by: this model keeps the snapshot path.
WITH_MAP = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, map('v', v) as m from {{ source('raw', 'src') }}
"""
# Delta joins (deltajoin.py): the inner join replays from the change rows of whichever side
# moved (its `s.*` must not carry the change feed's own columns into one term and not the
# other); the left join too, by a transition term when its NULL-supplying side (dim) moves.
INNER_JOIN = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select s.*, d.label from {{ source('raw', 'src') }} s join {{ source('raw', 'dim') }} d
  on s.grp = d.id where s.v >= 0
"""
LEFT_JOIN = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select s.id, s.grp, d.label from {{ source('raw', 'src') }} s
left join {{ source('raw', 'dim') }} d on s.grp = d.id
"""

# A right join: src supplies the NULLs, a dim without rows keeps one row of its own. Each
# outer join replays by transition term (deltajoin.py) when its NULL-supplying side moves.
RIGHT_JOIN = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select coalesce(s.id, -1 - d.id) as id, d.label, s.v from {{ source('raw', 'src') }} s
right join {{ source('raw', 'dim') }} d on s.grp = d.id
"""

# A full join: both sides supply NULLs (src rows with a NULL or unknown grp stay, unmatched).
FULL_JOIN = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select coalesce(s.id, -1 - d.id) as id, s.v, d.label from {{ source('raw', 'src') }} s
full join {{ source('raw', 'dim') }} d on s.grp = d.id
"""

# A full join whose key expression on one side is not NULL where that side is (fuzz seed 9007,
# fz22): a src row with a NULL grp is unmatched, and coalesce(d.id, -1) is -1 beside it.
FULL_JOIN_COALESCED = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select coalesce(s.id, -1 - d.id) as id, s.v, d.label from {{ source('raw', 'src') }} s
full join {{ source('raw', 'dim') }} d on s.grp = coalesce(d.id, -1)
"""


def by_model(results):
    return {r.node.name: r.adapter_response for r in results}


def traced(monkeypatch, tmp_path):
    """Trace the adapter's statements (TRACE_ENV); the function returned gives the lines
    traced since its last call (seconds, a tab, the statement)."""
    trace = tmp_path / "trace.tsv"
    monkeypatch.setenv(TRACE_ENV, str(trace))

    def statements() -> list:
        found = trace.read_text().splitlines() if trace.exists() else []
        trace.write_text("")
        return found
    return statements


class TestChangesOnlyReplay:
    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": sources_yml("src", "dim"), "rw.sql": ROWWISE,
                "with_map.sql": WITH_MAP, "ij.sql": INNER_JOIN, "lj.sql": LEFT_JOIN,
                "rj.sql": RIGHT_JOIN, "fj.sql": FULL_JOIN, "fjc.sql": FULL_JOIN_COALESCED}

    def test_netting_and_duplicate_guard(self, project, monkeypatch, tmp_path):
        src = f"{project.test_schema}.src"
        project.run_sql(f"create table {src} (id int, grp int, v int) using delta "
                        f"tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"insert into {src} select cast(id as int), cast(id % 3 as int), "
                        f"cast(id as int) from range(20)")
        dim = f"{project.test_schema}.dim"
        project.run_sql(f"create table {dim} (id int, label string) using delta "
                        f"tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"insert into {dim} values (0, 'zero'), (1, 'one'), (2, 'two')")
        run_ok(["run"])

        # several upstream commits before the next run
        project.run_sql(f"update {src} set v = v + 1 where id = 1")
        project.run_sql(f"update {src} set v = v - 1 where id = 1")  # back as it was
        project.run_sql(f"update {src} set v = 50 where id = 2")
        project.run_sql(f"update {src} set v = 60 where id = 2")  # changed twice
        project.run_sql(f"delete from {src} where id in (3, 6)")
        project.run_sql(f"insert into {src} values (6, 0, 6), (100, 1, 100)")  # 6 as it was
        project.run_sql(f"update {src} set v = -1 where id in (5, 7)")  # leave the filter
        project.run_sql(f"update {src} set v = 70 where id = 7")  # and 7 comes back, changed
        project.run_sql(f"update {src} set grp = 9 where id = 8")
        responses = by_model(run_ok(["run"]))
        rw = responses["rw"]
        assert (rw["action"], rw["staged_from"]) == ("replay", "changes"), rw
        # keys 2, 3, 5, 7, 8, 100 net to a change; 1 and 6 net to nothing
        assert rw["staged_rows"] == 6, rw
        assert (rw["rows_inserted"], rw["rows_updated"], rw["rows_deleted"]) == (1, 3, 2), rw
        assert responses["with_map"]["staged_from"] == "snapshot"
        assert_contract(project, "rw")
        for joined in ("ij", "lj", "rj", "fj"):
            assert responses[joined]["staged_from"] == "join", responses[joined]
            assert_contract(project, joined)
        # both sides move: a row gains a partner, a partner changes, one loses its only match
        project.run_sql(f"update {src} set grp = 9 where id = 10")
        project.run_sql(f"insert into {dim} values (9, 'nine')")
        project.run_sql(f"update {dim} set label = 'uno' where id = 1")
        project.run_sql(f"delete from {dim} where id = 2")
        project.run_sql(f"update {src} set grp = null where id = 11")  # a NULL join key
        responses = by_model(run_ok(["run"]))
        assert responses["ij"]["staged_from"] == "join", responses["ij"]
        # dim is on the NULL-supplying side of the left join: the src rows whose grp its
        # change rows name, joined to dim at its old and new version, netted
        assert responses["lj"]["staged_from"] == "join", responses["lj"]
        # staged: the rows of grp 1 (relabelled) and 2 (lost their match), 8 and 10 (grp 9
        # gained its match) and 11 (lost its grp); every other row nets away
        assert responses["lj"]["staged_rows"] == len(rows(project, (
            f"select id from {src} where grp in (1, 2, 9) or id = 11"))), responses["lj"]
        for joined in ("ij", "lj", "rj", "fj"):
            assert responses[joined]["action"] == "replay", responses[joined]
            assert responses[joined]["staged_from"] == "join", responses[joined]
            assert_contract(project, joined)
        # (EXCEPT ALL, which assert_contract uses, does not take maps)
        as_text = "select id, to_json(m) as m from {} order by id"
        assert (rows(project, as_text.format(f"{project.test_schema}.with_map"))
                == rows(project, as_text.format(f"(select id, map('v', v) as m from {src})")))

        # src alone moves, its change rows holding NULL join keys (before: 11, after: 12 and
        # 150): the full join's transition term keeps them though the other side's key
        # expression, coalesce(d.id, -1), is -1 where d is NULL-extended (failed on 7b66ee1:
        # 11 stayed, 12's and 150's unmatched rows were missing)
        project.run_sql(f"update {src} set grp = null where id = 12")
        project.run_sql(f"delete from {src} where id = 11")
        project.run_sql(f"insert into {src} values (150, null, 5)")
        responses = by_model(run_ok(["run", "--select", "rw", "fjc"]))
        assert (responses["fjc"]["action"], responses["fjc"]["staged_from"]) == (
            "replay", "join"), responses["fjc"]
        assert_contract(project, "fjc")

        # an inserted row with the key of an unchanged row: refused, target untouched
        before = table_version(project, f"{project.test_schema}.rw")
        project.run_sql(f"insert into {src} values (9, 0, 999)")
        output = run_fails(["run", "--select", "rw"])
        assert "rw" in output and "unique_key (id) is not unique" in output, output
        assert "Traceback" not in output
        assert table_version(project, f"{project.test_schema}.rw") == before
        assert state(project, "rw")["phase"] == "idle"

        # the same refusal when the batch also changes a row, so the replay would be a
        # REPLACE USING (the embedded session's upsert write): the check is in its statement
        project.run_sql(f"update {src} set v = 71 where id = 7")
        output = run_fails(["run", "--select", "rw"])
        assert "rw" in output and "unique_key (id) is not unique" in output, output
        assert table_version(project, f"{project.test_schema}.rw") == before

        # once the upstream is fixed, the next run plans afresh and replays: an update and a
        # new key, by REPLACE USING (one WRITE commit)
        project.run_sql(f"delete from {src} where id = 9 and v = 999")
        project.run_sql(f"insert into {src} values (200, 1, 200)")
        responses = by_model(run_ok(["run", "--select", "rw"]))
        assert responses["rw"]["action"] == "replay", responses
        assert (responses["rw"]["rows_inserted"], responses["rw"]["rows_updated"]) == (1, 1)
        last = rows(project, f"describe history {project.test_schema}.rw limit 1")[0]
        assert last["operation"] == "WRITE", last["operation"]
        assert_contract(project, "rw")

        # Every new key above the target's key ceiling (its largest key, carried from the
        # backfill through each replay's commit; plan/key_top.py): no unchanged row can hold
        # it, so the write reads no target row for the check. Key 9 above was below the
        # ceiling, and was checked and refused.
        statements = traced(monkeypatch, tmp_path)
        project.run_sql(f"insert into {src} values (300, 1, 300)")
        project.run_sql(f"update {src} set v = 72 where id = 7")
        responses = by_model(run_ok(["run", "--select", "rw"]))
        assert (responses["rw"]["rows_inserted"], responses["rw"]["rows_updated"]) == (1, 1)
        writes = [line for line in statements() if "REPLACE USING" in line]
        # (the check is a LEFT JOIN of the target, sqlgen.replace_using)
        assert len(writes) == 1 and "LEFT JOIN" not in writes[0], writes
        assert_contract(project, "rw")
        # new keys alone, above the ceiling: a blind INSERT, not the insert-only MERGE
        project.run_sql(f"insert into {src} values (400, 1, 400), (401, 2, -1)")
        responses = by_model(run_ok(["run", "--select", "rw"]))
        assert (responses["rw"]["rows_inserted"], responses["rw"]["rows_updated"]) == (1, 0)
        last = rows(project, f"describe history {project.test_schema}.rw limit 1")[0]
        assert last["operation"] == "WRITE", last["operation"]
        assert_contract(project, "rw")


EVENTS = """
{{{{ config(materialized='batch_refresh', unique_key='id', refresh_mode='{mode}') }}}}
select id, v * 2 as v2 from {{{{ source('raw', 'ev') }}}} where v >= 0
"""


# A compound key: REPLACE WHERE takes no `(a, b) IN (...)`, REPLACE USING takes any key.
COMPOUND = """
{{ config(materialized='batch_refresh', unique_key=['grp', 'id']) }}
select grp, id, v * 2 as v2 from {{ source('raw', 'src') }} where v >= 0
"""


def last_write(project, model):
    """The target's newest commit: its operation and the key columns of a REPLACE USING."""
    last = rows(project, f"describe history {project.test_schema}.{model} limit 1")[0]
    return last["operation"], dict(last["operationParameters"] or {}).get("replaceUsingCols")


class TestReplaceUsing:
    """A replay of updated and new rows, no delete, in the embedded session: one WRITE commit
    by the DataFrame write `replaceUsing` (storage/frame_write.py), with the new-key check in
    it; a change with a delete keeps REPLACE WHERE (single key) or the MERGE (compound)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": sources_yml("src"), "rw.sql": ROWWISE, "rw2.sql": COMPOUND}

    def test_upserts_replace_by_key_in_one_commit(self, project):
        src = f"{project.test_schema}.src"
        project.run_sql(f"create table {src} (id int, grp int, v int) using delta "
                        f"tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"insert into {src} select cast(id as int), cast(id % 3 as int), "
                        f"cast(id as int) from range(20)")
        run_ok(["run"])

        project.run_sql(f"update {src} set v = v + 100 where id in (4, 5)")
        project.run_sql(f"update {src} set v = -1 where id = 6")  # leaves the filter: a delete
        project.run_sql(f"update {src} set v = 6 where id = 6")  # ... and comes back as it was
        project.run_sql(f"insert into {src} values (100, 1, 100)")
        responses = by_model(run_ok(["run"]))
        for model, keys in (("rw", "(id)"), ("rw2", "(grp, id)")):
            assert responses[model]["action"] == "replay", responses
            assert (responses[model]["rows_inserted"], responses[model]["rows_updated"],
                    responses[model]["rows_deleted"]) == (1, 2, 0), responses
            assert last_write(project, model) == ("WRITE", keys)
            assert_contract(project, model)

        # a new row on the key of an unchanged row, beside an update: refused before the commit
        versions = {m: table_version(project, f"{project.test_schema}.{m}") for m in ("rw", "rw2")}
        project.run_sql(f"insert into {src} values (9, 0, 999)")
        project.run_sql(f"update {src} set v = 71 where id = 8")
        output = run_fails(["run"])
        assert "unique_key (id) is not unique" in output, output
        assert "unique_key (grp, id) is not unique" in output, output
        assert "Traceback" not in output
        for model, version in versions.items():
            assert table_version(project, f"{project.test_schema}.{model}") == version

        # fixed upstream, and a delete besides: REPLACE WHERE (one key) and the MERGE (two)
        project.run_sql(f"delete from {src} where id = 9 and v = 999")
        project.run_sql(f"delete from {src} where id = 3")
        run_ok(["run"])
        assert last_write(project, "rw") == ("WRITE", None)
        assert last_write(project, "rw2") == ("MERGE", None)
        for model in ("rw", "rw2"):
            assert_contract(project, model)


    def test_a_writes_change_rows_from_its_metrics_are_its_change_feed(self, project):
        """What the cost model takes an upstream commit to add to its change feed (cost.
        commit_rows, from DESCRIBE HISTORY's metrics) is what the feed holds, for each write a
        refresh or a user makes. A REPLACE WHERE or REPLACE USING with deletion vectors reports
        the rows it kept of the files it touched as output rows and copied rows: on main those
        counted as changes, so a model downstream of a replay took a 4-row change of a
        1,000-row table for a change of ~1,000 rows (and overwrote where it would replay)."""
        from dbt.adapters.spark_batch_refresh.plan.cost import commit_rows
        from dbt.adapters.spark_batch_refresh.storage.values import as_map

        t = f"{project.test_schema}.metrics"
        project.run_sql(f"create table {t} (id bigint, v int) using delta tblproperties "
                        f"(delta.enableChangeDataFeed = true, delta.enableDeletionVectors = true)")
        project.run_sql(f"insert into {t} select id, 0 from range(1000) distribute by id % 2")
        writes = [
            f"insert into {t} replace where id in (3, 500) select id, 1 from range(3, 4)",
            f"insert into {t} REPLACE USING (id)\nselect id, 2 as v from range(600, 603)",
            f"merge into {t} t using (select id from range(10, 12)) s on t.id = s.id "
            f"when matched then update set v = 3",
            f"delete from {t} where id in (20, 700)",
            f"update {t} set v = 4 where id = 30",
            f"insert into {t} values (2000, 5)",
        ]
        for sql in writes:
            with project.adapter.connection_named("__test"):
                project.adapter._run_sql(sql)  # REPLACE USING as a refresh writes it
            last = rows(project, f"describe history {t} limit 1")[0]
            feed = rows(project, f"select count(*) as n from table_changes('{t}', "
                                 f"{last['version']}, {last['version']}) "
                                 f"where _change_type != 'update_preimage'")[0]["n"]
            preimages = rows(project, f"select count(*) as n from table_changes('{t}', "
                                      f"{last['version']}, {last['version']}) "
                                      f"where _change_type = 'update_preimage'")[0]["n"]
            estimate = commit_rows(str(last["operation"]), as_map(last["operationMetrics"]),
                                   as_map(last["operationParameters"]))
            # (an update is counted once by the metrics, twice in the feed: its two images)
            assert estimate == feed, (sql, estimate, feed, preimages, last["operationMetrics"])


class TestInlineCheckedAppend:
    """Inserts alone upstream (blind appends) whose keys lie above the target's key ceiling:
    one INSERT of the model over the inserted change rows, the key checks inline; a key at or
    below the ceiling goes to the staged path and its checks (plan/key_top.py)."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": sources_yml("ev"), "ev_rows.sql": EVENTS.format(mode="overwrite")}

    def test_appends_and_the_ceiling_of_an_overwrite(self, project, monkeypatch, tmp_path):
        from dbt.tests.util import write_file

        from dbt.adapters.spark_batch_refresh.embedded.spark import EmbeddedSpark
        from dbt.adapters.spark_batch_refresh.storage.jvm_commit_stats import inserted_key_max

        ev, target = f"{project.test_schema}.ev", f"{project.test_schema}.ev_rows"
        project.run_sql(f"create table {ev} (id bigint, v int) using delta "
                        f"tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"insert into {ev} select id, cast(id % 7 - 1 as int) from range(30)")
        run_ok(["run"])  # backfill
        project.run_sql(f"update {ev} set v = 3 where id = 7")
        assert by_model(run_ok(["run"]))["ev_rows"]["action"] == "overwrite"
        # the overwrite's inserted keys, from its file statistics, as the change feed has them
        version = table_version(project, target)
        by_sql = rows(project, f"select cast(max(id) as string) as m from table_changes("
                               f"'{target}', {version}, {version}) where _change_type = 'insert'")
        assert inserted_key_max(EmbeddedSpark._base, target, version, "ID") == by_sql[0]["m"]
        write_file(EVENTS.format(mode="incremental"), project.project_root, "models",
                   "ev_rows.sql")

        statements = traced(monkeypatch, tmp_path)

        # a blind append, then an insert-only MERGE (Delta does not call it blind)
        for change in (f"insert into {ev} values (30, 5), (31, -1), (32, 0)",
                       f"merge into {ev} t using (select 40L as id, 2 as v) s on t.id = s.id "
                       f"when not matched then insert *"):
            project.run_sql(change)
            response = by_model(run_ok(["run"]))["ev_rows"]
            assert (response["action"], response["staged_from"]) == ("replay", "changes")
            ran = statements()
            assert not any("\tCACHE " in s for s in ran), ran  # on main: staged and cached
            assert sum("INSERT INTO" in s for s in ran) == 1, ran
            assert_contract(project, "ev_rows")
        assert (response["rows_inserted"], response["staged_rows"]) == (1, 1), response

        # a new key below the ceiling (no row holds it): checked against the target, written
        project.run_sql(f"delete from {ev} where id = 12")
        run_ok(["run"])
        statements()
        project.run_sql(f"insert into {ev} values (12, 4)")
        response = by_model(run_ok(["run"]))["ev_rows"]
        assert response["rows_inserted"] == 1, response
        assert any("\tCACHE " in s for s in statements())
        assert_contract(project, "ev_rows")

        # the key of an unchanged row: refused by the staged path's check, target untouched
        before = table_version(project, target)
        project.run_sql(f"insert into {ev} values (3, 6)")
        output = run_fails(["run"])
        assert "ev_rows" in output and "unique_key (id) is not unique" in output, output
        assert table_version(project, target) == before


class TestDriverKeys:
    """A small netted change is checked in the driver (engine/driver_keys.py): its staging
    cached lazily, one read of its keys fills it and gives the checks and the key list."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": sources_yml("src", "dim"), "rw.sql": ROWWISE,
                "ij.sql": INNER_JOIN}

    def test_quality_in_the_driver_is_the_sql_one(self, project):
        """The counts, bounds and ceiling from the key rows equal sqlgen.key_quality's over the
        same staging: keys of each type it takes, NULL keys, duplicates, tombstones, new
        keys, and a compound key."""
        from dbt.adapters.spark_batch_refresh.engine import driver_keys
        from dbt.adapters.spark_batch_refresh.sql import sqlgen

        kinds = {"int": "cast(pmod(id * 7, 23) - 11 as int)",
                 "string": "concat('k', cast(pmod(id * 5, 17) as string))",
                 "date": "date_add(date'1999-12-25', cast(pmod(id * 3, 19) as int))"}
        for kind, key in kinds.items():
            for compound in (False, True):
                keys = ["_br_k_0", "_br_k_1"] if compound else ["_br_k_0"]
                second = ", cast(pmod(id, 2) as bigint) as _br_k_1" if compound else ""
                view = (f"(select id, if(pmod(id, 9) = 4, null, {key}) as _br_k_0{second}, "
                        f"if(pmod(id, 5) = 0, null, true) as _br_present, "
                        f"if(pmod(id, 3) = 0, true, null) as _br_had_old from range(60)) _br_s")
                for ranged, top in ((True, True), (False, False)):
                    want = rows(project, sqlgen.key_quality(view, keys, ranged, True, top))[0]
                    got = driver_keys.quality(rows(project, driver_keys.keys_sql(view, keys)),
                                              len(keys), ranged, top)
                    assert {k: got.get(k) for k in want} == want, (kind, compound, ranged)

    def test_small_change_reads_its_staging_once(self, project, monkeypatch, tmp_path):
        from dbt.adapters.spark_batch_refresh.engine import driver_keys

        src, dim = f"{project.test_schema}.src", f"{project.test_schema}.dim"
        project.run_sql(f"create table {src} (id int, grp int, v int) using delta "
                        f"tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"insert into {src} select cast(id as int), cast(id % 3 as int), "
                        f"cast(id as int) from range(30)")
        project.run_sql(f"create table {dim} (id int, label string) using delta "
                        f"tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"insert into {dim} values (0, 'zero'), (1, 'one'), (2, 'two')")
        run_ok(["run"])
        statements = traced(monkeypatch, tmp_path)

        # updates, a delete, a row leaving the filter: one read of the staging before the
        # REPLACE WHERE (on main: the eager cache, the key counts, the key list)
        project.run_sql(f"update {src} set v = v + 100 where id in (4, 5)")
        project.run_sql(f"delete from {src} where id = 6")
        project.run_sql(f"update {src} set v = -1 where id = 7")
        responses = by_model(run_ok(["run", "--select", "rw"]))
        assert (responses["rw"]["rows_updated"], responses["rw"]["rows_deleted"]) == (2, 2)
        ran = [s.split("\t", 1)[1] for s in statements()]
        write = next(i for i, s in enumerate(ran) if "REPLACE WHERE" in s)
        staged = next(i for i, s in enumerate(ran) if s.startswith("CACHE"))
        assert ran[staged].startswith("CACHE LAZY TABLE"), ran
        reads = [s for s in ran[staged + 1:write] if "_br_staging" in s]
        assert len(reads) == 1 and "ORDER BY _br_k_0" in reads[0], reads
        assert_contract(project, "rw")

        # a duplicate key of an unchanged row is still refused, the target untouched
        before = table_version(project, f"{project.test_schema}.rw")
        project.run_sql(f"insert into {src} values (9, 0, 999)")
        project.run_sql(f"update {src} set v = 71 where id = 8")
        output = run_fails(["run", "--select", "rw"])
        assert "rw" in output and "unique_key (id) is not unique" in output, output
        assert table_version(project, f"{project.test_schema}.rw") == before
        project.run_sql(f"delete from {src} where id = 9 and v = 999")
        run_ok(["run"])
        assert_contract(project, "rw")

        # the planner counts 2 change rows (one update), the join stages 9 (grp 1's rows):
        # the key read stops one row past the limit, and SQL counts the keys as before
        monkeypatch.setattr(driver_keys, "DRIVER_KEYS_MAX_ROWS", 2)
        statements()
        project.run_sql(f"update {dim} set label = 'uno' where id = 1")
        responses = by_model(run_ok(["run", "--select", "ij"]))
        assert (responses["ij"]["staged_from"], responses["ij"]["staged_rows"]) == ("join", 9)
        ran = statements()
        assert any("LIMIT 3" in s for s in ran) and any("count(DISTINCT" in s for s in ran), ran
        assert_contract(project, "ij")
