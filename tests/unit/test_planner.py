from datetime import datetime, timedelta

import pytest

from dbt.adapters.spark_batch_refresh.sql.analysis import analyze
from dbt.adapters.spark_batch_refresh.plan.config import BatchRefreshConfig, parse_config
from dbt.adapters.spark_batch_refresh.errors import BatchRefreshUserError
from dbt.adapters.spark_batch_refresh.plan.planner import (
    ModelState, UpstreamPoint, moved_ranges, plan_run)

T0 = datetime(2026, 1, 1, 12, 0, 0)
ROWWISE = analyze("select id, v from s.t where v > 0")
JOIN = analyze("select a.id, b.v from s.t a join s.u b on a.id = b.id", ("id",))
WINDOW = analyze("select a.id, row_number() over (order by b.v) as r from s.t a join s.u b "
                 "on a.id = b.id", ("id",))


def plan(state=None, latest=None, config=None, analysis=ROWWISE, now=T0, **kw):
    return plan_run(
        model="m", config=parse_config("m", config or {"unique_key": "id"}), analysis=analysis,
        fingerprint="fp", state=state, latest=latest or {"s.t": UpstreamPoint(5, T0)},
        target_exists=kw.get("target_exists", True), full_refresh=kw.get("full_refresh", False),
        force=kw.get("force", False), now=now, inserts_alone=kw.get("inserts_alone", True),
    )


def consumed(version=5, at=T0, fp="fp"):
    return ModelState(fp, {"s.t": UpstreamPoint(version, at)})


def test_first_run_backfills_at_latest():
    p = plan()
    assert p.action == "backfill" and p.versions_to() == {"s.t": 5}


def test_noop_when_nothing_moved():
    assert plan(consumed(5)).action == "noop"


def test_replay_when_moved():
    p = plan(consumed(3), latest={"s.t": UpstreamPoint(5, T0)})
    assert p.action == "replay" and p.versions_from() == {"s.t": 3} and p.versions_to() == {"s.t": 5}


def test_full_refresh_and_model_change_and_missing_target():
    assert plan(consumed(5), full_refresh=True).action == "backfill"
    assert plan(consumed(5, fp="old")).action == "backfill"
    assert plan(consumed(5), target_exists=False).action == "backfill"


def test_model_change_can_fail():
    with pytest.raises(BatchRefreshUserError, match="on_model_change"):
        plan(consumed(5, fp="old"), config={"unique_key": "id", "on_model_change": "fail"})


def test_version_going_back_rebuilds():
    p = plan(consumed(9), latest={"s.t": UpstreamPoint(2, T0)})
    assert p.action == "backfill" and "went back" in p.reason


def test_same_version_from_another_commit_rebuilds():
    """An upstream dropped and created again up to the version consumed (dbt-spark rebuilds a
    `table` model that way on every run): same number, another commit time. Main took it for
    "no upstream changed" and kept the model stale."""
    later = {"s.t": UpstreamPoint(5, T0 + timedelta(minutes=3))}
    p = plan(consumed(5, at=T0), latest=later)
    assert p.action == "backfill" and "recreated up to the consumed version" in p.reason
    assert p.versions_to() == {"s.t": 5}
    with pytest.raises(BatchRefreshUserError, match="on_change_feed_gap"):
        plan(consumed(5, at=T0), latest=later,
             config={"unique_key": "id", "on_change_feed_gap": "fail"})
    # A commit time nobody recorded (older state) cannot tell: nothing moved, as before.
    assert plan(consumed(5, at=None), latest=later).action == "noop"


def test_gate_closed_then_open():
    cfg = {"unique_key": "id", "refresh_interval": "1h"}
    closed = plan(consumed(3, at=T0), latest={"s.t": UpstreamPoint(5, T0 + timedelta(minutes=5))},
                  config=cfg, now=T0 + timedelta(minutes=30))
    assert closed.action == "skip" and closed.next_due == T0 + timedelta(hours=1)
    opened = plan(consumed(3, at=T0), latest={"s.t": UpstreamPoint(5, T0)}, config=cfg,
                  now=T0 + timedelta(hours=1))
    assert opened.action == "replay"
    forced = plan(consumed(3, at=T0), latest={"s.t": UpstreamPoint(5, T0)}, config=cfg,
                  now=T0, force=True)
    assert forced.action == "replay"


def test_gate_does_not_open_without_change():
    cfg = {"unique_key": "id", "refresh_interval": "1h"}
    assert plan(consumed(5), config=cfg, now=T0 + timedelta(days=3)).action == "noop"


def test_auto_falls_back_to_full_with_reason():
    p = plan(ModelState("fp", {"s.t": UpstreamPoint(1, T0), "s.u": UpstreamPoint(1, T0)}),
             latest={"s.t": UpstreamPoint(2, T0), "s.u": UpstreamPoint(1, T0)}, analysis=WINDOW)
    assert p.action == "full" and "window function" in p.fallback_reason


