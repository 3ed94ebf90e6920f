# The two set-up commands the README promises: `make demo` and `make test`; `make` or `make help` lists the targets.
# make demo runs the pods' containers as their user, uid 1000, when uid 1000 can start this Python (not one
# under a private home such as pyenv's in /root).
PYTHON ?= python3
# The oldest Python the set-up accepts: tarfile's extraction filters (PEP 706), which prepare-data relies on, came to
# 3.11 in 3.11.4 (python/cpython commit 241f2e54, the 3.11 backport; Doc/library/shutil.rst: "added in Python
# 3.11.4"). Debian 12's 3.11.2 lacks them.
MIN_PYTHON := 3.11.4
# "Python 3.11.2" when $(PYTHON) is older than MIN_PYTHON, "not a command here" when it does not run, else empty.
OLD_PYTHON = $(shell version=$$($(PYTHON) --version 2>&1) || { echo "not a command here"; exit 0; }; \
	printf '%s\n' $(MIN_PYTHON) "$$(echo $$version | cut -d' ' -f2)" | sort -V -C || echo "$$version")
, := ,
VENV := .venv
BIN := $(VENV)/bin
# uv installs the set-up's packages: from its cache (~/.cache/uv, shared by every clone on the machine) by hard link,
# downloading only what is not there yet. pip kept no cache here (the package index sends no caching headers) and
# unpacked torch's 2.9 GB on every set-up: 2 min where uv takes seconds. Pinned, as the installer of everything else.
UV_VERSION := 0.9.30
UV := $(BIN)/uv
# The system's certificate store for the package index, as pip is configured here.
export UV_NATIVE_TLS := 1
# Bytecode as Python keeps it by default: each module compiled at its first import and kept. This machine sets
# PYTHONDONTWRITEBYTECODE, under which every process would compile torch again (3.3 s where 1.9 s do, in every rank);
# compiling all 20,000 files of the SDKs, torch and checkov at install instead (uv --compile-bytecode) took 33 s of
# the set-up for the few thousand a run imports.
unexport PYTHONDONTWRITEBYTECODE
STAMP := $(VENV)/.installed-eks-ddp
TORCH_BYTECODE := $(VENV)/.torch-bytecode
# Which Pulumi.<stack>.yaml `make demo` and `make preview` read: make preview STACK=gpu
STACK ?= dev
# Stack keys set for one run, as `pulumi up --config` does: make demo CONFIG=eks-ddp:trainingOperator=v2
CONFIG ?=
# The workshop's 3-build-container folder `make bench` runs cifar10-model-train.py from (default: our own loop)
BASELINE ?=
# More flags for `make bench` and `make bench-phases` (python -m benchmarks.paired --help)
BENCH_ARGS ?=

# pipefail: the set-up shows pip's progress through a filter (sed, which succeeds on no match) and must still
# fail when pip does.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
# Set-up prints each step as it starts and what it took; pip's progress is one line per package it fetches.
STEP = @echo "==> $(1)"; SECONDS=0
TOOK = echo "    took $$SECONDS s"
PROGRESS = sed -n -u -E 's/^(Collecting|Installing collected|Successfully installed)/    &/p' | cut -c1-118
# `uv pip install` into the environment $(1): its summary ("Prepared": what it downloaded), or all it said if it failed.
UV_INSTALL = out=$$($(UV) pip install --python $(1) $(2) 2>&1) || { echo "$$out"; exit 1; }; \
	echo "$$out" | sed -n -E 's/^(Resolved|Prepared|Installed|Uninstalled) /    &/p'

.PHONY: help demo tensorboard preview rehearse test typecheck docs unit bench bench-phases bench-accuracy \
	watch-picture clean engines cluster-up cluster-down deploy-local deploy-local-down test-pulumi planted-defects mutate
.DEFAULT_GOAL := help

CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed

