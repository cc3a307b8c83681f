# clusterlab: `make run` runs the main job on a local loopback cluster, `make test` runs every
# check. Both install what they need into .venv first (idempotent: stamps skip done work).

PYTHON ?= python3
VENV   := .venv
PY     := $(abspath $(VENV))/bin/python
BIN    := $(abspath $(VENV))/bin
export PYO3_PYTHON := $(PY)
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(BIN):$(PATH)

RUST_SRC := $(shell find crates -name '*.rs' -o -name Cargo.toml) Cargo.toml pyproject.toml

.PHONY: setup run test lint rust-test py-test clean-build bench system-deps

# Bytecode for the package's modules, written here because where PYTHONDONTWRITEBYTECODE is set
# (this CI's environment) Python never caches it and every rank and CLI process compiled again
# the modules it imports (`clusterlab mine --nodes 2` on a 5-line file: 2.3 -> 1.2 s; `mine` alone
# 0.7 -> 0.4 s). compileall writes only what changed; Python still checks each file against its source.
setup: $(VENV)/.built
	@$(PY) -m compileall -q python/clusterlab

# System packages some parts need (storage: the tgt iSCSI target, libiscsi, bonnie++, iperf3; the simulated
# cluster: SimGrid 3.32's Python module, python3-simgrid, bound to Debian's /usr/bin/python3 and run there as
# a separate engine process, docs/simulation.md says why). Installed only when root and one is missing, so
# `make test` stays idempotent; tests skip without them.
SYSTEM_PKGS := tgt libiscsi-dev libiscsi-bin bonnie++ strace iperf3 python3-simgrid
system-deps:
	@echo "== system-deps $$(date -u +%T)"
	@missing=$$(for p in $(SYSTEM_PKGS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then echo "system-deps: missing" $$missing "(needs root and apt-get; their tests skip)"; \
	else echo "system-deps: installing" $$missing; apt-get update -q >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null; fi

$(VENV)/.tools: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "maturin>=1.7,<2"
	touch $@

# maturin develop builds the Rust core in release mode, links the package source into the
# venv (Python edits need no rebuild) and installs the dev extras.
$(VENV)/.built: $(VENV)/.tools $(RUST_SRC)
	@echo "== maturin develop $$(date -u +%T)"
	$(BIN)/maturin develop --release --extras dev,report,bench -q
	touch $@

run: setup
	$(BIN)/clusterlab demo

# Each step of `make test` prints when it starts (`make test` ends with the time too): the CI log
# then says where its minutes go.
lint: setup
	@echo "== lint $$(date -u +%T)"
	$(BIN)/ruff check python tests bench
	cargo clippy --workspace --all-targets --release -- -D warnings

# The core's unit tests alone (--lib): `cargo test` on the core also builds its examples, and with
# them the library a second time without the test harness (70 CPU-s, the largest unit of the build;
# 90 -> 56 s for the four crates' tests). The examples are type-checked by clippy --all-targets
# above; the core has no integration tests and no doctests (they would not run here), which
# tests/test_rust_targets.py keeps true.
rust-test:
	@echo "== rust-test $$(date -u +%T)"
	cargo test -p clusterlab-core --lib --profile release-tests
	cargo test -p clusterlab-net -p clusterlab-wan -p clusterlab-atm --profile release-tests

# Three workers on 2 cores: much of the suite waits on dilated networks, timers and subprocesses,
# not the CPU; a third worker fills those waits (656 -> 533 s on a fresh clone, the cores 97-100%
# busy instead of idle a fifth of the time). The tests whose outcome depends on the CPU a rank gets
# are marked `serial` and run after, alone (tests/conftest.py says which and why).
# worksteal, not xdist's default load: load hands out long runs of consecutive tests that are never
# taken back, so the documented-command tests (16 in a row, about 450 s) can all land on one worker
# while the others run out of work; worksteal lets an idle worker take half of another's queue.
py-test: setup
	@echo "== py-test $$(date -u +%T)"
	$(PY) -m pytest -q -n 3 --dist worksteal -m "not serial" --durations=60
	@echo "== py-test serial $$(date -u +%T)"
	$(PY) -m pytest -q -m serial --durations=10

test: system-deps setup lint rust-test py-test
	@echo "== test done $$(date -u +%T)"

bench: setup
	$(PY) bench/generate.py

clean-build:
	rm -rf $(VENV) target python/clusterlab/_core*.so
