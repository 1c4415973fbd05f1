# Two entry points for users: `make demo` and `make test`. Everything else is plumbing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.deps-installed

.PHONY: install demo test test-unit test-functional bench bench-quick clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet ".[dev]"
	touch $(STAMP)

# The package is installed as a wheel (not editable) so tests exercise the shipped layout:
# macros/ is mapped into dbt/include/spark_batch_refresh/macros by the build.
install: $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall .

demo: install
	bash scripts/demo.sh

test: install
	$(BIN)/python -m pytest tests $(PYTEST_ARGS)

test-unit: install
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

clean:
	rm -rf build dist *.egg-info integration_tests/.batch_refresh integration_tests/target integration_tests/logs
