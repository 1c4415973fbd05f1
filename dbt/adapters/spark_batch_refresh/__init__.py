from dbt.adapters.base import AdapterPlugin

from dbt.adapters.spark_batch_refresh.connections import (  # noqa: F401
    SparkBatchRefreshConnectionManager,
    SparkBatchRefreshCredentials,
)
from dbt.adapters.spark_batch_refresh.impl import SparkBatchRefreshAdapter
from dbt.include import spark_batch_refresh

Plugin = AdapterPlugin(
    adapter=SparkBatchRefreshAdapter,  # type: ignore[arg-type]
    credentials=SparkBatchRefreshCredentials,
    include_path=spark_batch_refresh.PACKAGE_PATH,
    dependencies=["spark"],
)
