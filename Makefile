# The two set-up commands the README promises: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-eks-ddp
DEMO_DIR := runs/demo

.PHONY: demo test typecheck unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

## demo: train the bundled trainer on 2 local ranks (digits, offline) and print where the results are
demo: $(STAMP)
	rm -rf $(DEMO_DIR)
	OMP_NUM_THREADS=1 $(BIN)/torchrun --standalone --nproc-per-node 2 -m trainer train \
		--dataset digits --epochs 10 \
		--output-dir $(DEMO_DIR) --checkpoint-dir $(DEMO_DIR)/checkpoints

## test: type-check everything, then run the whole test suite
test: typecheck unit

typecheck: $(STAMP)
	$(BIN)/pyright

unit: $(STAMP)
	$(BIN)/python -m pytest

## bench: trainer vs. the workshop-style loop (images/s and time to 97 % on MNIST)
bench: $(STAMP)
	$(BIN)/python -m benchmarks.run --output benchmarks/results/latest.json

clean:
	rm -rf $(VENV) runs .pytest_cache
