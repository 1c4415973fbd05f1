"""The fuzz generator without Spark: it is seeded, its SQL parses as Spark SQL, and every model
has the key its config names (tests/fuzz/selfcheck.py runs the SQL on Spark)."""

from __future__ import annotations

import re

import sqlglot

from tests.fuzz.generator import KINDS, generate


def rendered(body: str) -> str:
    body = re.sub(r"\{\{ source\('raw', '(\w+)'\) \}\}", r"raw.\1", body)
    return re.sub(r"\{\{ ref\('(\w+)'\) \}\}", r"raw.\1", body)


def test_seeded_and_parseable():
    kinds = set()
    for seed in range(60):
        models = generate(seed, 16)
        assert [m.body for m in models] == [m.body for m in generate(seed, 16)]
        for m in models:
            kinds.add(m.kind.split("_")[0])
            names = [n.lower() for n in sqlglot.parse_one(rendered(m.body), dialect="spark").named_selects]
            assert len(names) == len(set(names)), (seed, m.name, names)  # else its `table` twin fails
            key = m.config.get("unique_key")
            if key is not None:
                assert [k.lower() for k in (key if isinstance(key, list) else [key])] == m.key
            assert "limit" not in m.body.lower() and "rand(" not in m.body.lower()
            assert all(r < m.name for r in m.refs)  # models read only earlier models
    assert {k.split("_")[0] for k in KINDS} <= kinds


def test_avoid_known_redraws():
    models = generate(11, 40, avoid_known=True)
    assert not [m.name for m in models if any(f.startswith("KNOWN_") for f in m.features)]


def test_append_batches_only_insert():
    """An `append` batch's commits insert new rows only: blind INSERTs ('A') or insert-only
    MERGEs, as event tables grow (the replays of such commits may be one checked INSERT)."""
    from tests.fuzz.data import Data, commit_sql

    data = Data(3)
    kinds = [data.batch()[0] for _ in range(2)]
    before = {t: set(rows) for t, rows in data.tables.items()}
    forms = set()
    for _ in range(5):
        for table, ops in data.appends():
            assert {op for op, _ in ops.values()} <= {"A", "I"}
            assert not set(ops) & before[table]  # a new id, or one deleted earlier
            before[table] |= set(ops)
            forms.add(commit_sql("s", table, ops).split()[0])
    assert kinds == ["small", "large"] and forms == {"insert", "merge"}


def test_keyless_models_and_chains():
    """Some models leave unique_key to inference, some of them over keyless batch_refresh
    models (the key recorded upstream passes down); the SQL is what the seed drew."""
    keyless, chains = 0, 0
    for seed in range(60):
        models = generate(seed, 16)
        names = {m.name for m in models if "keyless" in m.features}
        keyless += len(names)
        chains += sum(1 for m in models if m.name in names and set(m.refs) & names)
        assert all("unique_key" not in m.config for m in models if m.name in names)
    assert keyless > 60 and chains > 5, (keyless, chains)


def test_bare_ids_where_sources_are_tested():
    """Keyless join models key by their sides' bare ids only in seeds whose sources' ids are
    tested, and some of them LEFT JOIN a side that matches several rows (the pair key)."""
    from tests.fuzz.generator import tested_sources

    bare, pairs = 0, 0
    for seed in range(60):
        for m in generate(seed, 24):
            if "key_ids" in m.features:
                assert tested_sources(seed) and "keyless" in m.features, (seed, m.name)
                bare += 1
                pairs += "left_join_pairs" in m.features
    assert not tested_sources(372)  # the CI budget's seed draws what it drew before
    assert bare > 20 and pairs > 3, (bare, pairs)


def test_fault_points_exist():
    """Each fail point the fuzz stops runs at is one the adapter has (a renamed point would
    leave those runs unfailed, and the fuzz silently without its interrupted refreshes)."""
    import pathlib

    from tests.fuzz.harness import FAULTS

    package = pathlib.Path(__file__).parents[2] / "dbt" / "adapters" / "spark_batch_refresh"
    text = "\n".join(p.read_text() for p in package.rglob("*.py"))
    for point in FAULTS:
        name = point.split(":")[0]
        assert f'fail_point("{name}")' in text or f'fail_point(f"{name}:' in text, point
