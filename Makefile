# Two commands on a fresh clone: `make demo` and `make test`. Both create/reuse .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	# torch first, pinned: the CPU wheel that lies on this machine's disk (a looser spec pulls a CUDA build)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/simcast simulate --model meta-llama/Llama-3.1-70B --device h100_sxm --tp 4 --pp 2 --batch 8 --input-length 2048

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/simulate_speed.py

clean:
	rm -rf $(VENV) build *.egg-info
