# Two entry points for users: `make demo` and `make test`. Everything else is plumbing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.deps-installed

.PHONY: install demo test test-unit test-functional bench bench-quick bench-tpch clean fuzz tpcds

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet ".[dev]"
	touch $(STAMP)

# The package is installed as a wheel (not editable) so tests exercise the shipped layout.
install: $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall .

demo: install
	$(BIN)/python scripts/demo.py

# Two pytest workers, whole files each: a test JVM runs one task slot (tests/spark_confs.py) and
# keeps about one core busy, so two of them fill this 2-core machine; whole files keep each
# stateful test class and each Thrift server's tests on one worker. Files are handed out in
# collection order, heaviest first (tests/conftest.py), not xdist's default of most tests first.
test: install
	$(BIN)/python -m pytest tests -n 2 --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The random-query differential test (tests/fuzz, issue 31) with a larger budget than the one
# `make test` runs: MODELS generated models, each built as batch_refresh and as table, compared
# after the backfill and after each of STEPS random change batches. SEED may list several seeds
# (one pytest process, one JVM, each). A summary per seed is printed; each failure's
# reproduction (model SQL, seed, step, change batch, differing rows) goes to FUZZ_OUT/seed<S>/,
# the pytest output to FUZZ_OUT/seed<S>.log.
# FUZZ_AVOID_KNOWN=1 redraws models shaped like a known defect (features named KNOWN_...).
# FUZZ_FAULTS=0 leaves out the runs failing at a fail point before every other checked run.
SEED ?= 1
MODELS ?= 30
STEPS ?= 4
FUZZ_OUT ?= fuzz-failures
FUZZ_AVOID_KNOWN ?=
FUZZ_FAULTS ?= 1
fuzz: install
	@mkdir -p $(FUZZ_OUT); status=0; for seed in $$(echo "$(SEED)" | tr ',' ' '); do \
		BATCH_REFRESH_FUZZ_SEED=$$seed BATCH_REFRESH_FUZZ_MODELS=$(MODELS) \
		BATCH_REFRESH_FUZZ_STEPS=$(STEPS) BATCH_REFRESH_FUZZ_OUT=$(FUZZ_OUT) \
		BATCH_REFRESH_FUZZ_AVOID_KNOWN=$(FUZZ_AVOID_KNOWN) BATCH_REFRESH_FUZZ_FAULTS=$(FUZZ_FAULTS) \
		nice -n 10 $(BIN)/python -m pytest tests/fuzz/test_fuzz.py -q $(PYTEST_ARGS) > $(FUZZ_OUT)/seed$$seed.log 2>&1 \
		|| status=1; \
		cat $(FUZZ_OUT)/seed$$seed/summary.txt 2>/dev/null || tail -30 $(FUZZ_OUT)/seed$$seed.log; \
	done; exit $$status

# TPC-DS as a differential test (tests/tpcds/diff.py): sqlglot's 99 TPC-DS queries and tiny
# data set (its source distribution, downloaded once from PyPI) as batch_refresh models against
# tables, after TPCDS_STEPS change batches; TPCDS_ARGS e.g. --keys --config "aggregate_upkeep='delta'".
TPCDS_STEPS ?= 2
TPCDS_ARGS ?= --keys
tpcds: install
	nice -n 10 $(BIN)/python tests/tpcds/diff.py --steps $(TPCDS_STEPS) $(TPCDS_ARGS)

test-unit: install
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

clean:
	rm -rf build dist *.egg-info examples/.batch_refresh examples/target examples/logs

# Benchmark (bench/README.md). Not part of `make test`.
SCALES ?= 1000000
FRACTIONS ?= 0.0001,0.001,0.01,0.1
# Which keys a change batch touches (bench/data.py): uniform (worst case), recent, append.
DISTRIBUTIONS ?= uniform
SHAPES ?= rowwise,agg,join_agg
REPS ?= 3
DRIVER_MEMORY ?= 8g
BENCH_NAME ?= bench
# BENCH_ARGS: more bench/run.py flags, e.g. --no-incremental (dbt's incremental models are
# wrong on deletes and take minutes per round at 100M rows)
BENCH_ARGS ?=
BENCH_STAMP := $(VENV)/.bench-deps-installed

$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install --quiet ".[bench]"
	touch $(BENCH_STAMP)

bench: install $(BENCH_STAMP)
	nice -n 10 $(BIN)/python bench/run.py --scales $(SCALES) --fractions $(FRACTIONS) \
		--distributions $(DISTRIBUTIONS) --shapes $(SHAPES) --reps $(REPS) \
		--driver-memory $(DRIVER_MEMORY) --name $(BENCH_NAME) $(BENCH_ARGS)

# A few minutes: 100k rows, the row-wise shape (replay, hand MERGE, rebuild, incremental,
# skip, no-op), 2 change distributions (recent, uniform) x 2 change fractions, 1 repetition.
# Results under bench/results/quick.*
bench-quick: install $(BENCH_STAMP)
	nice -n 10 $(BIN)/python bench/run.py --scales 100000 --fractions 0.001,0.1 \
		--distributions recent,uniform --shapes rowwise --reps 1 --driver-memory 4g --name quick

# The 22 TPC-H queries (examples/tpch) refreshed after RF1 + RF2 + updates against the same
# queries rebuilt as tables (bench/tpch.py). TPCH_SCALE is the TPC-H scale factor.
TPCH_SCALE ?= 1
TPCH_STEPS ?= 1
bench-tpch: install $(BENCH_STAMP)
	nice -n 10 $(BIN)/python bench/tpch.py --scale $(TPCH_SCALE) --steps $(TPCH_STEPS) \
		--driver-memory $(DRIVER_MEMORY) --name tpch-sf$(TPCH_SCALE) $(BENCH_ARGS)