def test_keyless_model_recomputes_a_change_with_updates_under_auto_only():
    moved = dict(state=consumed(3), latest={"s.t": UpstreamPoint(5, T0)})
    assert plan(**moved, config={"unique_key": []}).action == "replay"  # inserts: an append
    p = plan(**moved, config={"unique_key": []}, inserts_alone=False)
    assert (p.action, p.mode) == ("full", "full") and "has no unique_key" in p.fallback_reason
    # refresh_mode='incremental' replays as planned and the staging's guard names the error
    p = plan(**moved, config={"unique_key": [], "refresh_mode": "incremental"},
             inserts_alone=False)
    assert p.action == "replay"
    # a keyed model's replay applies updates and deletes by its key
    keyed = analyze("select id, v from s.t where v > 0", ("id",))
    assert plan(**moved, analysis=keyed, inserts_alone=False).action == "replay"


def test_join_replays_by_affected_keys():
    p = plan(ModelState("fp", {"s.t": UpstreamPoint(1, T0), "s.u": UpstreamPoint(1, T0)}),
             latest={"s.t": UpstreamPoint(2, T0), "s.u": UpstreamPoint(1, T0)}, analysis=JOIN)
    assert p.action == "replay" and p.fallback_reason is None


def test_wrong_unique_key_is_an_error():
    wrong = analyze("select k, sum(v) as total from s.t group by k", ("total",))
    with pytest.raises(BatchRefreshUserError, match="is an aggregate"):
        plan(analysis=wrong, config={"unique_key": "total"})


def test_incremental_mode_refuses_unsound_model():
    with pytest.raises(BatchRefreshUserError, match="refresh_mode='incremental'"):
        plan(analysis=WINDOW, latest={"s.t": UpstreamPoint(1, T0), "s.u": UpstreamPoint(1, T0)},
             config={"unique_key": "id", "refresh_mode": "incremental"})


def test_non_delta_upstream_always_recomputes():
    p = plan(ModelState("fp", {}), latest={"s.t": None})
    assert p.action == "full" and "not a Delta table" in p.fallback_reason


def test_closed_gate_skips_before_reading_upstreams() -> None:
    from dbt.adapters.spark_batch_refresh.plan.planner import closed_gate

    t0 = datetime(2026, 1, 1, 12, 0, 0)
    cfg = BatchRefreshConfig(refresh_interval_s=7200)
    state = ModelState("fp", {"a": UpstreamPoint(3, t0), "b": UpstreamPoint(5, t0 + timedelta(hours=1))})
    plan = closed_gate(config=cfg, upstreams=["a", "b"], state=state, fingerprint="fp",
                       now=t0 + timedelta(minutes=90))
    assert plan is not None and plan.action == "skip"
    assert plan.next_due == t0 + timedelta(hours=2)  # the oldest consumed commit + interval
    # the gate may be open for a moved upstream: plan with the upstreams' history
    assert closed_gate(config=cfg, upstreams=["a", "b"], state=state, fingerprint="fp",
                       now=t0 + timedelta(hours=2)) is None
    # no interval, a model edit, a new upstream, a first run: never decided early
    for kwargs in ({"config": BatchRefreshConfig()}, {"fingerprint": "edited"},
                   {"upstreams": ["a", "b", "c"]}, {"state": None}):
        args = {"config": cfg, "upstreams": ["a", "b"], "state": state, "fingerprint": "fp",
                "now": t0 + timedelta(minutes=90), **kwargs}
        assert closed_gate(**args) is None, kwargs


def test_an_analysis_defect_is_a_full_recompute_not_a_failed_build(monkeypatch):
    """Issue 31: any exception while analysing or rewriting a model falls back, with the
    reason; only refresh_mode='incremental' turns it into an error."""
    from dbt.adapters.spark_batch_refresh.sql import keypath

    def broken(*args, **kwargs):
        raise RuntimeError("rewrite defect")

    monkeypatch.setattr(keypath, "affected_keys", broken)
    analysis = analyze("select a.id, b.v from s.t a join s.u b on a.id = b.id", ("id",))
    assert analysis.upstreams == ("s.t", "s.u")
    assert "could not be analysed for replay (RuntimeError: rewrite defect)" in (
        analysis.incremental_reason)
    latest = {"s.t": UpstreamPoint(5, T0), "s.u": UpstreamPoint(5, T0)}
    p = plan(consumed(3), latest=latest, analysis=analysis)
    assert p.mode == "full" and "rewrite defect" in p.fallback_reason
    with pytest.raises(BatchRefreshUserError, match="rewrite defect"):
        plan(consumed(3), latest=latest, analysis=analysis,
             config={"unique_key": "id", "refresh_mode": "incremental"})


def test_a_rewrite_that_fails_only_at_replay_time_is_caught_by_the_rehearsal(monkeypatch):
    from dbt.adapters.spark_batch_refresh.sql import analysis as sa

    def broken(*args, **kwargs):
        raise ValueError("bad text")

    monkeypatch.setattr(sa, "over_changes", broken)
    analysis = analyze("select id, v from s.t where v > 0", ("id",))
    assert "ValueError: bad text" in analysis.incremental_reason
    assert analysis.upstreams == ("s.t",)


def test_moved_ranges_only_upstreams_past_their_consumed_version():
    points = {"a": UpstreamPoint(7, T0), "b": UpstreamPoint(3, T0), "c": None,
              "d": UpstreamPoint(9, T0)}
    assert moved_ranges({"a": 4, "b": 3, "c": 1}, points) == {"a": (5, 7)}
