"""The user-facing errors: each names the model, what is wrong and what to do."""

from __future__ import annotations

from typing import Iterable

from dbt_common.exceptions import DbtRuntimeError


class BatchRefreshUserError(DbtRuntimeError):
    """A user mistake, detected before the target is touched."""

    def __init__(self, model: str, what: str, details: Iterable[str]) -> None:
        lines = list(details)
        body = "\n".join(f"  - {line}" for line in lines)
        super().__init__(f"batch_refresh model '{model}': {what}:\n{body}")
        self.model = model
        self.details = lines


class BadKeyError(BatchRefreshUserError):
    """The staged rows' key is NULL or repeated. For a key the model configures it is the
    user's mistake; for one its tests declare the refresh goes on without a key
    (executor.py)."""


class NullKeyError(BadKeyError):
    """The only problem with the staged rows' key: some are NULL. For a key inferred from the
    query (a NULL group of a GROUP BY) the refresh goes on without a key too."""


class BatchRefreshLeaseError(DbtRuntimeError):
    """Another run holds the model's refresh lease."""


class BatchRefreshRuntimeError(DbtRuntimeError):
    """A fault during a refresh; the state is left resumable."""


class MissingUpstream(Exception):
    """An upstream relation of the model does not exist; callers turn it into a user error."""

    def __init__(self, relation: str) -> None:
        super().__init__(relation)
        self.relation = relation
