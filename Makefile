# Two commands on a fresh clone: `make demo` and `make test`. Both create/reuse .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint bench clean accuracy readme docs

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	# torch first, pinned: the CPU wheel that lies on this machine's disk (a looser spec pulls a CUDA build)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	# headless Chromium for the report's browser tests (Debian's package; needs root and apt; skipped otherwise:
	# those tests then skip with the reason)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		  { apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 || \
		    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; }; \
		  } || echo "simcast: chromium not installed; the report's browser tests will skip"; }
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/simcast optimize --input-length 2048 --output-length 512 --num-devices 8 \
		--tp-sizes 1 2 4 8 --pp-sizes 1 2 4 8 --device h100_sxm meta-llama/Llama-3.1-70B --report demo-report.html
	@echo "open demo-report.html in a browser: the same search as one self-contained page"

# Lint, formatting and types first (seconds; mypy's cache then serves the suite's own mypy test), then the
# suite (config in pyproject.toml) on every core (pytest-xdist; one worker per test file, so a module's
# fixtures are built once); the target fails on any of them.
LINTED := simcast tests benchmarks scripts
test: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy simcast
	$(BIN)/python -m pytest -n auto --dist loadfile

# The quick tier while iterating: no test marked slow or notebook (markers in pyproject.toml); about a minute on 2 cores
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n auto --dist loadfile -m "not slow and not notebook"

# Lint and types only (fast): what make test runs before the suite
lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy simcast

bench: $(STAMP)
	$(BIN)/python benchmarks/simulate_speed.py
	$(BIN)/python benchmarks/search_speed.py

clean:
	rm -rf $(VENV) build *.egg-info

# Held-out accuracy table against ../shared/calibration (Vidur timings) -> docs/accuracy.md
accuracy: $(STAMP)
	$(BIN)/python scripts/accuracy.py

# Re-run the example commands of README.md and docs/usage.md and paste their real output
readme: $(STAMP)
	$(BIN)/python scripts/update_readme_examples.py

# docs/cli.md from the argparse parser (tests/cli/test_cli_docs.py fails when it is stale), then every figure a
# page copies from another (marked <!-- fig:NAME -->) from its source page (tests/project/test_docs.py checks them)
docs: $(STAMP)
	$(BIN)/python scripts/gen_cli_docs.py
	$(BIN)/python scripts/sync_doc_figures.py