# Set up again whenever what decides it changes, this file (uv's pin) included: seconds with uv's cache warm.
$(STAMP): Makefile pyproject.toml requirements.txt requirements-dev.txt trainer/requirements.txt
	$(if $(OLD_PYTHON),$(error PYTHON=$(PYTHON) is $(OLD_PYTHON); the set-up needs Python $(MIN_PYTHON) or later \
		(tarfile's extraction filters): give another, e.g. make PYTHON=python3.12))
	$(call STEP,[1/3] a virtual environment in $(VENV) from $(PYTHON) ($(shell $(PYTHON) --version 2>&1)))
	@$(PYTHON) -m venv $(VENV); $(TOOK)
	$(call STEP,[2/3] uv $(UV_VERSION) in it$(,) from the package index pip is configured with)
	@$(BIN)/python -m pip install --progress-bar off uv==$(UV_VERSION) | $(PROGRESS); $(TOOK)
	$(call STEP,[3/3] the Pulumi SDKs (requirements.txt)$(,) the trainer (torch 2.13.0)$(,) the test tools and eks-ddp \
		itself (editable)$(,) by uv from its cache and the index)
	@$(call UV_INSTALL,$(BIN)/python,-r requirements.txt -e '.[trainer$(,)dev]'); $(TOOK)
	@touch $@

# Before make demo's pods start: they run as a user who cannot write bytecode into .venv, and would compile torch in
# every rank of every demo. make test's own processes write it as they first import torch.
$(TORCH_BYTECODE): $(STAMP)
	$(call STEP,the bytecode of torch$(,) which the demo's pods import as a user who cannot write it)
	@$(BIN)/python -c 'import torch._dynamo, torch.distributed.run'; $(TOOK)
	@touch $@

# checkov in its own environment (its pins would downgrade boto3 and others in .venv); tests/test_checkov.py runs it.
$(CHECKOV_STAMP): requirements-checkov.txt $(STAMP)
	$(call STEP,checkov (requirements-checkov.txt) in $(CHECKOV_VENV)$(,) for the security checks of the manifests)
	@$(PYTHON) -m venv --without-pip $(CHECKOV_VENV) && $(call UV_INSTALL,$(CHECKOV_VENV)/bin/python,\
		-r requirements-checkov.txt); $(TOOK)
	@touch $@

## help: this list of targets (what a plain `make` prints)
help:
	@echo "make <target> [STACK=<stack>] [CONFIG='<key>=<value> ...'] [PYTHON=<python3.11.4 or later>]; targets:"
	@sed -n -E 's/^## ([a-z-]+): (.*)/\1\t\2/p' $(firstword $(MAKEFILE_LIST)) | expand -t 16 | sed 's/^/  /'

## demo: run a stack's rendered PyTorchJob and EvaluationJob on this machine (default the dev stack: 2 replicas)
demo: $(STAMP) $(TORCH_BYTECODE)
	$(BIN)/python -m eks_ddp.tools.local --stack $(STACK) $(addprefix --config ,$(CONFIG))

## tensorboard: TensorBoard on 127.0.0.1:6006 for the newest run's events under runs/ (make demo's, for one)
tensorboard: $(STAMP)
	$(BIN)/python -m eks_ddp.tools.last_run

## preview: what `pulumi up` would create for a stack (default dev), offline, with its hourly cost
preview: $(STAMP)
	$(BIN)/python -m eks_ddp.tools.preview --stack $(STACK) $(addprefix --config ,$(CONFIG))

## rehearse: every stack file's first `pulumi up` against the engines' rules, offline (also part of `make test`)
rehearse: $(STAMP)
	$(BIN)/python -m eks_ddp.tools.rehearsal

# The type check and the docs build run beside the suite, their output kept in runs/checks.log and shown after it:
# the suite keeps both cores busy, and in front of it they added 40 s. Either failing fails make test.
## test: build the engines, then run the whole test suite beside the type check and the strict docs build
test: engines
	@mkdir -p runs; { $(MAKE) --no-print-directory typecheck docs > runs/checks.log 2>&1 && echo 0 || echo $$?; } \
		> runs/checks.rc & suite=0; $(MAKE) --no-print-directory unit || suite=$$?; wait; \
		echo "==> make typecheck docs (beside the tests)"; cat runs/checks.log; checks=$$(cat runs/checks.rc); \
		rm -f runs/checks.rc; exit $$(( suite || checks ))

# Go 1.26 and the Go module proxy build them (tests/cluster/engines: each folder's go.mod pins one upstream module);
# binaries are kept in ~/.cache/eks-ddp/engines, keyed by what decides them, so a second clone builds nothing.
## engines: build the local cluster's engines from their Go modules (part of make test; the first time takes minutes)
engines: $(STAMP)
	$(BIN)/python -m tests.cluster.engines.build

## cluster-up: a local cluster on 127.0.0.1 with a stack's nodes and objects on the real engines (make cluster-up STACK=gpu)
cluster-up: $(STAMP)
	$(BIN)/python -m tests.cluster.local_cluster up --stack $(STACK) $(addprefix --config ,$(CONFIG))

## cluster-down: stop every process of every local cluster that make cluster-up started
cluster-down: $(STAMP)
	$(BIN)/python -m tests.cluster.local_cluster down

## deploy-local: the real `pulumi up` of a stack (STACK=dev CONFIG=...) onto a local cluster of its nodes
deploy-local: $(STAMP)
	$(BIN)/python -m tests.cluster.deploy_local up --stack $(STACK) $(addprefix --config ,$(CONFIG))

## deploy-local-down: `pulumi destroy` of what deploy-local deployed (STACK=dev), then its cluster stopped
deploy-local-down: $(STAMP)
	$(BIN)/python -m tests.cluster.deploy_local down --stack $(STACK)

# Not in make test (about 15 minutes), nor yet in .ci/run: a case's first pulumi up hangs at times. tests/cluster/test_every_stack_on_pulumi.py
# says what each case goes through.
## test-pulumi: every stack under every operator through Pulumi's own CLI and provider on the engines
test-pulumi: engines
	$(BIN)/python -m pytest -m pulumi_tier --durations=0 tests/cluster/test_every_stack_on_pulumi.py

# TARGETS: which of tests/mutation/targets.toml's targets make mutate runs (default: all), e.g. TARGETS=cost
TARGETS ?=
## mutate: mutation testing of the modules where a silent bug loses data or money (tests/mutation/targets.toml)
mutate: $(STAMP)
	$(BIN)/python -m tests.mutation $(TARGETS)

## planted-defects: put back, one at a time, six bugs the cluster tests must catch, and show each test failing
planted-defects: $(STAMP) engines
	$(BIN)/python -m tests.cluster.planted_defects

## typecheck: pyright over all code (part of make test)
typecheck: $(STAMP)
	$(BIN)/pyright

## docs: the documentation site in runs/site; a broken link or anchor fails it; it loads nothing from another host
# (its diagrams' mermaid is fetched at the first build from npm, pinned, into .venv: docs/hooks/offline_mermaid.py)
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir runs/site

# Three workers; the tests that start a local cluster run one after another on one of them (their xdist_group: one
# cluster per machine), the rest spread over all three; the slowest tests start first (conftest.py) and are listed
# at the end.
## unit: the whole test suite alone, three workers at a time (part of make test)
unit: $(STAMP) $(CHECKOV_STAMP)
	$(BIN)/python -m pytest -n 3 --dist loadgroup --durations=15

# BENCH_ARGS: more flags for bench and bench-phases, e.g. --as-avx2-cpu.
## bench: the trainer against the workshop's script (BASELINE=<its folder>) or workshop-style loop, pair by pair
bench: $(STAMP)
	$(BIN)/python -m benchmarks.paired $(addprefix --baseline ,$(BASELINE)) $(BENCH_ARGS) --output benchmarks/results/latest.json

## bench-phases: where one epoch's time goes on each side of make bench, phase by phase
bench-phases: $(STAMP)
	$(BIN)/python -m benchmarks.phases $(addprefix --baseline ,$(BASELINE)) $(BENCH_ARGS) \
		--output benchmarks/results/latest-phases.json

## bench-accuracy: images/s and the time to 97 % accuracy on the MNIST subset
bench-accuracy: $(STAMP)
	$(BIN)/python -m benchmarks.accuracy --output benchmarks/results/latest-accuracy.json

## watch-picture: the training dashboard's panels from a real local run's scraped metrics (docs/watch-training.png)
watch-picture: $(STAMP)
	$(BIN)/python -m eks_ddp.tools.watch_picture --output docs/watch-training.png

## clean: remove the environments, runs/ (make demo's results included) and pytest's cache
clean:
	rm -rf $(VENV) $(CHECKOV_VENV) runs .pytest_cache
