"""Naming change-feed gaps and retention risk (pure: text in, findings out).

Delta reports a gap only as an error of the read that hits it; these functions turn the error
text and table properties into something a user can act on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Mapping, Optional

# (error fragments, gap kind) in the order they are tested
_SIGNALS = (
    (("DELTA_MISSING_CHANGE_DATA",), "cdf_off"),
    (("INCOMPATIBLE_SCHEMA_CHANGE", "INCOMPATIBLE_DATA_SCHEMA",
      "DELTA_BLOCK_COLUMN_MAPPING_AND_CDC_OPERATION"), "schema"),
    (("DELTA_VERSION_NOT_FOUND", "DELTA_CDC_START_VERSION", "VersionNotFoundException",
      "Could not find any delta files for version", "DELTA_VERSIONS_NOT_CONTIGUOUS",
      "DELTA_LOG_FILE_NOT_FOUND"), "log_retention"),
    (("FILE_NOT_EXIST", "FileNotFoundException", "FAILED_READ_FILE"), "vacuumed"),
)

GAP_TEXT = {
    "cdf_off": "Change Data Feed was turned off for part of the range (DELTA_MISSING_CHANGE_DATA)",
    "schema": "the range holds an incompatible schema change (rename, drop or type change)",
    "log_retention": "the consumed version is older than the table's log retention",
    "vacuumed": "change files of the range were removed by VACUUM",
    "recreated": "the table was dropped and recreated (its Delta table id changed)",
    "went_back": "the table's version went backwards (dropped and recreated)",
    "same_version": ("the table was dropped and recreated up to the consumed version (its "
                     "commit at that version has another commit time)"),
}


@dataclass(frozen=True)
class Gap:
    kind: str
    upstream: str
    from_version: int
    to_version: int

    def describe(self) -> str:
        return (f"upstream {self.upstream}, versions v{self.from_version}..v{self.to_version}: "
                f"{GAP_TEXT[self.kind]}")


def classify(error_text: str) -> Optional[str]:
    if "_delta_log" in error_text and ("FILE_NOT_EXIST" in error_text or "FileNotFound" in error_text):
        return "log_retention"  # a commit file of the range is gone: log cleanup
    for fragments, kind in _SIGNALS:
        if any(f in error_text for f in fragments):
            return kind
    return None


_INTERVAL = re.compile(r"(?:interval\s+)?(\d+(?:\.\d+)?)\s*(second|minute|hour|day|week)s?", re.I)
_UNIT = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
DEFAULT_RETENTION = {
    "delta.deletedFileRetentionDuration": timedelta(days=7),
    "delta.logRetentionDuration": timedelta(days=30),
}
WARN_FRACTION = 0.25  # warn when less than a quarter of the retention is left
# A replay reads an upstream's properties for the warning only once its consumed commit is this
# old: a model refreshed at least hourly then never pays that statement, and only a retention
# set below 80 minutes (a quarter of it left at 60) goes unwarned. The gap itself is still
# found by the change-feed read and handled per on_change_feed_gap.
RETENTION_CHECK_AGE = timedelta(hours=1)


def parse_interval(text: str) -> Optional[timedelta]:
    match = _INTERVAL.search(str(text))
    if not match:
        return None
    return timedelta(seconds=float(match.group(1)) * _UNIT[match.group(2).lower()])


def retention_risk(props: Mapping[str, str], age: timedelta) -> Optional[tuple[str, timedelta, timedelta]]:
    """(property, retention, time left) for the tightest retention the consumed data nears."""
    worst = None
    for prop, default in DEFAULT_RETENTION.items():
        retention = parse_interval(props[prop]) if prop in props else default
        if retention is None:
            continue
        left = retention - age
        if left < retention * WARN_FRACTION and (worst is None or left < worst[2]):
            worst = (prop, retention, left)
    return worst
