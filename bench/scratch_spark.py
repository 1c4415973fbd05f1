"""A throwaway local Spark + Delta session for the micro-benchmarks (apply_paths.py,
metadata_statements.py, order_effect.py, outer_join.py, overwrite_paths.py,
state_checkpoints.py): its warehouse and
metastore in `where`, no UI, the embedded session's local-sized defaults (session_defaults.py)
so the numbers carry over."""

from __future__ import annotations

import shutil
import sys
import tempfile
from contextlib import contextmanager
from typing import Any, Iterator, List, Mapping, Optional


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
               .config("spark.sql.codegen.cache.maxEntries", "1000")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.warehouse.dir", f"{where}/warehouse")
               .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={where}"))
    for key, value in (confs or {}).items():
        builder = builder.config(key, value)
    spark = configure_spark_with_delta_pip(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def scratch(prefix: str, master: str, shuffle_partitions: int,
            confs: Optional[Mapping[str, str]] = None) -> Iterator[Any]:
    """A scratch session in a new temporary folder, stopped and removed on the way out."""
    where = tempfile.mkdtemp(prefix=prefix)
    spark = scratch_session(where, master, shuffle_partitions, confs)
    try:
        yield spark
    finally:
        spark.stop()
        shutil.rmtree(where, ignore_errors=True)


def arguments(*defaults: Any) -> List[Any]:
    """The script's command-line arguments, each of its default's type; the default where
    one is not given."""
    given = sys.argv[1:]
    return [type(d)(given[i]) if i < len(given) else d for i, d in enumerate(defaults)]
