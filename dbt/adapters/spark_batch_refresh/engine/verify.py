"""The correctness contract, checked on demand: the target equals the model evaluated from
scratch at the upstream versions its newest refresh consumed.

The tests prove it after every run; this lets a user ask too, as a generic dbt test
(`batch_refresh_consistent`, every differing row is a failure) or as
`dbt run-operation batch_refresh_verify` (counts and examples). Rows are compared as the test
suite compares them: `EXCEPT ALL` both ways over every column, so duplicates count and floating
columns must match exactly. The consumed versions come from the target's own log, the SQL from
the refresh-state row of that refresh.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_batch_refresh.storage.delta import DeltaReader
from dbt.adapters.spark_batch_refresh.errors import BatchRefreshUserError
from dbt.adapters.spark_batch_refresh.engine.record import Recorder
from dbt.adapters.spark_batch_refresh.engine.run_result import Fetch, Run
from dbt.adapters.spark_batch_refresh.storage.state import StateStore
from dbt.adapters.spark_batch_refresh.sql.rewrite import pin_versions

SIDE = "batch_refresh_side"
ONLY_TARGET = "only in target"
ONLY_MODEL = "only in model"
EXAMPLES = 5


@dataclass
class Verdict:
    model: str
    target: str
    versions: Dict[str, int]
    only_in_target: int = 0
    only_in_model: int = 0
    examples: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return self.only_in_target == 0 and self.only_in_model == 0

    def render(self) -> str:
        at = ", ".join(f"{u} v{v}" for u, v in sorted(self.versions.items()))
        if self.consistent:
            return (f"batch_refresh model '{self.model}': {self.target} equals the model "
                    f"evaluated from scratch at {at}.")
        lines = [f"batch_refresh model '{self.model}': {self.target} differs from the model "
                 f"evaluated from scratch at {at}: {self.only_in_target} rows only in the "
                 f"target, {self.only_in_model} rows only in the model. Examples:"]
        lines += [f"  {row.get(SIDE)}: " + ", ".join(f"{k}={v}" for k, v in row.items() if k != SIDE)
                  for row in self.examples]
        lines.append(f"Fix: `dbt run --select {self.model} --full-refresh` rebuilds it; if no one "
                     "wrote the target by hand, please report the model and these rows.")
        return "\n".join(lines)


def differences_sql(target: str, expected: str) -> str:
    """Every row in one and not the other (EXCEPT ALL both ways), tagged with its side."""
    return (
        f"SELECT '{ONLY_TARGET}' AS {SIDE}, * FROM ((SELECT * FROM {target}) "
        f"EXCEPT ALL ({expected})) _br_t\n"
        f"UNION ALL\n"
        f"SELECT '{ONLY_MODEL}' AS {SIDE}, * FROM (({expected}) "
        f"EXCEPT ALL (SELECT * FROM {target})) _br_m"
    )


class Verifier:
    def __init__(self, fetch: Fetch, run: Run, recorder: Recorder) -> None:
        self._fetch, self._run = fetch, run
        self._reader = DeltaReader(fetch)
        self._recorder = recorder

    def differences(self, model: str, model_id: str, target: str,
                    state_schema: str) -> tuple[str, Dict[str, int]]:
        """The differences query and the consumed versions it pins; a user error when there is
        nothing consistent to compare (no refresh yet, a refresh under way, no recorded SQL).

        The model SQL is the compiled SQL the refresh ran, from the state row (rendering the
        model here would resolve its refs in a test node that does not depend on them); the
        row belongs to the target's newest refresh when their fingerprints agree.
        """
        fix = f"Fix: `dbt run --select {model}`, then check again."
        try:
            last = self._reader.target_log(target, model_id).last
        except DbtRuntimeError:
            last = None  # no table: reported like no refresh
        if last is None:
            raise BatchRefreshUserError(model, "nothing to verify", [
                f"{target} has no refresh of this model in its log.", fix])
        if not last.complete:
            raise BatchRefreshUserError(model, "a refresh is under way", [
                f"the target's newest commit is chunk {last.chunk} of {last.chunks} of a "
                "refresh; the next run finishes it.", fix])
        sql = self._refreshed_sql(model_id, last.fingerprint, state_schema)
        if sql is None:
            raise BatchRefreshUserError(model, "the SQL of its last refresh is not recorded", [
                "the refresh-state row does not match the target's newest refresh (written "
                "before this release, or by a run killed before its state write).", fix])
        versions = {u: p.version for u, p in last.pinned.items()}
        return differences_sql(target, pin_versions(sql, versions)), versions

    def _refreshed_sql(self, model_id: str, fingerprint: str, state_schema: str) -> Optional[str]:
        """The compiled SQL of the refresh with this fingerprint: this invocation's own (not
        written yet), else the state row's."""
        pending = self._recorder.recorded(model_id)
        if pending is not None and pending.sql and pending.commit is not None \
                and pending.commit.fingerprint == fingerprint:
            return pending.sql
        try:
            row = StateStore(state_schema, self._fetch, self._run).read(model_id)
        except DbtRuntimeError:
            return None  # no state table
        if row is None or not row.model_sql or row.fingerprint != fingerprint:
            return None
        return row.model_sql

    def verify(self, model: str, model_id: str, target: str, state_schema: str) -> Verdict:
        query, versions = self.differences(model, model_id, target, state_schema)
        verdict = Verdict(model, target, versions)
        counts = self._fetch(f"SELECT {SIDE}, count(*) AS n FROM ({query}) _br_d GROUP BY {SIDE}")
        for row in counts:
            if row[SIDE] == ONLY_TARGET:
                verdict.only_in_target = int(row["n"])
            else:
                verdict.only_in_model = int(row["n"])
        if not verdict.consistent:
            verdict.examples = self._fetch(f"SELECT * FROM ({query}) _br_d LIMIT {EXAMPLES}")
        return verdict
