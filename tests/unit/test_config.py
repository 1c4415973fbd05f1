import pytest

from dbt.adapters.spark_batch_refresh.plan.config import format_duration, parse_config, parse_duration
from dbt.adapters.spark_batch_refresh.errors import BatchRefreshUserError


@pytest.mark.parametrize(
    "raw, seconds",
    [("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86400), (45, 45), ("0s", 0), (" 3 min", 180)],
)
def test_durations(raw, seconds):
    assert parse_duration(raw) == seconds


@pytest.mark.parametrize("raw", ["soon", "-5", "5 weeks", "", True, -1])
def test_bad_durations(raw):
    with pytest.raises(ValueError):
        parse_duration(raw)


def test_format_duration():
    assert format_duration(7200) == "2h"
    assert format_duration(90) == "1.5m"


def test_defaults():
    config = parse_config("m", {})
    assert config.refresh_mode == "auto" and config.unique_key == ()
    assert config.refresh_interval_s is None and config.lease_timeout_s == 3600
    assert config.aggregate_upkeep == "recompute"


def test_unique_key_forms():
    assert parse_config("m", {"unique_key": "id"}).unique_key == ("id",)
    assert parse_config("m", {"unique_key": ["a", "b"]}).unique_key == ("a", "b")


def test_all_problems_reported_at_once():
    with pytest.raises(BatchRefreshUserError) as info:
        parse_config(
            "orders",
            {"refresh_mode": "sometimes", "refresh_interval": "soon", "file_format": "parquet",
             "on_change_feed_gap": "ignore", "merge_chunk_rows": 0, "unique_key": 5,
             "aggregate_upkeep": "sometimes"},
        )
    text = str(info.value)
    assert "batch_refresh model 'orders'" in text
    for fragment in ["`refresh_mode`", "`refresh_interval`", "`file_format`",
                     "`on_change_feed_gap`", "`merge_chunk_rows`", "`unique_key`",
                     "`aggregate_upkeep`"]:
        assert fragment in text
    assert len(info.value.details) == 7


def test_cdf_cannot_be_turned_off_on_the_target():
    with pytest.raises(BatchRefreshUserError, match="enableChangeDataFeed"):
        parse_config("m", {"tblproperties": {"delta.enableChangeDataFeed": "false"}})


def test_config_names_are_every_config_parse_config_reads():
    """The macros hand parse_config exactly CONFIG_NAMES: a config it reads but that list
    lacks would always look unset."""
    from dbt.adapters.spark_batch_refresh.plan.config import CONFIG_NAMES, DECLARED_KEYS

    class Recording(dict):
        def __init__(self, **items):
            super().__init__(**items)
            self.read = set()

        def get(self, key, default=None):
            self.read.add(key)
            return super().get(key, default)

    raw = Recording(unique_key="id")
    parse_config("m", raw)
    assert raw.read == set(CONFIG_NAMES) | {DECLARED_KEYS}  # the tests' records: not a config
