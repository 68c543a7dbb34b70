# tilemark — `make help` lists the targets.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
ENGINE_SRC := $(shell find crates -name '*.rs' -o -name Cargo.toml) Cargo.toml
.DEFAULT_GOAL := help

.PHONY: help build run test check rust-tests-built test-rust test-python lint fmt bench bench-index clean system-deps docs screenshots wheel

help: ## list targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  make %-12s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q "maturin>=1.7,<2" "typer>=0.26,<0.29" "rich>=13" "duckdb>=1.0" "msgspec>=0.18" "pyarrow>=15" "altair>=5" "vl-convert-python>=1.3" "ruptures>=1.1" "scipy>=1.10" "numpy>=1.24" "prometheus-client>=0.20" "zstandard>=0.22" "lz4>=4.3" "distributed>=2024.1" "cryptography>=42" "pytest>=8" "pytest-xdist>=3.5" "ruff>=0.6" "playwright" "pandas>=2"
	touch $@

$(VENV)/.engine: $(ENGINE_SRC) $(VENV)/.deps
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(BIN)):$$PATH $(BIN)/maturin develop --release -q
	touch $@

build: $(VENV)/.engine ## virtualenv in .venv, release build of the engine, `tilemark` on .venv/bin
	@# Bytecode written once: where PYTHONDONTWRITEBYTECODE is set (this machine, CI), every
	@# `tilemark` process would otherwise compile the modules it imports again (~0.5 s of a run).
	@$(BIN)/python -m compileall -q -j 0 python tests bench >/dev/null

WHEEL_DIR ?= dist
# PYO3_PYTHON as `maturin develop` sets it and no `--strip` (Cargo.toml's release profile strips
# the debug info): with the same build inputs cargo reuses `make build`'s engine (3 s, not 25).
wheel: $(VENV)/.deps ## abi3 manylinux wheel with the engine inside, in dist/ (pip install needs no Rust)
	PYO3_PYTHON=$(abspath $(BIN))/python $(BIN)/maturin build --release -q -o $(WHEEL_DIR)

system-deps: ## install Debian packages the rigs use (fio, nbdkit, nbdfuse) when missing and root
	@bash scripts/system-deps.sh

run: build ## default tile benchmark (scaling study) on ./tilemark-data/scratch.dat, results in ./tilemark-results
	$(BIN)/tilemark scale --target tilemark-data/scratch.dat --tiles 1..8 --duration 10 --warmup 2 --results tilemark-results

# Three pytest workers on the 2-core development machines: the tier's tests wait on throttled
# devices, delays, applications and subprocesses about half their time (370 s of CPU in a
# 368 s run with two workers), so a third worker fills the idle core (a fresh clone: 328 s for
# 1,651 tests with three, 368 s for 1,550 with two). Tests marked `serial` run after the rest,
# alone, because their assertions hold timing or CPU to a tolerance. Modules go to the workers
# whole (their fixtures build a study or start an application once), the ones marked with a
# `cost` first, longest first, so the last minute is not one worker running two 40 s modules
# while the others wait; the blkio-throttled ones last, away from the busy start
# (tests/conftest.py, module_order). pytest exits 5 when a selection is empty, which is not
# a failure here.
TEST_WORKERS ?= 3
PYTEST := $(BIN)/python -m pytest -q -p no:cacheprovider

# The Rust tests compile (debug profile) while pip installs the Python packages and apt the rig
# packages: pip and apt mostly wait on the network and disk, the compiler wants both cores, so
# on a fresh clone the setup takes about the time of the longer of the two instead of their sum.
# The slowest tests of each tier are listed at the end (where the 10 minutes go, in CI's log).
test: ## every test: Rust unit tests, then Python unit and end-to-end tests (<= 10 min)
	$(MAKE) --no-print-directory -j3 build system-deps rust-tests-built
	cargo test --workspace --exclude tilemark-py -q
	$(PYTEST) -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not serial" --durations=15 tests || [ $$? -eq 5 ]
	$(PYTEST) -m serial --durations=12 tests || [ $$? -eq 5 ]

rust-tests-built:
	cargo test --workspace --exclude tilemark-py -q --no-run

check: build ## the inner loop (<= 2 min): Rust and Python unit tests and the quick end-to-end tests
	cargo test --workspace --exclude tilemark-py -q
	$(PYTEST) -n $(TEST_WORKERS) -m "(not e2e or quick) and not serial" tests || [ $$? -eq 5 ]

lint: build ## cargo fmt --check, clippy -D warnings, ruff check and format --check
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -q -- -D warnings
	$(BIN)/ruff check python tests bench
	$(BIN)/ruff format --check python tests bench

docs: build ## regenerate docs/options.md (option table) and the typed fields of docs/results-schema.md
	$(BIN)/python -m tilemark.options > docs/options.md
	$(BIN)/python -m tilemark.store.results docs/results-schema.md

SHOTS := docs/screenshots
screenshots: build system-deps ## the top of one report of every kind at 1400 px, as docs/screenshots/report-KIND.png
	rm -rf $(SHOTS).new && TILEMARK_SCREENSHOTS=$(abspath $(SHOTS)).new $(PYTEST) tests/e2e/test_report_browser.py -k reads_cleanly
	@# Palette PNGs are a quarter of the size; without pngquant (Debian) they stay as taken.
	@if command -v pngquant >/dev/null; then for f in $(SHOTS).new/*.png; do \
	  pngquant --quality 60-85 --strip --speed 1 --force --output $$f -- $$f; done; fi
	rm -rf $(SHOTS) && mv $(SHOTS).new $(SHOTS)

fmt: ## format Rust and Python
	cargo fmt --all
	$(BIN)/ruff format python tests bench

bench: build system-deps ## tilemark vs fio side by side; results under bench/results/, then the index
	$(BIN)/python bench/vs_fio.py; status=$$?; $(BIN)/python bench/index.py && exit $$status

bench-index: ## regenerate bench/results/INDEX.md from the results files
	$(BIN)/python bench/index.py

clean: ## remove build products (keeps results)
	cargo clean
	rm -rf $(VENV) dist python/tilemark/_engine*.so
