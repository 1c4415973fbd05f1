"""A throwaway local Spark + Delta session for the micro-benchmarks (apply_paths.py,
metadata_statements.py): its warehouse and metastore in `where`, no UI, the embedded
session's local-sized defaults (session_defaults.py) so the numbers carry over."""

from __future__ import annotations

from typing import Any, Mapping, Optional


def scratch_session(where: str, master: str, shuffle_partitions: int,
                    confs: Optional[Mapping[str, str]] = None) -> Any:
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master)
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog",
                       "org.apache.spark.sql.delta.catalog.DeltaCatalog")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.adaptive.enabled", "false")
               .config("spark.databricks.delta.snapshotPartitions", "1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.warehouse.dir", f"{where}/warehouse")
               .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={where}"))
    for key, value in (confs or {}).items():
        builder = builder.config(key, value)
    spark = configure_spark_with_delta_pip(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
