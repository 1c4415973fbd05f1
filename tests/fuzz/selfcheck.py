"""Checks the generator without dbt or the plugin: every generated model is valid Spark SQL,
deterministic (the same rows under 1 and 3 shuffle partitions) and its unique key is unique and
never NULL, on the initial data and after each change batch.

    .venv/bin/python -m tests.fuzz.selfcheck SEEDS MODELS STEPS     e.g. 1,2,3 30 4

Prints one line per problem and exits non-zero when there is any. Minutes per seed (one JVM).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from dataclasses import replace
from typing import List

from tests.fuzz.data import Data, commit_sql
from tests.fuzz.generator import NULL_KEYS, Model, generate, model_name


def start_spark():
    from pyspark.sql import SparkSession

    from dbt.adapters.spark_batch_refresh.embedded.session_defaults import (
        SessionSettings, delta_package, embedded_confs, jar_cache_file)
    from dbt.adapters.spark_batch_refresh.embedded.jar_cache import read_jars
    from tests.spark_confs import TEST_SPARK_CONFS

    base = tempfile.mkdtemp(prefix="fuzz-selfcheck-")
    settings = SessionSettings(session_dir=base, user_confs=dict(TEST_SPARK_CONFS))
    cache = jar_cache_file(delta_package(settings, os.environ), os.environ)
    settings = replace(settings, cached_jars=read_jars(cache) or None)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.enableHiveSupport()
    for key, value in embedded_confs(settings, cwd=base).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def render(body: str, schema: str) -> str:
    body = re.sub(r"\{\{ source\('raw', '(\w+)'\) \}\}", rf"{schema}.\1", body)
    # a model's `table` twin holds what the model does: read the model
    return re.sub(r"\{\{ ref\('(\w+)'\) \}\}", lambda m: f"{schema}.{model_name(m.group(1))}", body)


def check_models(spark, schema: str, models: List[Model], label: str, broken: set) -> List[str]:
    problems = []
    for m in models:
        if m.name in broken or {model_name(r) for r in m.refs} & broken:
            broken.add(m.name)
            continue
        sql = render(m.body, schema)
        try:
            spark.sql(f"drop table if exists {schema}.{m.name}")
            spark.sql(f"create table {schema}.{m.name} using delta as {sql}")
            if m.key:
                key = ", ".join(m.key)
                nulls = ("false" if m.features & NULL_KEYS
                         else " or ".join(f"{k} is null" for k in m.key))
                bad = spark.sql(f"select count(*) - count(distinct struct({key})) as dup, "
                                f"count_if({nulls}) as nul from {schema}.{m.name}").collect()[0]
                if bad["dup"] or bad["nul"]:
                    problems.append(f"{label} {m.name}: key {m.key} has {bad['dup']} duplicates, "
                                    f"{bad['nul']} NULLs")
                    broken.add(m.name)
            spark.conf.set("spark.sql.shuffle.partitions", "3")
            diff = spark.sql(f"select count(*) as n from (({sql}) except all "
                             f"(select * from {schema}.{m.name}))").collect()[0]["n"]
            spark.conf.set("spark.sql.shuffle.partitions", "1")
            if diff:
                problems.append(f"{label} {m.name}: not deterministic ({diff} rows differ)")
                broken.add(m.name)
        except Exception as error:  # noqa: BLE001 - every problem is reported
            spark.conf.set("spark.sql.shuffle.partitions", "1")
            problems.append(f"{label} {m.name}: {str(error).splitlines()[0][:300]}")
            broken.add(m.name)
    return problems


def main(argv: List[str]) -> int:
    seeds = [int(s) for s in argv[0].split(",")]
    n_models, steps = int(argv[1]), int(argv[2])
    spark = start_spark()
    problems: List[str] = []
    for seed in seeds:
        schema = f"selfcheck_{seed}"
        spark.sql(f"create database if not exists {schema}")
        data = Data(seed)
        for statement in data.initial_sql(schema):
            spark.sql(statement)
        models = generate(seed, n_models)
        broken: set = set()
        problems += check_models(spark, schema, models, f"seed {seed} step 0", broken)
        for step in range(1, steps + 1):
            kind, commits = data.batch()
            for table, ops in commits:
                spark.sql(commit_sql(schema, table, ops))
            problems += check_models(spark, schema, models, f"seed {seed} step {step} ({kind})", broken)
        print(f"seed {seed}: {len(models)} models, {len(broken)} with problems", flush=True)
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
