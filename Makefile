# Two commands: `make demo` serves the demo inspector, `make test` runs the whole suite.
# Both set everything up first (a virtualenv with pip, the project, test tools, Chromium).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEMO_ROOT ?= demo-data
PORT   ?= 8000
# The test setup installs every optional extra, so every framework integration is tested with its own package.
TEST_EXTRAS := test,hf,grain,megatron,streaming,energon,litdata,duckdb,ray
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test bench setup setup-test chromium nginx serve clean help

help:
	@echo "make demo   - set up, build the demo workspace (once) and serve it at http://127.0.0.1:$(PORT)"
	@echo "make test   - set up (including Chromium) and run the whole test suite"
	@echo "make bench  - run the benchmarks; results in bench/results/"

$(VENV)/.base: pyproject.toml setup.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e .
	@touch $@

# mosaicml-streaming (a test and bench peer) pulls in a torchvision built for CUDA torch, which cannot load beside the
# CPU torch and breaks every library that imports it when present (transformers, lightning); nothing here needs it.
DROP_TORCHVISION := $(BIN)/python -m pip uninstall -y -q torchvision >/dev/null 2>&1 || true

# pip install $(1), failing as pip fails, without pip's notes on the conflicts made on purpose here: cached-path and
# import-linter disagree about rich, and torchtitan is installed without the dependencies its data loader does not use.
PIP_QUIET_ABOUT_KNOWN_CONFLICTS = out=$$($(BIN)/python -m pip install -q --disable-pip-version-check $(1) 2>&1) || { echo "$$out"; exit 1; }; \
	echo "$$out" | grep -v "dependency resolver\|requires rich\|which is incompatible\|^torchtitan .* requires\|^$$" || true

# torchtitan's package pins datasets<4.8 and pulls wandb and tensorboard, none of which its data loader uses: it is
# installed without its dependencies, then with exactly what its text data loader imports.
TORCHTITAN := 'torchtitan==0.3.0'
TORCHTITAN_LOADER_DEPS := 'torchdata>=0.8' 'tyro>=0.9' 'spmd_types==0.2.3' 'torch_checkpointing>=0.1.0' 'torch==2.13.0'

# The framework extras are installed after the test tools, torchtitan as above; OLMo-core's cached-path pins rich
# below 14, which the import linter (rich >= 14.2) cannot use, so rich is put back to the linter's range after the
# olmo extra (cached-path only draws progress bars with it).
$(VENV)/.test: $(VENV)/.base
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[$(TEST_EXTRAS)]'
	@$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps $(TORCHTITAN)
	@$(call PIP_QUIET_ABOUT_KNOWN_CONFLICTS,$(TORCHTITAN_LOADER_DEPS))
	@$(call PIP_QUIET_ABOUT_KNOWN_CONFLICTS,-e '.[olmo]')
	@$(call PIP_QUIET_ABOUT_KNOWN_CONFLICTS,'rich>=14.2')
	@$(DROP_TORCHVISION)
	@touch $@

$(VENV)/.bench: $(VENV)/.test
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[bench]' || \
		echo "warning: some benchmark peers failed to install; bench reports them as unavailable"
	@$(DROP_TORCHVISION)
	@touch $@

setup: $(VENV)/.base
setup-test: $(VENV)/.test

# Debian's Chromium for the browser tests; quiet and idempotent when present.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian chromium for the browser tests..."; \
		$(SUDO) apt-get update -qq >/dev/null && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; }

# Debian's nginx for the HTTP range-request storage tests.
nginx:
	@command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx || { \
		echo "installing Debian nginx for the HTTP storage tests..."; \
		$(SUDO) apt-get update -qq >/dev/null && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq nginx >/dev/null; }

demo: setup
	$(BIN)/batchscope demo --root $(DEMO_ROOT) --port $(PORT)

# The suite runs on every core (at most 4 worker processes); tests marked xdist_group("ray") share one worker, so a
# local Ray starts once. Pass PYTEST_ARGS to narrow it.
test: setup-test chromium nginx
	$(BIN)/python -m pytest -n auto --maxprocesses=4 --dist loadgroup $(PYTEST_ARGS)

bench: $(VENV)/.bench
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) $(DEMO_ROOT) .pytest_cache .hypothesis
