"""Row-wise replays staged from the change feed alone (no scan of the upstream table).

Changes between two runs include the cases that make netting necessary: a row changed and
changed back, a row changed twice, a row deleted and re-inserted as it was, a row leaving and
re-entering the filter. A new upstream row that duplicates the key of an unchanged row is the
one thing the change feed alone cannot see; the MERGE refuses it before committing.
"""

from __future__ import annotations

import pytest

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


def by_model(results):
    return {r.node.name: r.adapter_response for r in results}


class TestChangesOnlyReplay:
    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": sources_yml("src"), "rw.sql": ROWWISE, "with_map.sql": WITH_MAP}

    def test_netting_and_duplicate_guard(self, project):
        src = f"{project.test_schema}.src"
        project.run_sql(f"create table {src} (id int, grp int, v int) using delta "
                        f"tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"insert into {src} select cast(id as int), cast(id % 3 as int), "
                        f"cast(id as int) from range(20)")
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
        # (EXCEPT ALL, which assert_contract uses, does not take maps)
        as_text = "select id, to_json(m) as m from {} order by id"
        assert (rows(project, as_text.format(f"{project.test_schema}.with_map"))
                == rows(project, as_text.format(f"(select id, map('v', v) as m from {src})")))

        # an inserted row with the key of an unchanged row: refused, target untouched
        before = table_version(project, f"{project.test_schema}.rw")
        project.run_sql(f"insert into {src} values (9, 0, 999)")
        output = run_fails(["run", "--select", "rw"])
        assert "rw" in output and "unique_key (id) is not unique" in output, output
        assert "Traceback" not in output
        assert table_version(project, f"{project.test_schema}.rw") == before
        assert state(project, "rw")["phase"] == "idle"

        # once the upstream is fixed, the next run plans afresh and replays
        project.run_sql(f"delete from {src} where id = 9 and v = 999")
        responses = by_model(run_ok(["run", "--select", "rw"]))
        assert responses["rw"]["action"] == "replay", responses
        assert_contract(project, "rw")
